"""Doctor checks of kappa's verl plug-in, here and in the workers of a Ray cluster. ``import verl``
loads plug-ins by entry point and swallows their errors (a broken one shows only at a cell's first
step), so ``--deep`` imports verl as a run does, in a fresh process here (without the
``VERL_USE_EXTERNAL_MODULES`` fallback) and in a Ray task per node. Without it (seconds faster:
``import verl`` takes about 10 s) the same probe reads what the import would act on instead: verl
installed and its version, the plug-in findable, its entry point declared, and verl's
``VERL_USE_EXTERNAL_PLUGINS`` policy letting it load; and it says that verl was not imported."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import secrets
import subprocess
import sys
import time
from typing import Any

from orchestrator.doctor import CheckResult, DoctorOptions, Status
from orchestrator.doctor.environment import installed_version
from orchestrator.redact import redact

MARK = "KAPPA_DOCTOR "
PLUGIN_MODULE = "kappa_verl"
RAY_PYTHON = "python3"  # VerlSettings.python's default: what a verl cell's job runs
ENTRY_POINT_GROUP = "verl.plugins"
DEEP = "--deep"  # the probe's argument that makes it import verl
# Runs in verl's environment (here, or in a Ray worker); needs only the standard library
# until it imports verl, which only ``deep`` does. ``enabled`` mirrors verl 0.9.1's reading
# of VERL_USE_EXTERNAL_PLUGINS: "auto" (unset) loads every entry point, "none" none, else
# the named ones.
WORKER_PROBE = '''
def probe(deep):
    import importlib.metadata, importlib.util, os, socket, sys
    names = {ep.name for ep in importlib.metadata.entry_points(group="verl.plugins")
             if ep.value.split(":")[0] == "kappa_verl"}
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS")
    wanted = (policy or "auto").strip().lower()
    out = {"host": socket.gethostname(), "python": sys.executable, "entry_point": bool(names),
           "importable": importlib.util.find_spec("kappa_verl") is not None,
           "external_plugins": policy, "imported": deep,
           "enabled": wanted == "auto" or (wanted != "none" and bool(
               names & {n.strip() for n in wanted.split(",")}))}
    try:
        if not deep:
            if importlib.util.find_spec("verl") is None:
                raise ModuleNotFoundError("No module named 'verl'")
            try:
                out["verl"] = importlib.metadata.version("verl")
            except importlib.metadata.PackageNotFoundError:
                out["verl"] = "(version unknown: no package metadata)"
            return out
        import verl
        out["verl"] = str(verl.__version__)
        out["loaded"] = "kappa_verl" in sys.modules
        if out["importable"]:
            import kappa_verl
            out["facts"] = kappa_verl.check()
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
'''
LOCAL_PROBE = WORKER_PROBE + (f"import json, sys\nprint({MARK!r} + json.dumps(probe("
                              f"sys.argv[1:] == [{DEEP!r}])), flush=True)\n")
RAY_PROBE = WORKER_PROBE + f'''
import json, ray, sys
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()
nodes = [n for n in ray.nodes() if n["Alive"]]
task = ray.remote(num_cpus=0)(probe)
deep = sys.argv[1:] == [{DEEP!r}]
refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
        .remote(deep) for n in nodes]
results = [dict(r, node_id=n["NodeID"], gpus=n["Resources"].get("GPU", 0))
           for n, r in zip(nodes, ray.get(refs))]
print({MARK!r} + json.dumps({{"nodes": results}}), flush=True)
'''


def _install_fix() -> str:
    from orchestrator.backends.verl.preflight import plugin_install_fix

    return plugin_install_fix()


def parse_probe(output: str) -> dict[str, Any] | None:
    """The JSON a probe printed after :data:`MARK`, if any."""
    line = next((x for x in reversed(output.splitlines()) if x.startswith(MARK)), MARK)
    try:
        parsed = json.loads(line[len(MARK):])
    except ValueError:  # none, cut short or not ours: no result
        return None
    return parsed if isinstance(parsed, dict) else None


def verdict(found: dict[str, Any], where: str) -> tuple[Status, str, str | None]:
    """Judge one probe: did ``import verl`` load the plug-in, and does it work? Or, for a
    probe that did not import verl, would it load it?"""
    if "error" in found:
        return Status.PROBLEM, f"{where}: {found['error'][:300]}", _install_fix()
    if not found.get("importable"):
        return Status.PROBLEM, f"{where}: kappa_verl is not installed", _install_fix()
    if not found.get("entry_point"):
        return (Status.PROBLEM, f"{where}: kappa_verl is importable but declares no "
                f"'{ENTRY_POINT_GROUP}' entry point", _install_fix())
    imported = bool(found.get("imported"))
    if not found.get("loaded" if imported else "enabled"):
        return (Status.PROBLEM, f"{where}: `import verl` {'did' if imported else 'would'} "
                f"not load kappa_verl "
                f"(VERL_USE_EXTERNAL_PLUGINS={found.get('external_plugins')!r})",
                "unset VERL_USE_EXTERNAL_PLUGINS, or list 'kappa' in it")
    if imported:
        return Status.OK, f"{where}: loaded by verl {found.get('verl')}'s entry point", None
    return Status.OK, (f"{where}: verl {found.get('verl')} and kappa_verl installed, its "
                       f"entry point enabled; verl not imported ({DEEP} imports it, as a "
                       "run does)"), None


def check_plugin(options: DoctorOptions) -> CheckResult:
    """``import verl`` loads the plug-in by its entry point (here, or with ``--python``):
    as it does with ``options.deep``, else as verl's metadata and policy say it would."""
    if options.python is None:  # this environment: its metadata answers without a process
        verl = installed_version("verl")
        if verl is None:
            return CheckResult("plugin", Status.SKIPPED, "verl is not installed here; the "
                               "plug-in is needed only where verl cells run")
        if not any(ep.value.split(":")[0] == PLUGIN_MODULE
                   for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)):
            return CheckResult("plugin", Status.PROBLEM, f"verl {verl} is installed but no "
                               f"'{ENTRY_POINT_GROUP}' entry point names {PLUGIN_MODULE} in "
                               "this environment", fix=_install_fix())
    python = options.python or sys.executable
    env = {k: v for k, v in os.environ.items() if k != "VERL_USE_EXTERNAL_MODULES"}
    env.setdefault("PYTHONWARNINGS", "ignore")
    try:
        stdout, stderr = _run_bounded([python, "-c", LOCAL_PROBE, *_deep(options)], env,
                                      options.timeout_s)
    except subprocess.TimeoutExpired:
        what = "`import verl`" if options.deep else "the probe"
        return CheckResult("plugin", Status.PROBLEM, f"{python}: {what} gave no "
                           f"answer within {options.timeout_s:g} s (stopped)",
                           fix="check --python is verl's interpreter and that `import verl` "
                               "works there, or raise --timeout")
    except (OSError, ValueError) as exc:
        return CheckResult("plugin", Status.PROBLEM, f"cannot run {python}: {exc}",
                           fix="give verl's interpreter with --python")
    found = parse_probe(stdout)
    if found is None:
        tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
        return CheckResult("plugin", Status.PROBLEM, f"the probe process failed: "
                           f"{redact(tail)[:300]}", fix=_install_fix())
    status, summary, fix = verdict(found, python)
    return CheckResult("plugin", status, summary, fix=fix, details=found)


def _deep(options: DoctorOptions) -> list[str]:
    """The probe's arguments: :data:`DEEP` when ``options.deep`` asks it to import verl."""
    return [DEEP] if options.deep else []


def _run_bounded(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[str, str]:
    """Run ``argv``; its (stdout, stderr). Past ``timeout_s`` its process group is killed
    (a forked child holding the pipes would keep the doctor reading forever)."""
    import signal

    with subprocess.Popen(argv, env=env, text=True, errors="replace", stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            return proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise


def _first_line(exc: BaseException, timeout_s: float) -> str:
    """An exception's first line, masked; a timeout says how long was waited."""
    if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s ({type(exc).__name__})"
    return redact((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:300]


def check_ray(options: DoctorOptions) -> CheckResult:
    """GPUs the Ray cluster schedules, and the plug-in loaded in a task on every node."""
    address = options.ray_address or os.environ.get("RAY_ADDRESS")
    if not address:
        return CheckResult("ray", Status.SKIPPED, "no Ray address (--ray-address or "
                           "RAY_ADDRESS): cells run on this machine with --executor local")
    from orchestrator.executors.ray_client import bounded_client, dashboard_url

    # Ray takes "user:pw@head" without a scheme; as a URL its password is masked.
    address = dashboard_url(address)
    try:
        import ray.job_submission  # noqa: F401
    except ImportError:
        return CheckResult("ray", Status.PROBLEM, "Ray is not installed",
                           fix="`pip install -e '.[ray]'`")
    try:
        # The client asks the dashboard for its version as it is made; run_checks'
        # deadline is the backstop should Ray's internals change.
        client = bounded_client(address, options.network_timeout_s)
    except Exception as exc:
        return CheckResult("ray", Status.PROBLEM, f"cannot reach the Ray dashboard at "
                           f"{redact(address)}: {_first_line(exc, options.network_timeout_s)}",
                           fix="start the cluster (`ray start --head`) and give its "
                               "dashboard address, e.g. http://head:8265")
    details: dict[str, Any] = {"address": redact(address)}
    python = options.python or RAY_PYTHON
    found, why = _probe_job(client, options, python)
    if found is None:
        return CheckResult("ray", Status.PROBLEM, f"the probe job on {redact(address)} "
                           f"failed: {redact(why)}",
                           fix=f"check `{python}` runs on the cluster (--python)", details=details)
    nodes = found["nodes"]
    gpus = sum(float(n.get("gpus") or 0) for n in nodes)
    details.update(nodes=len(nodes), gpus=gpus, workers=nodes)
    bad = [v for v in (verdict(n, f"node {n.get('host')}") for n in nodes)
           if v[0] is Status.PROBLEM]
    if bad:
        return CheckResult("ray", Status.PROBLEM, "; ".join(m for _, m, _ in bad),
                           fix=bad[0][2], details=details)
    summary = (f"{len(nodes)} node(s), {gpus:g} GPU(s) in Ray; " + (
        "the plug-in loads by its entry point in a task on every node" if options.deep else
        f"verl and the plug-in installed, its entry point enabled, on every node; verl not "
        f"imported ({DEEP} imports it in a task on every node)"))
    if gpus == 0:
        return CheckResult("ray", Status.WARNING, summary + ": no GPUs, so verl cells "
                           "cannot run there (embedded cells can)",
                           fix="start the GPU nodes' raylets with their GPUs "
                               "(`ray start --address=HEAD:6379`)", details=details)
    return CheckResult("ray", Status.OK, summary, details=details)


def _probe_job(client: Any, options: DoctorOptions,
               python: str) -> tuple[dict[str, Any] | None, str]:
    """Run :data:`RAY_PROBE` with ``python`` as a Ray job; its result, or ``None`` and why not."""
    import shlex

    from orchestrator.executors.ray_jobs import SUBMIT_RETRY_INTERVAL_S, is_transient_refusal
    from orchestrator.tracking.retry import is_unreachable

    deadline = time.monotonic() + options.timeout_s
    # A fresh cluster's job agent may not have registered yet, and a busy dashboard may
    # drop a connection: both are waited out, up to the deadline.
    while True:
        try:
            job = client.submit_job(entrypoint=shlex.join([python, "-c", RAY_PROBE,
                                                           *_deep(options)]),
                                    submission_id=f"kappa-doctor-{secrets.token_hex(4)}",
                                    runtime_env={"env_vars": {"PYTHONWARNINGS": "ignore"}})
            break
        except Exception as exc:
            transient = is_transient_refusal(exc) or is_unreachable(exc)
            if not transient or time.monotonic() > deadline:
                why = _first_line(exc, options.network_timeout_s)
                return None, f"the cluster refused the probe job: {why}"
            time.sleep(SUBMIT_RETRY_INTERVAL_S)
    status = ""
    while time.monotonic() < deadline:
        try:
            status = str(getattr(client.get_job_status(job), "value", ""))
        except Exception as exc:
            if not is_unreachable(exc):
                raise
        if status in ("SUCCEEDED", "FAILED", "STOPPED"):
            break
        time.sleep(1.0)
    else:
        client.stop_job(job)
        return None, f"no result within {options.timeout_s:g} s (job {job})"
    logs = client.get_job_logs(job)
    found = parse_probe(logs)
    if found is None:
        tail = (logs.strip().splitlines() or [status])[-1]
        return None, f"job {job} ended {status}: {redact(tail)[:300]}"
    return found, status
