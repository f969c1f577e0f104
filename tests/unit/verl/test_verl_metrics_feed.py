"""verl's file logs through the run folder's outbox (logs.MetricsFeed): each (step, metric)
reaches MLflow once across relaunches, driver restarts and a store that goes away."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.verl.logs import LOG_DIR, MetricsFeed, queued_points, verl_metric_key
from orchestrator.tracking.outbox import Outbox

RUN = "run-1"


class Store:
    """Stands in for an ``MlflowClient``: records each point; refuses calls while down."""

    def __init__(self) -> None:
        self.points: list[tuple[str, int, float]] = []
        self.down = threading.Event()
        self.refused = 0

    def log_batch(self, run_id: str, metrics: list[Any]) -> None:
        assert run_id == RUN
        if self.down.is_set():
            self.refused += 1
            raise ConnectionError("store away")
        self.points += [(m.key, m.step, m.value) for m in metrics]


def _log(run_dir: Path, name: str, rows: list[tuple[int, dict[str, Any]]],
         partial: str = "") -> None:
    folder = run_dir / LOG_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "a") as fh:
        fh.writelines(json.dumps({"step": s, "data": d}) + "\n" for s, d in rows)
        fh.write(partial)


def test_keys_are_what_mlflow_accepts() -> None:
    assert verl_metric_key("val-core/openai/gsm8k/acc/mean@8") == \
        "val-core/openai/gsm8k/acc/mean_at_8"
    assert verl_metric_key("a//b/") == "a/b"
    assert verl_metric_key("/x/../y") == "x/__/y"
    assert verl_metric_key("p(x)") == "p_x_"


def test_relaunch_and_driver_restart_queue_each_point_once(tmp_path: Path) -> None:
    store = Store()
    feed = MetricsFeed(tmp_path, RUN, None, client=store)
    _log(tmp_path, "0-run-000.jsonl", [(1, {"a": 1.0, "b@1": 2.0}), (2, {"a": 3.0})],
         partial='{"step": 3, "data": {"a"')  # a line verl is still writing
    assert feed.pump() == 2
    assert feed.close(timeout=60)
    # The driver dies; verl had finished the line. The relaunch resumes from step 1's
    # checkpoint and redoes step 2 (another value, one new key) and 3.
    _log(tmp_path, "0-run-000.jsonl", [], partial=': 5.0, "nan": NaN}}\n')
    _log(tmp_path, "0-run-001.jsonl", [(2, {"a": 30.0, "c": 1.0}), (3, {"a": 50.0})])
    again = MetricsFeed(tmp_path, RUN, None, client=store)
    again.pump()
    assert again.pump() == 0  # nothing new
    assert again.close(timeout=60)
    assert sorted(store.points) == [("a", 1, 1.0), ("a", 2, 3.0), ("a", 3, 5.0),
                                    ("b_at_1", 1, 2.0), ("c", 2, 1.0)]
    assert queued_points(tmp_path) == {("0", 1, "a"), ("0", 1, "b_at_1"), ("0", 2, "a"),
                                       ("0", 3, "a"), ("0", 2, "c")}


def test_the_final_evaluation_is_not_mistaken_for_a_redone_step(tmp_path: Path) -> None:
    # The training phase validates at its last step; the evaluation phase validates the
    # final checkpoint at that same step, maybe under the same name: two points.
    store = Store()
    _log(tmp_path, "0-run-000.jsonl", [(4, {"val-core/x/acc/mean@1": 0.4, "loss": 1.0})])
    _log(tmp_path, "1-eval-000.jsonl", [(4, {"val-core/x/acc/mean@1": 0.6})])
    _log(tmp_path, "1-eval-001.jsonl", [(4, {"val-core/x/acc/mean@1": 0.7})])  # a rerun
    feed = MetricsFeed(tmp_path, RUN, None, client=store)
    assert feed.pump() == 2
    assert feed.close(timeout=60)
    assert sorted(store.points) == [("loss", 4, 1.0), ("val-core/x/acc/mean_at_1", 4, 0.4),
                                    ("val-core/x/acc/mean_at_1", 4, 0.6)]


def test_an_outage_delays_points_and_loses_none(tmp_path: Path) -> None:
    store = Store()
    store.down.set()
    feed = MetricsFeed(tmp_path, RUN, None, client=store)
    for step in range(1, 6):
        _log(tmp_path, "0-run-000.jsonl", [(step, {"x": float(step), "y": 1.0})])
        feed.pump()
    # The driver gives up waiting while the store is away; the points wait on disk.
    assert not feed.close(timeout=0.5)
    assert store.refused >= 1 and store.points == []
    assert Outbox(tmp_path).sent(RUN) == 0 and Outbox(tmp_path).length() == 5
    # The store is back: whoever ends the run (the scheduler) delivers the rest.
    store.down.clear()
    assert Outbox(tmp_path).deliver(store, RUN) == 5
    assert Counter((k, s) for k, s, _ in store.points) == Counter(
        {(k, s): 1 for s in range(1, 6) for k in ("x", "y")})


def test_a_feed_needs_both_mlflow_variables(tmp_path: Path) -> None:
    from orchestrator.backends.verl.logs import feed_from_env

    assert feed_from_env(tmp_path, {"MLFLOW_RUN_ID": RUN}) is None
    assert feed_from_env(tmp_path, {"MLFLOW_TRACKING_URI": "sqlite:///x.db"}) is None


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_METRICS_FLUSH_SECONDS", "5")
