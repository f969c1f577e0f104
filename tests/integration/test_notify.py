"""Notifications as a user gets them: ``kappa submit --notify URL`` and the spec's
``notify:`` block, posted by the scheduler to a local HTTP server (the fake backend's
cells, real SQLite and MLflow; the commands run in this process through ``main()``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from kit.cli import process, run_kappa, user_error
from kit.home import use_home
from kit.wait import wait_until
from kit.webhook import recording_endpoint, silent_endpoint

from orchestrator.registry import CellState, Registry

SECRET = "T0KAPPA/B0KAPPA/s3cr3tT0k3n"

# Three cells: one succeeds, one crashes at step 2 (no retry: fails for good), one whose
# score crosses the diverged rule's bound at step 2.
SPEC = """\
name: {name}
backend: fake
base:
  curve: stop
  steps: 5
  step_seconds: 0.01
axes:
  variant:
    ok: {{values: [0.1]}}
    broken: {{fail_at_step: 2}}
    wild: {{values: [0.1, 0.9]}}
stop: {{diverged: [{{metric: score, above: 0.5}}]}}
{notify}"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_NOTIFY_TIMEOUT", "1")
    monkeypatch.setenv("KAPPA_NOTIFY_WAIT", "2")
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def spec(tmp_path: Path, name: str, notify: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, notify=notify))
    return path


def states(sweep: str) -> dict[str, CellState]:
    with Registry.open() as reg:
        return {str(c.axes["variant"]): c.state for c in reg.cells(sweep)}


def test_the_four_kinds_of_message_each_once_secret_masked(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with recording_endpoint() as (base, received):
        url = f"{base}/services/{SECRET}"
        ran = run_kappa(capsys, "submit", str(spec(tmp_path, "note")), "--wait",
                        "--notify", url)
        assert ran.code == 1, ran.output  # failed cells: exit 1, as without --notify
        assert sorted(received.kinds()) == ["cell_failed", "diverged", "sweep_end"]
        by_kind = dict(zip(received.kinds(), received.bodies, strict=True))
        assert "variant=broken" in by_kind["cell_failed"]["text"]
        assert "diverged at step 2" in by_kind["diverged"]["text"]
        end = by_kind["sweep_end"]
        assert "*note* ended: 1 succeeded · 2 failed (3 cells)" in end["text"]
        fields = " ".join(f["text"] for f in end["blocks"][1]["fields"])
        assert "cell-hours" in fields.lower() and "eval/toy/mean@4" in fields  # best cell
        assert "variant=ok" in fields
        assert set(received.paths) == {f"/services/{SECRET}"}
        # The URL is the sweep's secret: owner-only on disk, never printed.
        config = home / "runs" / "note" / "notify.json"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert SECRET not in ran.output
        status = run_kappa(capsys, "status", "note")
        assert f"notifications: {base}/*** on sweep_end, cell_failed" in status.output
        as_json = run_kappa(capsys, "status", "note", "--json")
        assert SECRET not in status.output + as_json.output and f"{base}/***" in as_json.out

        # Resuming the ended sweep ends nothing new: nothing is sent twice.
        again = run_kappa(capsys, "resume", "note", "--wait")
        assert again.code == 1, again.output
        assert len(received.bodies) == 3

        # A canary that fails, through `submit --canary --notify`: the grid is not submitted.
        canary = spec(tmp_path, "note2")
        ran = run_kappa(capsys, "submit", str(canary), "--canary", "--wait", "--notify", url)
        assert ran.code == 2, ran.output
        kinds = received.kinds()[3:]
        assert kinds == ["canary_failed"], received.bodies[3:]
        assert "a canary of *note2* failed" in received.bodies[3]["text"]
        assert "variant=broken" in received.bodies[3]["text"]


def test_the_spec_block_with_an_environment_variable_and_chosen_events(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_endpoint() as (base, received):
        monkeypatch.setenv("KAPPA_TEST_HOOK", f"{base}/hook/{SECRET}")
        path = spec(tmp_path, "blk", "notify: {url: '${KAPPA_TEST_HOOK}', events: [sweep_end]}\n")
        ran = run_kappa(capsys, "submit", str(path), "--wait")
        assert ran.code == 1, ran.output
        assert received.kinds() == ["sweep_end"]
    # An unset variable is refused before anything is written.
    monkeypatch.delenv("KAPPA_TEST_HOOK")
    other = spec(tmp_path, "blk2", "notify: {url: '${KAPPA_TEST_HOOK}'}\n")
    ran = run_kappa(capsys, "submit", str(other), "--wait")
    assert ran.code == 2 and "KAPPA_TEST_HOOK is not set" in ran.output, ran.output
    with Registry.open() as reg:
        assert reg.find_sweep("blk2") is None


@pytest.mark.parametrize("how", ["--notify-env", "override"])
def test_the_url_from_the_environment_never_on_the_command_line(
        how: str, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_endpoint() as (base, received):
        monkeypatch.setenv("KAPPA_TEST_HOOK", f"{base}/hook/{SECRET}")
        given = (["--notify-env", "KAPPA_TEST_HOOK"] if how == "--notify-env"
                 else ["+notify.url=${KAPPA_TEST_HOOK}", "+notify.events=[sweep_end]"])
        assert not any(SECRET in arg for arg in given)
        ran = run_kappa(capsys, "submit", str(spec(tmp_path, "env")), *given, "--wait")
        assert ran.code == 1, ran.output
        assert "sweep_end" in received.kinds() and set(received.paths) == {f"/hook/{SECRET}"}
    assert SECRET not in ran.output + _stored_text("env")
    # Refused before anything is written: unset, no variable name, not a URL, with --notify.
    for args, said in (
            (["--notify-env", "KAPPA_NO_HOOK"], "KAPPA_NO_HOOK is not set"),
            (["--notify-env", "$KAPPA_TEST_HOOK"], "not an environment variable's name"),
            (["--notify-env", "KAPPA_TEST_HOOK", "--notify", f"{base}/x"], "given with --notify")):
        (problem,) = user_error(capsys, "submit", str(spec(tmp_path, "env2")), *args).problems
        assert problem.location == "--notify-env" and said in problem.message, problem
    monkeypatch.setenv("KAPPA_TEST_HOOK", f"ftp://hooks.example/{SECRET}")
    ran = run_kappa(capsys, "submit", str(spec(tmp_path, "env2")), "--notify-env",
                    "KAPPA_TEST_HOOK")
    assert ran.code == 2 and "--notify-env" in ran.err and SECRET not in ran.output
    with Registry.open() as reg:
        assert reg.find_sweep("env2") is None


def _stored_text(sweep: str) -> str:
    """Everything kappa keeps about ``sweep`` as text: the registry's spec and plan, the
    MLflow parent run's tags and its ``spec.yaml``."""
    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    with Registry.open() as reg:
        record = reg.find_sweep(sweep)
        assert record is not None and record.mlflow_parent_run_id
    client = MlflowClient(Tracker().uri)
    run = client.get_run(record.mlflow_parent_run_id)
    folder = client.download_artifacts(run.info.run_id, "spec.yaml")
    return "\n".join([record.spec_text, record.plan or "", str(run.data.tags),
                      Path(folder).read_text()])


@pytest.mark.parametrize("how", ["block", "override", "escaped"])
def test_a_literal_url_is_never_stored_unmasked(
        how: str, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with recording_endpoint() as (base, received):
        url = f"{base}/services/{SECRET}"
        block = {"block": f"notify: {{url: '{url}', events: [sweep_end]}}\n",
                 # YAML escapes: the text never holds the URL as written.
                 "escaped": 'notify: {url: "' + url.replace("/", "\\x2f") + '", '
                            "events: [sweep_end]}\n",
                 "override": ""}[how]
        extra = ([f"+notify.url={url}", "+notify.events=[sweep_end]"]
                 if how == "override" else [])
        ran = run_kappa(capsys, "submit", str(spec(tmp_path, how, block)), *extra, "--wait")
        assert ran.code == 1, ran.output
        assert received.kinds() == ["sweep_end"]  # posted to the real URL
        assert set(received.paths) == {f"/services/{SECRET}"}
    stored = _stored_text(how)
    assert SECRET not in stored and f"{base}/***" in stored
    assert SECRET not in ran.output + run_kappa(capsys, "status", how, "--json").output


def test_bad_urls_exit_2_masked(home: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    path = spec(tmp_path, "badurl", f"notify: {{url: 'ftp://hooks.example/{SECRET}'}}\n")
    ran = run_kappa(capsys, "validate", str(path))
    assert ran.code == 2 and "notify.url" in ran.output and "https://" in ran.output
    assert SECRET not in ran.output and "ftp://hooks.example/***" in ran.output
    ran = run_kappa(capsys, "submit", str(spec(tmp_path, "ok")), "--notify",
                    f"hooks.example/{SECRET}")
    assert ran.code == 2 and "--notify" in ran.output and SECRET not in ran.output
    assert not (home / "registry.db").exists()


def test_an_endpoint_that_never_answers_changes_nothing(home: Path, tmp_path: Path) -> None:
    """In the background, as a real sweep runs: the scheduler ends, the cells end as they
    would without notifications."""
    with silent_endpoint() as base:
        process("submit", str(spec(tmp_path, "deaf")), "--notify", f"{base}/x/{SECRET}")

        def ended() -> bool:
            with Registry.open() as reg:
                lease = reg.lease("deaf")
                return not reg.cells("deaf", [CellState.PENDING, CellState.QUEUED,
                                              CellState.RUNNING]) and (
                    lease is None or lease.expired or lease.owner is None)

        wait_until(ended, "the sweep with a silent webhook to end")
    assert states("deaf") == {"ok": CellState.SUCCEEDED, "broken": CellState.FAILED,
                              "wild": CellState.FAILED}
    log = (home / "scheduler" / "deaf.log").read_text()
    assert SECRET not in log
