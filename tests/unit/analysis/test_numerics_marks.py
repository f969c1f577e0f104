"""What the ‡ mark says: runs of one row or delta computed by different numerics are named
field by field; a run without provenance differs from runs with some; runs that all lack
it are not marked; LaTeX shows the mark as \\ddag."""

from __future__ import annotations

from typing import Any

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.tables import DeltaSpec, TableSpec, build_table, render
from orchestrator.analysis.tables.numerics import note, run_keys
from orchestrator.runs.provenance import differences, label, numerics_key


def _made(torch: str, gpu: str | None = None) -> dict[str, Any]:
    return {"numerics": {"backend": "verl", "version": "1", "torch": torch, "vllm": "0.9"},
            "machine": {"cpu_capability": "AVX2", "gpu": gpu, "host": "ignored"}}


def test_keys_compare_numerics_kernels_and_gpu_but_not_the_host() -> None:
    a, b = numerics_key(_made("2.6", "H100")), numerics_key(_made("2.6", "H200"))
    assert differences([a, b]) == ["GPU H100 vs H200"]
    same_host_differs = {**_made("2.6", "H100"), "machine": {"cpu_capability": "AVX2",
                                                            "gpu": "H100", "host": "other"}}
    assert differences([a, numerics_key(same_host_differs)]) == []
    assert label(a) == "verl v1, torch 2.6, vllm 0.9, CPU kernels AVX2, GPU H100"
    assert note([a, {}]) == ("numerics differ: provenance unknown for some runs (made before "
                             "kappa recorded it)")
    assert note([{}, {}]) is None and note([a, a]) is None


def _frame(odd: dict[str, Any] | None) -> Any:
    cells = [CellResult("s", f"c{rb}{seed}", "succeeded",
                        {"baseline": "grpo", "reward_budget": rb, "seed": seed},
                        {"eval/x/mean@8": 0.5 + 0.01 * seed + 0.02 * rb},
                        provenance=odd if (rb and seed == 1) else _made("2.6", "H100"))
             for rb in (False, True) for seed in range(3)]
    return frame_from_results(cells)


def test_the_frame_carries_the_keys_and_the_table_marks_the_delta() -> None:
    frame = _frame(_made("2.7", "H100"))
    assert run_keys(frame)[4]["torch"] == "2.7" and run_keys(frame)[0]["torch"] == "2.6"
    spec = TableSpec(rows=("baseline",), delta=DeltaSpec(axis="reward_budget", base="false"))
    table = build_table(frame, spec)
    text = render(table, "markdown")
    assert "‡1" in text and "‡1 GRPO, + RB: numerics differ: torch 2.6 vs 2.7." in text
    assert "\\ddag{}" in render(table, "latex")
    unmarked = render(build_table(_frame(_made("2.6", "H100")), spec), "markdown")
    assert "‡" not in unmarked


def test_a_point_run_in_two_sweeps_keeps_each_runs_provenance() -> None:
    # One cell id (same settings) in two sweeps, made on two GPUs: each row says its own.
    cells = [CellResult(sweep, "c1", "succeeded", {"seed": 0}, {"eval/x/mean@8": 0.5},
                        provenance=_made("2.6", gpu))
             for sweep, gpu in (("a", "H100"), ("b", "H200"))]
    frame = frame_from_results(cells)
    assert list(frame["prov.machine.gpu"]) == ["H100", "H200"]
    assert list(frame["numerics"]) == [label(numerics_key(_made("2.6", g)))
                                       for g in ("H100", "H200")]
