"""``kappa logs --follow``'s reader: a log read while it grows, until its cell ends."""

from __future__ import annotations

from pathlib import Path

from orchestrator.runs.log_follow import stream_log


def test_following_prints_what_is_appended_until_the_cell_ends(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    # Each pause of the follower is when the "job" writes on: first the log appears, then
    # lines (one split inside a character), then the cell ends after a last line.
    writes = [b"step 1\n", b"step 2 \xc3", b"\xa9\n", b"", b"last line\n"]
    ended: list[bool] = []
    shown: list[str] = []

    def job_writes() -> None:
        with open(log, "ab") as fh:
            fh.write(writes.pop(0))
        if not writes:
            ended.append(True)  # written just before the cell ended: still printed

    assert stream_log(log, shown.append, lambda: bool(ended), job_writes)
    assert "".join(shown) == "step 1\nstep 2 é\nlast line\n"
    assert all("\ufffd" not in text for text in shown)


def test_a_log_started_anew_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("old attempt, a long line\n")
    rounds = iter([lambda: log.write_text("new\n"), lambda: None])
    shown: list[str] = []
    done: list[bool] = []

    def pause() -> None:
        next(rounds)()
        done.append(True)

    stream_log(log, shown.append, lambda: len(done) >= 2, pause)
    assert "".join(shown) == "old attempt, a long line\nnew\n"


def test_without_follow_a_missing_log_says_so(tmp_path: Path) -> None:
    shown: list[str] = []
    assert not stream_log(tmp_path / "none.log", shown.append)
    assert shown == []
