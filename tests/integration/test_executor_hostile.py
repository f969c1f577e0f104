"""Executor options and plug-ins as a hostile user drives them.

* ``-E`` values that are huge, infinite, not numbers, booleans for counts, deeply nested
  or megabytes long, and SLURM values that would break out of their ``#SBATCH`` line
  (a line break) or past kappa's own options (an abbreviated ``--arr`` is ``--array``):
  each is refused at validation, located at ``executor.<option>``, never a traceback
  and never a job; what is accepted makes a batch script whose every directive stays on
  its line.
* A third-party executor that copies another executor's job id prefix owns none of its
  jobs; one that raises on import harms no other.

The fuzz is seeded (``KAPPA_TEST_SEED`` replays one); it prints its seed.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cli import run_kappa, user_error
from kit.fake_backend import write_spec
from kit.home import register_backends, use_home

from orchestrator.errors import UserInputError
from orchestrator.executors import (
    EXECUTORS,
    executor_class,
    executor_name_for_job,
    get_executor,
    validate_options,
)
from orchestrator.executors.base import JobResources
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.executors.slurm_script import batch_script
from orchestrator.sweeps.executor_choice import MAX_OPTIONS_CHARS, parse_executor_options

HOSTILE = ["1e308", "1e309", str(10**30), "nan", "inf", "-inf", "-1", "0", "true", "false",
           "4.5", "0x10", "", " ", "[1, [2, [3]]]", '{"a": {"b": 1}}', "[" * 50 + "]" * 50,
           "debug\ntouch PWNED #", "x\r#SBATCH --array=0-9", "a\x00b", "--arr=0-9",
           "--outp=/tmp/stolen", "--test-only", "--wr=id", "--requeue", "--export=ALL",
           "--mem=1G\n--array=0-3", '["--mem=1G\\ntouch PWNED #"]', "-o /tmp/x",
           "--mem=1G --exclusive", "debug", "a" * 5000, "é\u2028", "$(id)", "`id`", "';id;'"]
SWEEP = "hostile-opts"


def _seed() -> int:
    seed = int(os.environ.get("KAPPA_TEST_SEED", random.randrange(2**32)))
    print(f"seed={seed} (replay: KAPPA_TEST_SEED={seed})")
    return seed


def _script_lines_ok(options: dict[str, object], tmp: Path) -> None:
    """The batch script of an accepted SLURM option set: every directive on its own line,
    a finite --time, and the cell's command the only thing it execs."""
    executor = get_executor("slurm", **options)
    assert isinstance(executor, SlurmExecutor)
    job = executor.batch_job(("echo", "cell"), tmp, tmp / "train.log", tmp / "job",
                             JobResources(cpus=2, hours=1000.0))
    script = batch_script(job)
    minutes = executor.time_minutes(JobResources(hours=1000.0))
    assert minutes is None or (math.isfinite(minutes) and minutes < 10**9)
    body = [line for line in script.split("\n") if line and not line.startswith("#")]
    # Only kappa's own lines: nothing an option wrote can be a command.
    assert all(line.startswith(("set -u", "JOB_DIR=", 'rm -f "$JOB_DIR/exit"',
                                "export CUDA_VISIBLE_DEVICES=", "exec ",
                                'echo "$SLURM_JOB_ID"')) for line in body), body
    assert sum(line.startswith("exec ") for line in body) == 1
    for arg in executor.sbatch_args:
        name = arg.split("=", 1)[0]
        assert name in {"--mem", "--exclusive"}, arg  # only the allowed ones from HOSTILE


def test_fuzzed_executor_options_are_refused_at_their_option_or_stay_harmless(
        tmp_path: Path) -> None:
    rng = random.Random(_seed())
    tried = refused = 0
    for _ in range(250):
        name = rng.choice(["slurm", "local"])
        fields = [*executor_class(name).Options.model_fields, "colour", "max parallel"]
        pairs = [f"{rng.choice(fields)}={rng.choice(HOSTILE)}" for _ in range(rng.randint(1, 3))]
        tried += 1
        try:
            options = parse_executor_options(pairs)
            valid = validate_options(name, options)
        except UserInputError as exc:
            refused += 1
            assert exc.problems, pairs
            for problem in exc.problems:
                assert problem.location == "executor" or problem.location.startswith(
                    "executor."), (pairs, problem)
                assert problem.fix or problem.allowed, (pairs, problem)
            continue
        if name == "slurm":
            _script_lines_ok(valid.model_dump(exclude_unset=True), tmp_path)
        for value in valid.model_dump().values():
            assert not isinstance(value, float) or math.isfinite(value), (pairs, value)
    print(f"{tried} option sets, {refused} refused")
    assert 0 < refused < tried


@pytest.mark.parametrize(("pairs", "where"), [
    (["partition=debug\ntouch PWNED #"], "executor.partition"),
    (["qos=normal\r#SBATCH --array=0-9"], "executor.qos"),
    (['sbatch_args=["--mem=1G\\ntouch PWNED #"]'], "executor.sbatch_args"),
    (["sbatch_args=--arr=0-2"], "executor.sbatch_args"),       # --array, abbreviated
    (["sbatch_args=--outp=/tmp/stolen.log"], "executor.sbatch_args"),  # --output
    (["sbatch_args=--test-only"], "executor.sbatch_args"),     # submits nothing
    (["sbatch_args=--reque"], "executor.sbatch_args"),         # --requeue: runs twice
    (["time_factor=inf"], "executor.time_factor"),
    (["time_factor=1e308"], "executor.time_factor"),           # overflowed --time
    (["cancel_wait=nan"], "executor.cancel_wait"),
    (["time_extra_minutes=" + str(10**30)], "executor.time_extra_minutes"),
    (["max_parallel=[" * 2000 + "]" * 2000], "executor.max_parallel"),
    (["partition=" + "p" * (MAX_OPTIONS_CHARS + 1)], "executor.partition"),
])
def test_kappa_submit_refuses_a_hostile_slurm_option_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        pairs: list[str], where: str) -> None:
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    register_backends(monkeypatch)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=1, steps=1)
    args = ["submit", str(spec), "--executor", "slurm"]
    for pair in pairs:
        args += ["-E", pair]
    error = user_error(capsys, *args)  # exit 2, a UserInputError
    assert where in {p.location for p in error.problems}
    assert not (home / "runs" / SWEEP).exists()
    registry = home / "registry.db"
    if registry.exists():  # nothing recorded for the sweep
        from orchestrator.registry import Registry

        with Registry.open() as reg:
            assert not reg.cells(SWEEP)


@pytest.mark.parametrize(("executor", "args", "where", "allowed"), [
    ("local", ["-E", "max_parallel=99999999999999999999"], "executor.max_parallel",
     "1 .. 1,000,000"),
    ("local", ["-E", "grace_period=1e39"], "executor.grace_period", "0 .. 86,400"),
    ("ray_jobs", ["-E", "max_parallel=99999999999999999999"], "executor.max_parallel",
     "1 .. 1,000,000"),
    ("ray_jobs", ["-E", "max_pending=99999999999999999999"], "executor.max_pending",
     "0 .. 1,000,000"),
    ("ray_jobs", ["-E", "request_timeout_s=1e39"], "executor.request_timeout_s",
     "> 0 .. 86,400"),
    ("slurm", ["-E", "max_parallel=99999999999999999999"], "executor.max_parallel",
     "1 .. 1,000,000"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v)[:30])
def test_a_count_or_wait_past_its_bound_is_refused_with_the_range(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        executor: str, args: list[str], where: str, allowed: str) -> None:
    """``-E max_parallel=99999999999999999999`` was accepted and stored (issue 19, 6)."""
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    register_backends(monkeypatch)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=1, steps=1)
    address = ["-E", "address=http://127.0.0.1:9"] if executor == "ray_jobs" else []
    error = user_error(capsys, "submit", str(spec), "--executor", executor, *address, *args)
    (problem,) = [p for p in error.problems if p.location == where]
    assert problem.allowed == allowed, problem.render()
    assert not (home / "runs" / SWEEP).exists()
    if (home / "registry.db").exists():  # nothing recorded for the sweep
        from orchestrator.registry import Registry

        with Registry.open() as reg:
            assert reg.find_sweep(SWEEP) is None


@pytest.mark.parametrize("command", ["submit", "resume", "search", "canary"])
def test_a_max_parallel_past_its_bound_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: str) -> None:
    use_home(tmp_path / "home", monkeypatch, cli=True)
    target = SWEEP if command == "resume" else str(write_spec(tmp_path / "s.yaml", SWEEP))
    ran = run_kappa(capsys, command, target, "--max-parallel", "99999999999999999999")
    assert ran.code == 2 and "Traceback" not in ran.output, ran.output
    assert "--max-parallel" in ran.output and "1000000" in ran.output, ran.output


def test_a_repeated_option_the_last_wins() -> None:
    assert parse_executor_options(["max_parallel=2", "partition=a", "max_parallel=8"]) == {
        "max_parallel": "8", "partition": "a"}


def test_a_booleans_is_no_count_and_a_line_break_never_reaches_a_script(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="boolean is not a number"):
        validate_options("slurm", {"max_parallel": True})
    assert validate_options("slurm", {"max_parallel": "4.0"}).max_parallel == 4  # type: ignore[attr-defined]
    # A run folder whose path holds a line break (a KAPPA_HOME made so): no script at all.
    executor = SlurmExecutor()
    odd = tmp_path / "a\ntouch PWNED #"
    with pytest.raises(ValueError, match="control characters"):
        batch_script(executor.batch_job(("true",), odd, odd / "train.log", odd / "job",
                                        JobResources()))


# -- plug-ins ---------------------------------------------------------------------------

EVIL = '''
from orchestrator.executors.local import LocalExecutor, LocalOptions


class Copycat(LocalExecutor):
    name = "copycat"
    job_id_prefix = "local:"
    Options = LocalOptions
'''
FORGER = '''
from orchestrator.executors.local import LocalExecutor, LocalOptions


class Forger(LocalExecutor):
    """Declares its own prefix, hands out local's ids."""

    name = "forger"
    job_id_prefix = "forger:"
    Options = LocalOptions

    def submit(self, argv, env, cwd, log_path, resources=None):
        return super().submit(argv, env, cwd, log_path)
'''
RAISES = "raise RuntimeError('this plug-in breaks on import')\n"


@pytest.fixture
def evil_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    info = site / "kappa_evil-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "kappa_copycat.py").write_text(EVIL)
    (site / "kappa_raises.py").write_text(RAISES)
    (site / "kappa_forger.py").write_text(FORGER)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kappa-evil\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[kappa.executors]\ncopycat = kappa_copycat:Copycat\nraises = kappa_raises:X\n"
        "forger = kappa_forger:Forger\n")
    monkeypatch.syspath_prepend(str(site))
    EXECUTORS.refresh()
    yield
    EXECUTORS.refresh()


def test_a_plugin_copying_another_executors_prefix_owns_no_job(evil_plugins: None) -> None:
    with pytest.raises(UserInputError, match="declare one job id prefix") as err:
        executor_name_for_job("local:/runs/x/.jobs/train.log.1")
    assert "copycat, local" in err.value.render()
    for name in ("copycat", "local"):  # neither may hand out ids the other could claim
        with pytest.raises(UserInputError, match="declare one job id prefix"):
            get_executor(name)
    # The others are untouched; the one that raises on import is named, harming none.
    assert executor_name_for_job("slurm:12:/runs/x/.jobs/train.log.1") == "slurm"
    with pytest.raises(UserInputError, match="RuntimeError: this plug-in breaks on import"):
        get_executor("raises")
    assert isinstance(get_executor("slurm"), SlurmExecutor)


def test_a_plugin_handing_out_another_executors_job_ids_gets_no_job(
        evil_plugins: None, tmp_path: Path) -> None:
    forger = get_executor("forger", max_parallel=1, gpus=[])
    with pytest.raises(ValueError, match="lacks its prefix 'forger:'"):
        forger.submit(("sleep", "30"), {}, tmp_path, tmp_path / "train.log")
    # The job it started was cancelled, not left running for the cell to run again.
    local = LocalExecutor(max_parallel=1, gpus=[])
    (job_id,) = local.jobs_for_log(tmp_path / "train.log")
    job = local.reattach(job_id)
    assert job is None or job.wait(30) is not None
