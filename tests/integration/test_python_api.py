"""``orchestrator.api`` on a real tiny embedded sweep (slow: trains), and on run folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from kit.home import seed_mlflow_store
from kit.synthetic import synthetic_cells, write_run_folders
from kit.tiny_spec import tiny_embedded

from orchestrator import api
from orchestrator.errors import UserInputError
from orchestrator.sweeps.driver import submit

TINY = tiny_embedded("api-tiny", {"reward_budget": [False, True]})


@pytest.fixture(scope="module")
def tiny_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("api") / "home"
    seed_mlflow_store(home)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KAPPA_HOME", str(home))
        patch.setenv("KAPPA_POLL_INTERVAL", "0.1")
        spec = home.parent / "tiny.yaml"
        spec.write_text(TINY)
        submit(spec, wait=True, max_parallel=2)
        yield home


@pytest.mark.slow
def test_every_function_on_a_real_sweep(tiny_home: Path) -> None:
    sweeps = api.sweeps()
    row = sweeps.set_index("name").loc["api-tiny"]
    assert (row["backend"], row["cells"], row["succeeded"]) == ("embedded", 2, 2)

    cells = api.cells("api-tiny")
    assert list(cells["axis.reward_budget"]) == [False, True]
    assert list(cells["step"]) == [3, 3] and set(cells["state"]) == {"succeeded"}

    final = api.final_metrics("api-tiny", "val-core/*")
    metric_columns = [c for c in final.columns if c.startswith("metric.")]
    assert metric_columns and all(c.startswith("metric.val-core/") for c in metric_columns)
    assert final[metric_columns].notna().all().all()

    history = api.histories("api-tiny", "actor/entropy")
    assert set(history["metric"]) == {"actor/entropy"}
    assert sorted(history.groupby("cell_id")["step"].max()) == [3, 3]
    assert set(history["sweep"]) == {"api-tiny"}

    text = api.table_text("api-tiny")
    assert text.startswith("| RB | n |") and "| + RB | 1 |" in text
    table = api.table("api-tiny")
    assert list(table["kind"]) == ["absolute", "delta"]
    assert list(table["n"]) == [1, 1]


def test_functions_on_run_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    cells = synthetic_cells("toy", baselines=("grpo",), seeds=(0, 1), benchmarks=("arith",))
    write_run_folders(tmp_path / "runs", cells, steps=20)
    more = synthetic_cells("toy2", baselines=("grpo",), seeds=(2,), benchmarks=("arith",))
    write_run_folders(tmp_path / "runs", more, steps=20)
    assert api.sweeps().empty  # no registry: nothing to list, nothing created
    both = api.cells(["toy", "toy2"])
    assert list(both["sweep"].unique()) == ["toy", "toy2"] and len(both) == 6
    assert both["settings_diff"].isna().all()  # no point ran twice
    assert list(api.final_metrics("toy", "eval/*").columns)[-1] == "metric.eval/arith/mean@8"
    history = api.histories(["toy", "toy2"], "actor/entropy")
    assert set(history["sweep"]) == {"toy", "toy2"}
    assert set(history["cell_id"]) == set(both["cell_id"])
    table = api.table(["toy", "toy2"], delta="reward_budget=false")
    assert list(table["Sweep"]) == ["toy, toy2", "toy, toy2"] and list(table["n"]) == [3, 3]
    assert api.table_text("toy", rows="baseline,reward_budget").startswith("| Method |")


@pytest.mark.parametrize("layout", [
    {"confidence": 2.0}, {"rowz": "baseline"}, {"delta": "reward_budget"},
    {"where": ["no-equals-sign"]}, {"fmt": "docx"}])
def test_a_bad_table_option_is_the_clis_error(layout: dict[str, object], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    cells = synthetic_cells("toy", baselines=("grpo",), seeds=(0, 1), benchmarks=("arith",))
    write_run_folders(tmp_path / "runs", cells, steps=20)
    with pytest.raises(UserInputError):
        api.table_text("toy", **layout)  # type: ignore[arg-type]
    if "fmt" not in layout:
        with pytest.raises(UserInputError):
            api.table("toy", **layout)


def test_table_rows_name_their_base_and_columns_are_typed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    cells = synthetic_cells("toy", baselines=("grpo", "drgrpo"), seeds=(0, 1, 2),
                            benchmarks=("arith",))
    write_run_folders(tmp_path / "runs", cells, steps=20)
    table = api.table("toy")
    # Two rows are both "+ RB": each names the row it is a delta of.
    assert list(table["Method"]) == ["DrGRPO", "+ RB", "GRPO", "+ RB"]
    assert table["base"].tolist() == [pd.NA, "DrGRPO", pd.NA, "GRPO"]
    assert table["Average significant"].dtype == "boolean"
    assert table["block"].dtype == "string" and table["block"].isna().all()
    frame = api.cells("toy")
    assert frame["axis.seed"].dtype == "Int64" and frame["step"].dtype == "Int64"
    assert frame["axis.reward_budget"].dtype == "boolean"
    assert frame["axis.baseline"].dtype == "string"
    assert api.final_metrics("toy")["axis.seed"].dtype == "Int64"
    # The CLI's table is what it was: no base column there.
    assert "base" not in api.table_text("toy", fmt="csv").splitlines()[0].split(",")
