"""The parts of notifications: the ``notify:`` block, masking, the messages, the sender
(against a local HTTP server), the record of what was sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kit.webhook import hanging_endpoint, recording_endpoint, silent_endpoint
from pydantic import ValidationError

from orchestrator.notify.hook import Notifier
from orchestrator.notify.messages import Message, cell_failed, sweep_end
from orchestrator.notify.store import (
    SentLog,
    command_line_url,
    effective,
    load_config,
    save_config,
)
from orchestrator.registry import CellRecord, CellState
from orchestrator.spec.notify_block import NotifySpec, mask_url, shareable
from orchestrator.stopping.budget import SweepHours
from orchestrator.sweeps.status import CellStatus, Driver, SweepStatus

SECRET = "T00/B00/xyzSECRET"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def cell(cell_id: str, state: CellState, index: int = 0, **fields: Any) -> CellRecord:
    now = datetime.now(UTC)
    values: dict[str, Any] = dict(
        sweep_name="s", cell_id=cell_id, index=index, axes={"seed": index}, settings={},
        labels={}, state=state, attempts_count=1, max_retries=0, run_dir=None,
        mlflow_run_id=None, job_id=None, exit_code=None, last_error=None,
        progress_step=None, total_steps=None, progress_updated_at=None, final_metrics=None,
        created_at=now, queued_at=None, started_at=None, finished_at=None)
    return CellRecord(**{**values, **fields})


@pytest.mark.parametrize(("url", "shown"), [
    (f"https://hooks.slack.com/services/{SECRET}", "https://hooks.slack.com/***"),
    ("http://user:pw123@chat.example:8443/hook", "http://chat.example:8443/***"),
    (f"http://user:{SECRET}@chat.example:8443/hook", "***"),  # no URL: all masked
    ("https://chat.example", "https://chat.example"),
    ("${KAPPA_HOOK}", "${KAPPA_HOOK}"),
    ("not a url", "***"),
])
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_the_block_is_strict_and_never_quotes_the_url() -> None:
    block = NotifySpec.model_validate({"url": f"https://h.example/{SECRET}",
                                       "events": ["sweep_end", "diverged"]})
    assert block.events == ("sweep_end", "diverged") and SECRET not in repr(block)
    for bad in ({"url": f"ftp://h.example/{SECRET}"}, {"url": f"h.example/{SECRET}"},
                {"url": f"https://h.example/{SECRET} x"}, {"url": 3},
                {"url": "https://h.example", "events": ["sweep_end", "sweep_end"]},
                {"url": "https://h.example", "events": ["ended"]},
                {"url": "https://h.example", "events": []},
                {"url": "https://h.example", "extra": 1}):
        with pytest.raises(ValidationError) as caught:
            NotifySpec.model_validate(bad)
        assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.errors())


def test_the_url_from_the_environment_or_the_command_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    block = NotifySpec(url="${KAPPA_HOOK}", events=("sweep_end",))
    monkeypatch.setenv("KAPPA_HOOK", "https://h.example/x")
    assert effective(block) == NotifySpec(url="https://h.example/x", events=("sweep_end",))
    with command_line_url("https://other.example/y"):
        assert effective(block) == NotifySpec(url="https://other.example/y",
                                              events=("sweep_end",))
        assert effective(None) == NotifySpec(url="https://other.example/y")
    assert effective(None) is None
    monkeypatch.setenv("KAPPA_HOOK", "file:///etc/passwd")
    with pytest.raises(Exception, match="KAPPA_HOOK"):
        effective(block)


def test_config_is_owner_only_and_the_latest_submit_decides(home: Path) -> None:
    save_config("s", NotifySpec(url=f"https://h.example/{SECRET}"))
    path = home / "runs" / "s" / "notify.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_config("s") == NotifySpec(url=f"https://h.example/{SECRET}")
    save_config("s", None)
    assert not path.exists() and load_config("s") is None
    path.write_text("{broken")
    assert load_config("s") is None  # logged; the sweep runs without notifications


def _status(cells: list[CellRecord], used: float = 12.5) -> SweepStatus:
    """A complete status of ``cells``, as ``Sweep.status`` makes it."""
    return SweepStatus("s", "fake", True, {s.value: sum(c.state is s for c in cells)
                                           for s in CellState}, 0, Driver(None, None),
                       tuple(CellStatus.of(c) for c in cells),
                       hours=SweepHours("GPU-hours", used, 0.0, 0.0, 0.0, None, 0))


def test_messages_in_slack_shape() -> None:
    broken = cell("c1", CellState.FAILED, 1, attempts_count=3,
                  last_error=f"exit code 1\npostgresql://u:{SECRET}@db/x")
    msg = cell_failed("s", broken, "cell_failed")
    body = msg.payload()
    assert set(body) == {"text", "blocks"} and "failed for good after 3 attempts" in body["text"]
    assert msg.key == "cell_failed:c1:3"
    cells = [cell("a", CellState.SUCCEEDED, 0, final_metrics={"val-core/x/acc/mean@1": 0.5}),
             cell("b", CellState.SUCCEEDED, 1, final_metrics={"val-core/x/acc/mean@1": 0.7,
                                                              "eval/x/mean@4": 0.9}),
             cell("c", CellState.SUCCEEDED, 2, final_metrics={"eval/x/mean@4": 0.99}),
             broken]
    end = sweep_end(_status(cells))
    assert "3 succeeded · 1 failed (4 cells)" in end.text
    assert "best val-core/x/acc/mean@1 = 0.7000 (seed=1)" in end.text
    assert "12.50 used" in str(end.fields)
    assert end.key == sweep_end(_status(list(reversed(cells)), used=1.0)).key
    again = [*cells[:3], cell("c1", CellState.FAILED, 1, attempts_count=4)]
    assert end.key != sweep_end(_status(again)).key  # a rerun ends anew
    json.dumps(end.payload())


def test_each_key_is_sent_once_even_by_a_new_sender(home: Path) -> None:
    with recording_endpoint() as (base, received):
        first = Notifier(f"{base}/hook", SentLog("s"), timeout=5, exit_wait=10)
        message = Message("sweep_end", "sweep_end:abc", "kappa: sweep *s* ended: 1 succeeded")
        first.send(message)
        first.send(message)
        first.close()
        assert len(received.bodies) == 1 and first.delivered == ["sweep_end:abc"]
        second = Notifier(f"{base}/hook", SentLog("s"), timeout=5, exit_wait=10)  # a restart
        second.send(message)
        second.send(Message("sweep_end", "sweep_end:def", "kappa: sweep *s* ended again"))
        second.close()
        assert [b["text"] for b in received.bodies][1:] == ["kappa: sweep *s* ended again"]


def test_a_silent_endpoint_costs_the_caller_nothing_but_the_bounded_close(
        caplog: pytest.LogCaptureFixture) -> None:
    with silent_endpoint() as base:
        notifier = Notifier(f"{base}/hook/{SECRET}", SentLog("s"), timeout=0.2,
                            exit_wait=0.5, backoff=0.01)
        for n in range(3):
            notifier.send(Message("cell_failed", f"k{n}", "text"))  # returns at once
        notifier.close()
    assert notifier.delivered == []
    assert SECRET not in caplog.text


def test_a_hanging_endpoint_gets_each_message_once() -> None:
    """At most once: an endpoint that reads the request and never answers may have posted
    it, so it is not sent again (before, it was sent again after each 5 s timeout)."""
    with hanging_endpoint() as (base, requests):
        notifier = Notifier(f"{base}/hook", SentLog("s"), timeout=0.2, exit_wait=30,
                            backoff=0.01)
        notifier.send(Message("sweep_end", "sweep_end:abc", "kappa: sweep *s* ended"))
        notifier.close()  # returns once the worker gave up
        assert [json.loads(body)["text"] for body in requests] == ["kappa: sweep *s* ended"]
    assert notifier.delivered == []


@pytest.mark.parametrize(("answers", "posts", "delivered"), [
    ((503, 429), 3, True),  # "not now": not taken, so sent again
    ((500,), 1, False),  # it may have been taken: never twice
    ((404,), 1, False),
])
def test_only_an_answer_saying_not_taken_is_sent_again(
        answers: tuple[int, ...], posts: int, delivered: bool) -> None:
    with recording_endpoint(answers) as (base, received):
        notifier = Notifier(f"{base}/hook", SentLog("s"), timeout=5, exit_wait=30,
                            backoff=0.01)
        notifier.send(Message("cell_failed", "k", "text"))
        notifier.close()
        assert len(received.bodies) == posts
    assert notifier.delivered == (["k"] if delivered else [])


def test_what_is_stored_of_a_spec_never_holds_a_literal_webhook_secret() -> None:
    url = "https://hooks.example/services/T0/B0/tok"
    text = f"name: s\nnotify: {{url: '{url}'}}  # the team's channel\n"
    stored, shown = shareable(text, [f"notify.url={url}", "base.max_steps=5"],
                              NotifySpec(url=url))
    assert stored == "name: s\nnotify: {url: 'https://hooks.example/***'}  # the team's channel\n"
    assert shown == ("notify.url=https://hooks.example/***", "base.max_steps=5")
    # Another spelling of the URL in an override: its whole value is hidden.
    _, shown = shareable(text, ["++notify.url='https://hooks.example/services/T0/B0/t\\ok'"],
                         NotifySpec(url=url))
    assert shown == ("++notify.url=***",)
    # The resolved text such an override makes holds the URL only where the spec does.
    from orchestrator.spec.loader import read_spec

    escaped = "++notify.url='https://hooks.example/services/T0/B0/t\\ok'"
    spec = read_spec(text, "s.yaml", None, [escaped]).spec
    stored, _ = shareable(spec.source_text, [escaped], spec.notify)
    assert "T0/B0" not in stored and "https://hooks.example/***" in stored
    # Nothing secret to hide: a ${NAME} reference, a bare host, or no block.
    for block in (NotifySpec(url="${HOOK}"), NotifySpec(url="https://hooks.example"), None):
        assert shareable(text, ["x=1"], block) == (text, ("x=1",))


def test_the_sweep_end_says_which_numerics_made_its_numbers() -> None:
    def made(torch: str) -> dict[str, object]:
        return {"kappa": {"version": "0.1.0", "commit": "abcdef0123", "dirty": False},
                "numerics": {"backend": "embedded", "version": "1", "torch": torch},
                "machine": {"cpu_capability": "AVX2", "gpu": None}}

    final = {"val-core/x/acc/mean@1": 0.5}
    same = [cell(c, CellState.SUCCEEDED, i, final_metrics=final, provenance=made("2.13.0"))
            for i, c in enumerate("ab")]
    fields = dict(sweep_end(_status(same)).fields)
    assert fields["made by"] == ("1 environment (embedded v1, torch 2.13.0, CPU kernels AVX2); "
                                 "kappa 0.1.0 at abcdef0")
    mixed = [*same, cell("c", CellState.SUCCEEDED, 2, final_metrics=final,
                         provenance=made("2.12.0"))]
    assert dict(sweep_end(_status(mixed)).fields)["made by"].startswith(
        "2 environments: torch 2.13.0 vs 2.12.0 differ")
    assert "made by" not in dict(sweep_end(_status([cell("d", CellState.SUCCEEDED, 0)])).fields)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_value_in_a_message_is_shown_never_obeyed_by_slack(seed: int) -> None:
    """Slack reads ``<...>`` as a command (a mention, a link): an axis value, a sweep's
    metric or a log line holding one reaches the channel as text."""
    import random

    rng = random.Random(seed)
    print(f"seed={seed}")
    pieces = ["<!channel>", "<!here>", "<@U024BE7LH>", "<https://evil.example|docs>", "&amp;",
              "a>b", "<<x>>", "\x1b]0;t\x07"]
    hostile = "".join(rng.sample(pieces, 4))
    broken = cell("c1", CellState.FAILED, 1, axes={"label": hostile},
                  last_error=f"Traceback: {hostile}")
    won = cell("c2", CellState.SUCCEEDED, 2, axes={"label": hostile},
               final_metrics={"val-core/x/acc/mean@1": 0.5})
    for msg in (cell_failed("s", broken, "cell_failed"), sweep_end(_status([broken, won]))):
        body = json.dumps(msg.payload())
        texts = [msg.payload()["text"], *(b["text"]["text"] if "text" in b else
                                          "".join(f["text"] for f in b["fields"])
                                          for b in msg.payload()["blocks"])]
        for text in texts:
            assert "<" not in text and ">" not in text, text
            assert "\x1b" not in text and "\x07" not in text, text
        assert "&lt;!channel&gt;" in body or "<!channel>" not in hostile
        assert "&amp;amp;" in body or "&amp;" not in hostile  # "&" itself is escaped
    # kappa's own markup still formats: bold sweep, code cell id
    assert cell_failed("s", broken, "cell_failed").payload()["text"].startswith(
        "kappa: cell `c1` of *s* failed")
