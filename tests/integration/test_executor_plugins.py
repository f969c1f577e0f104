"""Executors and backends are plug-ins: a third-party distribution (a real dist-info with
``entry_points.txt``, on ``sys.path``) registers an executor that kappa finds, lists
(``kappa executors``), validates the options of, and runs a sweep on; broken plug-ins
are reported by their entry point; unknown names list the known ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cli import process, run_kappa
from kit.fake_backend import write_spec
from kit.home import use_home

from orchestrator.backends import BACKENDS, get_backend
from orchestrator.errors import UserInputError
from orchestrator.executors import (
    EXECUTORS,
    executor_name_for_job,
    get_executor,
    validate_options,
)
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.executor_choice import parse_executor_options

# A third party's executor: runs jobs through kappa's local one, under its own job ids.
PLUGIN = '''
from pydantic import Field

from orchestrator.executors.base import Executor, ExecutorOptions, JobHandle
from orchestrator.executors.local import LocalExecutor


class InlineJob(JobHandle):
    def __init__(self, inner):
        self.inner, self.job_id = inner, "inline:" + inner.job_id

    def poll(self):
        return self.inner.poll()

    def wait(self, timeout=None):
        return self.inner.wait(timeout)

    def cancel(self):
        self.inner.cancel()


class InlineOptions(ExecutorOptions):
    slots: int = Field(1, ge=1, description="jobs at once")
    label: str = Field("x", description="a name for the log")
    address: str = Field("", description="a field named like ray_jobs' own")


class InlineExecutor(Executor):
    name = "inline"
    job_id_prefix = "inline:"
    Options = InlineOptions

    def __init__(self, slots=1, label="x", address=""):
        self.local, self.label = LocalExecutor(max_parallel=slots, gpus=[]), label

    def submit(self, argv, env, cwd, log_path, resources=None):
        with open(log_path, "a") as log:
            log.write(f"inline executor {self.label}\\n")
        return InlineJob(self.local.submit(argv, env, cwd, log_path))

    def capacity(self, gpus=0):
        return self.local.capacity(gpus)

    def reattach(self, job_id):
        inner = self.local.reattach(job_id.removeprefix("inline:"))
        return None if inner is None else InlineJob(inner)
'''
ENTRY_POINTS = """
[kappa.executors]
inline = kappa_inline:InlineExecutor
broken = kappa_inline_missing:Nope
misnamed = kappa_inline:InlineExecutor

[kappa.backends]
thirdfake = kit.fake_backend:FakeBackend
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The third-party distribution ``kappa-inline 0.1``, importable here and (through
    PYTHONPATH) in every process started from here."""
    site = tmp_path / "site"
    info = site / "kappa_inline-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "kappa_inline.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kappa-inline\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    EXECUTORS.refresh()
    BACKENDS.refresh()
    yield site
    EXECUTORS.refresh()
    BACKENDS.refresh()


def test_a_third_party_executor_is_found_and_its_options_validated(plugin: Path) -> None:
    assert {"local", "ray_jobs", "inline"} <= set(EXECUTORS)
    assert EXECUTORS.source("inline").distribution == "kappa-inline 0.1"
    executor = get_executor("inline", slots="3", label="mine")  # strings, as after -E
    assert executor.local.max_parallel == 3 and executor.label == "mine"  # type: ignore[attr-defined]
    with pytest.raises(UserInputError) as err:
        validate_options("inline", {"slots": 0, "colour": "red"})
    locations = {p.location: p for p in err.value.problems}
    assert set(locations) == {"executor.slots", "executor.colour"}  # every problem at once
    assert locations["executor.slots"].fix is not None and "jobs at once" in str(
        locations["executor.slots"].fix)
    assert locations["executor.colour"].allowed == "slots, label, address"
    with pytest.raises(UserInputError, match="did you mean 'inline'") as err:
        get_executor("inlin")
    assert "known: broken, inline, local, misnamed, ray_jobs" in err.value.summary
    # A backend is found the same way.
    assert "thirdfake" in BACKENDS and type(get_backend("thirdfake")).__name__ == "FakeBackend"


def test_a_broken_plugin_is_named_by_its_entry_point_and_harms_no_other(plugin: Path) -> None:
    with pytest.raises(UserInputError) as err:
        get_executor("broken")
    text = err.value.render()
    assert "kappa.executors: broken = kappa_inline_missing:Nope (from kappa-inline 0.1)" in text
    assert "ModuleNotFoundError" in text and "fix or uninstall the distribution kappa-inline" \
        in text
    with pytest.raises(UserInputError, match="declares name 'inline', not 'misnamed'"):
        get_executor("misnamed")
    # Job ids of every working executor still resolve.
    assert executor_name_for_job("local:/runs/x/.jobs/train.log.1") == "local"
    assert executor_name_for_job("inline:local:/runs/x/.jobs/train.log.1") == "inline"
    with pytest.raises(UserInputError, match="no executor knows job"):
        executor_name_for_job("broken:1")


def test_kappa_executors_lists_plugins_and_bad_options_are_located(
        plugin: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_kappa(capsys, "executors", "--json")
    assert result.code == 0, result.output
    listing = json.loads(result.out)
    executors = {e["name"]: e for e in listing["executors"]}
    assert executors["inline"]["distribution"] == "kappa-inline 0.1"
    assert executors["inline"]["job_id_prefix"] == "inline:"
    assert executors["inline"]["options"][0] == {
        "name": "slots", "type": "int", "required": False, "default": 1,
        "description": "jobs at once"}
    assert "ModuleNotFoundError" in executors["broken"]["error"]
    assert {o["name"] for o in executors["ray_jobs"]["options"]} >= {"address", "max_parallel"}
    assert "thirdfake" in {b["name"] for b in listing["backends"]}
    table = run_kappa(capsys, "executors").out
    assert "inline" in table and "jobs at once" in table and "cannot be loaded" in table

    result = run_kappa(capsys, "submit", "nowhere.yaml", "--executor", "inline", "-E", "slots=0",
                 "-E", "colour=red", "-E", "label=[1")
    # One problem, executor.label (bad JSON): the other options are judged later.
    assert result.code == 2 and "(1 problem(s)):\n  - executor.label: " in result.err, \
        result.err
    with pytest.raises(UserInputError, match="KEY=VALUE"):
        parse_executor_options(["slots"])


def test_a_sweep_runs_on_a_plugin_executor(plugin: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    spec = write_spec(tmp_path / "s.yaml", "on-inline", seeds=2, steps=2)
    proc = process("submit", str(spec), "--executor", "inline", "-E", "slots=0", "-E",
                 "colour=red", "--wait", code=None)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "executor.slots" in proc.stderr and "executor.colour" in proc.stderr
    assert not (home / "runs" / "on-inline").exists()  # nothing half-written

    process("submit", str(spec), "--executor", "inline", "-E", "slots=2", "-E", "label=lab",
          "--wait")
    with Registry.open() as reg:
        cells = reg.cells("on-inline")
    assert [c.state for c in cells] == [CellState.SUCCEEDED] * 2
    assert all(c.job_id and c.job_id.startswith("inline:") for c in cells)
    log = (home / "runs" / "on-inline" / cells[0].cell_id / "train.log").read_text()
    assert "inline executor lab" in log  # the plug-in ran it, with the options given


def test_the_ray_address_shortcut_reaches_ray_jobs_only(plugin: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--ray-address`` / ``RAY_ADDRESS`` belong to ray_jobs: a plug-in whose options
    happen to have an ``address`` field must not be handed the Ray cluster's URL."""
    from orchestrator.cli.sweep_options import RunOptions
    from orchestrator.sweeps.executor_choice import choose_executor

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))  # no registry: nothing remembered
    url = "http://user:s3cret@head:8265"
    monkeypatch.setenv("RAY_ADDRESS", url)
    inline = RunOptions(executor="inline", ray_address=url).choice()
    assert "address" not in choose_executor("s", inline).options
    assert url not in json.dumps(inline.env())  # nor handed to a background scheduler
    mine = RunOptions(executor="inline", executor_option=["address=mine"], ray_address=url)
    assert choose_executor("s", mine.choice()).options["address"] == "mine"
    ray = RunOptions(executor="ray_jobs", ray_address=url).choice()
    assert choose_executor("s", ray).options["address"] == url
