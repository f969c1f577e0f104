"""What a sweep's notifications keep in its folder (``runs/<sweep>/``):

* ``notify.json``: where and when to post (the spec's ``notify:`` block with ``${NAME}``
  resolved, or ``kappa submit --notify URL`` / ``--notify-env NAME``), written by the
  latest submit (owner-only: the URL is a secret; a submit with neither removes it) and
  read by every scheduler of the sweep, so a background one needs neither the spec nor
  the variable;
* ``notify-sent.jsonl``: the key of every message a scheduler began to send, so that none goes out
  twice, across restarts too (one whose scheduler died while sending it is not sent again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import ValidationError

from orchestrator.errors import Problem, UserInputError
from orchestrator.runs.atomic import write_atomic
from orchestrator.runs.layout import NOTIFY_FILE, NOTIFY_SENT_FILE, sweep_folder
from orchestrator.spec.notify_block import ENV_REFERENCE, NotifySpec, mask_url, url_problem

LOG = logging.getLogger(__name__)

# ``kappa submit --notify URL``: the URL for every sweep this command records (the grid's
# and its canaries'), in place of the spec's block's.
_COMMAND_LINE_URL: ContextVar[str | None] = ContextVar("kappa_notify_url", default=None)


def environment_url(name: str) -> str:
    """``--notify-env NAME``: the URL held by the environment variable ``NAME``, so that it
    is on no command line (``ps`` shows those to every user of the machine); a
    ``UserInputError`` (exit 2) if ``NAME`` is no variable name or the variable is unset."""
    if not ENV_REFERENCE.match(f"${{{name}}}"):
        raise UserInputError("--notify-env: not a variable name", [Problem(
            "--notify-env", "not an environment variable's name", found=repr(name[:200]),
            allowed="letters, digits and _, not starting with a digit",
            fix="--notify-env KAPPA_SLACK_WEBHOOK (the name, without $)")])
    url = os.environ.get(name, "").strip()
    if not url:
        raise UserInputError(f"--notify-env: {name} is not set", [Problem(
            "--notify-env", f"the environment variable {name} is not set",
            fix=f"export {name}=https://hooks.slack.com/services/... before this command")])
    return url


@contextmanager
def command_line_url(url: str | None, option: str = "--notify") -> Iterator[None]:
    """Within the block, sweeps recorded notify ``url`` rather than what their spec says
    (``None``: the spec decides); a URL that cannot take a JSON POST is a
    ``UserInputError`` (exit 2) at ``option``, quoting it masked."""
    if url is not None and (why := url_problem(url)) is not None:
        raise UserInputError(f"{option}: not a webhook URL", [Problem(
            option, f"the URL {why}", found=mask_url(url),
            fix="give the webhook's full URL, e.g. https://hooks.slack.com/services/...")])
    token = _COMMAND_LINE_URL.set(url)
    try:
        yield
    finally:
        _COMMAND_LINE_URL.reset(token)


def effective(block: NotifySpec | None) -> NotifySpec | None:
    """What a submit of a spec with ``block`` notifies: ``--notify``'s URL (with the
    block's events, else all) or the block, ``${NAME}`` resolved; a variable that is unset
    is a ``UserInputError`` (before anything is written)."""
    url = _COMMAND_LINE_URL.get()
    if url is not None:
        return NotifySpec(url=url) if block is None else NotifySpec(url=url, events=block.events)
    if block is None:
        return None
    try:
        return block.resolved()
    except ValueError as exc:
        raise UserInputError("notify: no URL to post to", [Problem(
            "notify.url", str(exc), found=block.url,
            fix=f"export {block.env_name}=https://... before submitting, or give "
                "--notify URL")]) from None


def save_config(sweep: str, block: NotifySpec | None) -> None:
    """Record (or, for ``None``, remove) what ``sweep``'s schedulers notify."""
    path = sweep_folder(sweep) / NOTIFY_FILE
    if block is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, block.model_dump_json(), mode=0o600)


def load_config(sweep: str) -> NotifySpec | None:
    """What ``sweep``'s schedulers notify (``None``: nothing, or an unreadable file,
    logged: a notification is never a reason to stop a sweep)."""
    path = sweep_folder(sweep) / NOTIFY_FILE
    try:
        return NotifySpec.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        LOG.warning("notifications of %s are off: %s cannot be read (%s)", sweep, path,
                    type(exc).__name__)
        return None


class SentLog:
    """The keys of the messages begun for one sweep (``notify-sent.jsonl``)."""

    def __init__(self, sweep: str) -> None:
        self.path = sweep_folder(sweep) / NOTIFY_SENT_FILE
        self._keys: set[str] | None = None

    def keys(self) -> set[str]:
        """Every key recorded so far (read once, then kept up to date here)."""
        if self._keys is None:
            self._keys = set()
            with contextlib.suppress(OSError):
                for line in self.path.read_text().splitlines():
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        self._keys.add(str(json.loads(line)["key"]))
        return self._keys

    def claim(self, key: str) -> bool:
        """Record ``key`` before its message is sent; ``False`` if it was already (the
        message went out, or began to, before)."""
        if key in self.keys():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.keys().add(key)
        return True
