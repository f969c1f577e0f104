"""A job's secrets, kept out of what a cluster shows everyone: the Ray dashboard shows a job's
``runtime_env``, so a tracking URI with a password or a token goes to a user-only file in the run
folder instead, its path in :data:`SECRET_ENV_FILE_VAR`. The entrypoint is :func:`wrapped` to load
it first; the verl plug-in loads it in each Ray worker (:func:`load_secret_env`). Light imports
only: it starts before every job."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from orchestrator import configuration
from orchestrator.runs.atomic import write_atomic

SECRET_ENV_FILE_VAR = "KAPPA_SECRET_ENV_FILE"
FILE_NAME = ".kappa-secret-env.json"
# Variables secret by name whatever their value (MLflow's basic auth and token, cloud keys).
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|CREDENTIAL", re.IGNORECASE)


def split_secrets(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``env`` as (variables that may be shown, secret ones): those with a secret-looking
    name, or a value with a password in it (a URL ``scheme://user:password@host``)."""
    from orchestrator.redact import has_credentials

    secret = {name: value for name, value in env.items()
              if _SECRET_NAME.search(name) or has_credentials(value)}
    return {k: v for k, v in env.items() if k not in secret}, secret


def write_secret_env(folder: Path, secret: Mapping[str, str]) -> Path:
    """Write ``secret`` to ``folder``/:data:`FILE_NAME`, mode 0600 from its creation."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / FILE_NAME, json.dumps(dict(secret)), mode=0o600)
    return folder / FILE_NAME


def load_secret_env(environ: MutableMapping[str, str] | None = None) -> int | None:
    """Add the variables of the file :data:`SECRET_ENV_FILE_VAR` names to ``environ``
    (default ``os.environ``) where unset; how many (0: no file; ``None``: unreadable)."""
    env = os.environ if environ is None else environ
    path = configuration.read(SECRET_ENV_FILE_VAR, env)
    if not path:
        return 0
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    new = {name: value for name, value in (data.items() if isinstance(data, dict) else ())
           if isinstance(name, str) and isinstance(value, str) and name not in env}
    env.update(new)
    return len(new)


def wrapped(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` started through this module's wrapper (which loads the secrets first)."""
    return (sys.executable, "-m", "orchestrator.executors.job_secrets", *argv)


def main(argv: list[str]) -> int:
    """Load the secrets, then become ``argv`` (same pid: signals reach the command)."""
    if not argv:
        print("usage: python -m orchestrator.executors.job_secrets CMD [ARG...]", file=sys.stderr)
        return 2
    if load_secret_env() is None:
        print("kappa: cannot read the job's secrets from "
              f"{configuration.read(SECRET_ENV_FILE_VAR)} (the run folder must be reachable, "
              "and readable by the cluster's user)",
              file=sys.stderr, flush=True)
    os.execvp(argv[0], argv)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
