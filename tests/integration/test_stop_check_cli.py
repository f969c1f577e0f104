"""``kappa stop-check`` on a finished sweep with known curves (the fake backend's scripted
``score``), through the real CLI: the steps the rules would save, the deltas at full
length and where the group would have stopped; and its refusals of bad input."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from kit.cli import run_kappa, user_error
from kit.full_disk import no_space
from kit.home import use_home

from orchestrator.sweeps.driver import submit

EARLY = [0.1, 0.6]  # flat at 0.6 from step 2
LATE = [0.1] * 7 + [round(0.6 + 0.05 * i, 2) for i in range(7)]  # 0.6 at step 8 .. 0.9 at 14


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


@pytest.fixture
def finished(home: Path, tmp_path: Path) -> str:
    """A full-length sweep: arms early / late x 3 seeds, 20 steps, no stopping rule."""
    arms = {"early": {"values": EARLY}, "late": {"values": LATE}}
    spec = tmp_path / "full.yaml"
    spec.write_text("name: full\nbackend: fake\n"
                    "base: {curve: stop, steps: 20, step_seconds: 0.0}\n"
                    f"axes:\n  arm: {json.dumps(arms)}\n  seed: [0, 1, 2]\n")
    submit(spec, wait=True)
    return "full"


def _rules(tmp_path: Path, text: str) -> str:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return str(path)


def test_the_replay_reports_steps_saved_and_each_delta_at_both_lengths(
        finished: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = _rules(tmp_path, "stop:\n  threshold: {metric: score, at_least: 0.6}\n"
                             "  together: [arm]\n")
    out_json = tmp_path / "check.json"
    ran = run_kappa(capsys, "stop-check", finished, "--rules", rules,
                    "--json", str(out_json))
    assert ran.code == 0, ran.output
    # early meets it at 2, late at 8: each group stops at 8 + 2 = 10, both members.
    assert "RL steps: 60 of 120 (50% saved)" in ran.out
    assert "6 of 6 cells stop early" in ran.out
    figures = json.loads(out_json.read_text())
    (delta,) = [c for c in figures["comparisons"] if c["kind"] == "delta"]
    assert delta["value"] == "late" and delta["steps"] == [10] and delta["n"] == 3
    assert delta["full"] == pytest.approx(0.9 - 0.6)  # at step 20
    assert delta["stopped"] == pytest.approx(LATE[9] - 0.6)  # at step 10
    assert not delta["sign_changed"]
    assert "| delta |" in ran.out and "| 10 |" in ran.out

    # Each on its own: early at 2, late at 8, so its delta compares steps 2 and 8.
    ran = run_kappa(capsys, "stop-check", finished, "--rules", rules, "--together", "",
                    "--delta", "arm=early")
    assert ran.code == 0, ran.output
    assert "RL steps: 30 of 120 (75% saved)" in ran.out
    assert "| 2, 8 |" in ran.out


def test_bad_input_is_refused_with_the_place_and_the_fix(
        finished: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = _rules(tmp_path, "threshold: {metric: score, at_least: 0.6}\ntogether: [arm]\n")
    error = user_error(capsys, "stop-check", finished, "--rules", rules, "--together", "rb")
    assert error.problems[0].location == "--together" and "arm" in (error.problems[0].allowed
                                                                    or "")
    error = user_error(capsys, "stop-check", finished)  # the sweep has no rules of its own
    assert error.problems[0].location == "--rules"
    bad = _rules(tmp_path, "threshold: {metric: score, at_least: 0.6, at_most: 1}\n")
    error = user_error(capsys, "stop-check", finished, "--rules", bad)
    assert error.problems[0].location.startswith("stop.threshold")
    error = user_error(capsys, "stop-check", finished, "--rules", str(tmp_path / "nope.yaml"))
    assert error.problems[0].location == "--rules"
    ran = run_kappa(capsys, "stop-check", "no-such-sweep", "--rules", rules)
    assert ran.code == 2 and "Traceback" not in ran.output


def test_a_delta_value_or_metric_the_sweep_never_has_is_refused_with_the_known_ones(
        finished: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = _rules(tmp_path, "threshold: {metric: score, at_least: 0.6}\ntogether: [arm]\n")
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", rules,
                            "--delta", "arm=middle").problems
    assert problem.location == "--delta" and problem.allowed == "early, late"
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", rules,
                            "--delta", "armz=early").problems
    assert problem.location == "--delta" and "arm" in (problem.allowed or "")
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", rules,
                            "--metric", "scroe").problems
    assert problem.location == "--metric" and "score" in (problem.allowed or "")
    assert problem.fix == "did you mean 'score'?"
    never = _rules(tmp_path, "threshold: {metric: val/acc, at_least: 0.6}\ntogether: [arm]\n")
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", never).problems
    assert problem.location == "--rules" and problem.found == "'val/acc'"


def test_json_goes_only_to_a_regular_file_whole_and_nothing_hangs(
        finished: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    rules = _rules(tmp_path, "threshold: {metric: score, at_least: 0.6}\ntogether: [arm]\n")
    fifo = tmp_path / "figures.fifo"
    os.mkfifo(fifo)
    # A reader is open, so a write the command should not make would not block the test.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    targets = [fifo, folder, a_file / "figures.json", tmp_path / "dev-full-link"]
    (tmp_path / "dev-full-link").symlink_to("/dev/full")
    try:
        os.mknod(tmp_path / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's
        targets.append(tmp_path / "full")
    except (PermissionError, OSError):
        pass  # no right to make devices here: the link above still names one
    for target in targets:
        (problem,) = user_error(capsys, "stop-check", finished, "--rules", rules,
                                "--json", str(target)).problems
        assert problem.location == "--json" and problem.found == str(target), target
    assert os.read(reader, 1) == b""  # nothing was written to the FIFO
    os.close(reader)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    # A missing folder is made (as for --out).
    made = tmp_path / "no-such" / "f.json"
    assert run_kappa(capsys, "stop-check", finished, "--rules", rules, "--json",
                     str(made)).code == 0
    assert json.loads(made.read_text())["comparisons"]
    # A write that fails (a full disk): exit 2, and no file, not half of one.
    from orchestrator.analysis import output


    monkeypatch.setattr(output, "replacing", no_space)
    out = tmp_path / "figures.json"
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", rules,
                            "--json", str(out)).problems
    assert "No space left on device" in problem.message and not out.exists()


@pytest.mark.parametrize("source", ["fifo", "/dev/zero"])
def test_a_rules_file_that_could_hang_is_refused(
        finished: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str) -> None:
    path = tmp_path / "rules.fifo"
    if source == "fifo":
        os.mkfifo(path)
    else:
        path = Path(source)
    (problem,) = user_error(capsys, "stop-check", finished, "--rules", str(path)).problems
    assert problem.location == "--rules" and "not a regular file" in problem.message
