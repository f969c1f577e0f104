"""Running ``kappa doctor``'s checks: concurrently, each bounded in time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from orchestrator.doctor import CheckResult, DoctorOptions, Status
from orchestrator.errors import Problem, UserInputError

CHECK_GRACE_S = 30.0  # past options.timeout_s, a check still running is abandoned

Check = Callable[[DoctorOptions], CheckResult]


def run_checks(options: DoctorOptions, only: Iterable[str] = ()) -> list[CheckResult]:
    """Run the checks named in ``only`` (all by default) concurrently; results in order.
    A check that raises is a ``problem``, never hiding what the others found."""
    from orchestrator.doctor import environment, plugin, stores

    # Every check by name, in the order they are shown.
    checks: dict[str, Check] = {
        "python": environment.check_python, "packages": environment.check_packages,
        "gpus": environment.check_gpus, "plugin": plugin.check_plugin, "ray": plugin.check_ray,
        "mlflow": stores.check_mlflow, "registry": stores.check_registry,
        "disk": environment.check_disk}
    names = list(dict.fromkeys(only)) or list(checks)
    if unknown := [n for n in names if n not in checks]:
        raise UserInputError("unknown doctor check", [Problem(
            "--check", f"no check named {n!r}", found=n, allowed=", ".join(checks))
            for n in unknown])

    results: dict[str, CheckResult] = {}

    def run(name: str) -> None:
        try:
            results[name] = checks[name](options)
        except BaseException as exc:
            # A probe's failure (even a library's sys.exit) is a finding, not a crash.
            results[name] = CheckResult(
                name, Status.PROBLEM, f"the check failed: {exc!r}"[:500],
                fix="a bug in kappa doctor: please report it with this message")

    # Daemon threads, not a pool: a check stuck in a library call that has no timeout
    # (a server that accepts and never answers) is abandoned at the deadline, and the
    # process can still exit; a pool would join it at exit.
    threads = {n: threading.Thread(target=run, args=(n,), name=f"doctor-{n}", daemon=True)
               for n in names}
    for thread in threads.values():
        thread.start()
    limit = options.timeout_s + CHECK_GRACE_S
    deadline = time.monotonic() + limit
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(n) or CheckResult(
        n, Status.PROBLEM, f"no answer within {limit:g} s: the check was abandoned",
        fix="a server it asks accepts connections but does not answer: check the "
            "address, or raise --timeout") for n in names]


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 when nothing is a problem (warnings allowed), else 2."""
    return 2 if any(r.status is Status.PROBLEM for r in results) else 0
