"""The miniature studies of docs/findings.md: each a spec and a writer for its section.

A writer takes the finished sweep (see ``bench/findings.py``), applies the verdict rules of
``bench/findings_rules.py`` and returns the section's markdown; figures go to
``docs/img/findings/``. The rules were fixed before the final runs; do not tune them on
results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from findings_rules import (
    Verdict,
    all_reproduce,
    directional,
    paired,
    t_verdict,
)

from orchestrator.analysis.stats import fixed_groups_interval

if TYPE_CHECKING:
    from findings import Sweep

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "img" / "findings"
VAL = "metric.val-core/arith-val/acc/mean@1"
ENTROPY = "actor/entropy"
VAL_CURVE = "val-core/arith-val/acc/mean@1"


@dataclass(frozen=True)
class Study:
    """One miniature: its key, spec, sweep name and section writer."""

    key: str
    spec: Path
    sweep: str
    write: Callable[[Sweep], str]


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["state"] == "succeeded"]


def _average_mean_at_k(frame: pd.DataFrame) -> pd.Series:
    cols = [c for c in frame.columns if c.startswith("metric.eval/") and "/mean@" in c]
    return frame[cols].mean(axis=1)


def _by(frame: pd.DataFrame, value: pd.Series, where: dict[str, Any],
        key: Sequence[str]) -> dict[Any, float]:
    mask = np.ones(len(frame), dtype=bool)
    for axis, wanted in where.items():
        mask &= (frame[f"axis.{axis}"].astype(str) == str(wanted)).to_numpy()
    rows = frame[mask]
    return {tuple(r[f"axis.{k}"] for k in key): float(value.loc[i])
            for i, r in rows.iterrows()}


def _line(name: str, verdict: Verdict, unit: str = " points", scale: float = 100.0,
          digits: int = 2) -> str:
    return (f"- **{name}**: {verdict.cell(scale, unit, digits)} — **{verdict.verdict}** "
            f"({verdict.why}).")


def _verdict_row(verdict: str) -> str:
    return f"\n**Verdict: {verdict}.**\n"


SUMMARY = "<!-- summary |"


def summary(finding: str, claim: str, source: str, result: str, verdict: str, why: str,
            study: str) -> str:
    """One row of the page's summary table, kept (hidden) in the study's section so a
    rerun of some studies keeps the others' rows."""
    command = f"`bench/findings.py --only {study}`"
    return (f"{SUMMARY} {finding} | {claim} | {source} | {result} | **{verdict}** | {why} | "
            f"{command} -->")


# --- 1. Table 2 ---------------------------------------------------------------------------


def table2_writer(key: str, finding: str, title: str) -> Callable[[Sweep], str]:
    """The writer of a toy Table 2 study: finding ``finding``'s rule on sweep's cells."""

    def write(sweep: Sweep) -> str:
        frame = _ok(sweep.cells)
        avg = _average_mean_at_k(frame)
        diffs: dict[str, list[float]] = {}
        for baseline in sorted(frame["axis.baseline"].unique()):
            rb = _by(frame, avg, {"baseline": baseline, "reward_budget": True}, ["seed"])
            base = _by(frame, avg, {"baseline": baseline, "reward_budget": False}, ["seed"])
            diffs[baseline] = paired(rb, base)
        verdict = directional(fixed_groups_interval({k: v for k, v in diffs.items() if v}),
                              "six-baseline mean of RB − baseline, Average column")
        per = ", ".join(f"{b} {100 * np.mean(d):+.2f}" for b, d in diffs.items() if d)
        return "\n".join([
            f"### {finding}. {title} (`{sweep.name}`)", "",
            f"`kappa table {sweep.name}` (mean@8 at temperature 0.7, points, 95% intervals "
            "over seeds; '+ RB' rows are paired deltas):", "", sweep.table().strip(), "",
            _line("RB − baseline, six-baseline average", verdict),
            f"- Per baseline (mean over seeds): {per}.",
            _verdict_row(verdict.verdict),
            summary(finding, "Reward budgeting improves the six baselines on average",
                    "paper 1, Table 2, §5.2", verdict.cell(100, " pts"), verdict.verdict,
                    verdict.why, key)])

    return write


write_table2 = table2_writer("table2", "1", "Reward budgeting on six baselines")
write_table2_300 = table2_writer("table2_300", "1b",
                                 "Reward budgeting on six baselines at 300 steps, "
                                 "pre-registered")


# --- 2. Table 3 ---------------------------------------------------------------------------


def write_table3(sweep: Sweep) -> str:
    frame = _ok(sweep.cells)
    avg = _average_mean_at_k(frame)
    parts = []
    for kl in (True, False):
        rb = _by(frame, avg, {"use_kl_loss": kl, "reward_budget": True}, ["seed"])
        base = _by(frame, avg, {"use_kl_loss": kl, "reward_budget": False}, ["seed"])
        parts.append((kl, t_verdict(paired(rb, base), f"RB − no RB, KL {'on' if kl else 'off'}")))
    off = _by(frame, avg, {"use_kl_loss": False, "reward_budget": False}, ["seed"])
    on = _by(frame, avg, {"use_kl_loss": True, "reward_budget": False}, ["seed"])
    kl_alone = t_verdict(paired(off, on), "KL removed, no RB")
    return "\n".join([
        "### 2. KL × reward budgeting (`toy-table3`)", "",
        f"`kappa table {sweep.name} --cross use_kl_loss,reward_budget` (absolute scores):", "",
        sweep.table("--cross", "use_kl_loss,reward_budget").strip(), "",
        *[_line(f"RB − no RB with KL {'on' if kl else 'off'}", v) for kl, v in parts],
        f"- KL removal alone (no RB), no verdict rule: {kl_alone.cell(100, ' points')}.",
        _verdict_row(all_reproduce([v for _, v in parts])),
        summary("2", "RB's gain holds with and without the KL loss", "paper 1, Table 3, §5.4",
                "; ".join(f"KL {'on' if kl else 'off'}: {v.cell(100, ' pts')}"
                          for kl, v in parts),
                all_reproduce([v for _, v in parts]),
                "; ".join(v.why for _, v in parts), "table3")])


def _mean_ci(values: pd.Series, scale: float, digits: int = 1) -> str:
    from orchestrator.analysis.stats import t_interval

    vals = [float(v) * scale for v in values if pd.notna(v)]
    if not vals:
        return "—"
    iv = t_interval(vals)
    if iv.half_width is None:
        return f"{iv.estimate:.{digits}f}"
    return f"{iv.estimate:.{digits}f} ± {iv.half_width:.{digits}f}"


# --- 4. entropy interventions -------------------------------------------------------------


def _window_mean(curves: pd.DataFrame, metric: str, first: int, last: int) -> dict[Any, float]:
    mine = curves[(curves["metric"] == metric) & (curves["step"] >= first)
                  & (curves["step"] <= last)]
    return {cell: float(g["value"].mean()) for cell, g in mine.groupby("cell_id")}


def _curve_figure(curves: pd.DataFrame, axis: str, metric: str, name: str, ylabel: str,
                  vline: float | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIGURES.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    mine = curves[curves["metric"] == metric]
    for i, (value, group) in enumerate(mine.groupby(f"axis.{axis}")):
        mean = group.groupby("step")["value"].mean()
        ax.plot(mean.index, mean.to_numpy(), color=f"C{i}", label=f"{axis}={value}")
    if vline is not None:
        ax.axvline(vline, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("RL step")
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    path = FIGURES / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(ROOT / "docs"))


INTERVENTION_STEPS = 50  # experiments/toy/entropy_study.yaml


def write_entropy(sweep: Sweep) -> str:
    frame = _ok(sweep.cells)
    curves = sweep.curves([ENTROPY, VAL_CURVE])
    during = _window_mean(curves, ENTROPY, 1, INTERVENTION_STEPS)
    seed_of = dict(zip(frame["cell_id"], frame["axis.seed"], strict=True))
    kind_of = dict(zip(frame["cell_id"], frame["axis.intervention"], strict=True))

    def per_seed(values: dict[Any, float], kind: str) -> dict[Any, float]:
        return {seed_of[c]: v for c, v in values.items() if kind_of.get(c) == kind}

    final = dict(zip(frame["cell_id"], frame[VAL], strict=True))
    lines, overall, results = [], [], []
    for kind in ("entropy_loss", "entropy_reward"):
        raised = t_verdict(paired(per_seed(during, kind), per_seed(during, "none")),
                           f"{kind}: entropy over steps 1–{INTERVENTION_STEPS} − none's")
        gain = t_verdict(paired(per_seed(final, kind), per_seed(final, "none")),
                         f"{kind}: final accuracy − none's", rule="no_gain")
        lines += [_line(f"{kind}, entropy while active (precondition)", raised, " nats", 1.0, 4),
                  _line(f"{kind}, final greedy accuracy after removal", gain)]
        overall.append(gain if raised.verdict == "reproduces"
                       else Verdict(gain.interval, "not tested", f"{kind}: entropy did not rise"))
        results.append(f"{kind}: {gain.cell(100, ' pts')}")
    ent_fig = _curve_figure(curves, "intervention", ENTROPY, "entropy_interventions.png",
                            "mean token entropy", INTERVENTION_STEPS)
    acc_fig = _curve_figure(curves, "intervention", VAL_CURVE, "entropy_accuracy.png",
                            "greedy validation accuracy", INTERVENTION_STEPS)
    return "\n".join([
        "### 4. Entropy interventions, then removed (`toy-entropy`)", "",
        f"`kappa table {sweep.name}` (final scores):", "", sweep.table().strip(), "",
        *lines, "",
        f"![entropy during and after the interventions]({ent_fig})",
        f"![validation accuracy]({acc_fig})",
        _verdict_row(all_reproduce(overall)),
        summary("4", "Early entropy interventions leave no lasting gain once removed",
                "paper 1, §3.1, Figure 2", "; ".join(results), all_reproduce(overall),
                "; ".join(v.why for v in overall), "entropy")])


# --- 5. spurious rewards ------------------------------------------------------------------


def spurious_writer(key: str, findings: tuple[str, str], title: str,
                    figure: str) -> Callable[[Sweep], str]:
    """The writer of a random-reward × clip-ratio study (findings 5 and 6, or a rerun of
    them under other settings as ``findings``), with the same rules and precondition."""
    return lambda sweep: _spurious(sweep, key, findings, title, figure)


def _spurious(sweep: Sweep, key: str, findings: tuple[str, str], title: str,
              figure: str) -> str:
    frame = _ok(sweep.cells)
    curves = sweep.curves([ENTROPY, "actor/pg_clipfrac", VAL_CURVE])
    last_step = int(curves["step"].max())
    early = _window_mean(curves, ENTROPY, 1, 10)
    late = _window_mean(curves, ENTROPY, last_step - 9, last_step)
    change = {c: late[c] - early[c] for c in early if c in late}
    clipfrac = _window_mean(curves, "actor/pg_clipfrac", 1, last_step)
    final = dict(zip(frame["cell_id"], frame[VAL], strict=True))
    eps_of = dict(zip(frame["cell_id"], frame["axis.clip_ratio"].astype(str), strict=True))
    key_of = {c: (s, g) for c, s, g in zip(frame["cell_id"], frame["axis.seed"],
                                           frame["axis.group_size"], strict=True)}

    def at(values: dict[Any, float], eps: str) -> dict[Any, float]:
        return {key_of[c]: v for c, v in values.items() if eps_of.get(c) == eps}

    clipped, unclipped = "0.2", "inf"
    acts = np.mean(list(at(clipfrac, clipped).values()) or [0.0])
    fall = t_verdict([-v for v in at(change, clipped).values()],
                     "entropy falls under ε = 0.2 (first 10 − last 10 steps)")
    vs = t_verdict(paired(at(change, unclipped), at(change, clipped)),
                   "entropy change, ε = ∞ minus ε = 0.2")
    acc = t_verdict(paired(at(final, clipped), at(final, unclipped)),
                    "final accuracy, ε = 0.2 minus ε = ∞", rule="no_gain")
    rows = ["| ε | entropy change (nats) | mean pg_clipfrac | final greedy val acc (points) |",
            "| --- | --- | --- | --- |"]
    for eps in ("0.2", "0.1", "inf"):
        rows.append(f"| {eps} | {_mean_ci(pd.Series(list(at(change, eps).values())), 1.0, 4)} | "
                    f"{np.mean(list(at(clipfrac, eps).values()) or [float('nan')]):.4f} | "
                    f"{_mean_ci(pd.Series(list(at(final, eps).values())), 100.0)} |")
    precondition = acts > 0.001
    entropy_verdict = all_reproduce([fall, vs]) if precondition else "not tested"
    fig = _curve_figure(curves, "clip_ratio", ENTROPY, figure, "mean token entropy")
    five, six = findings
    return "\n".join([
        f"### {title} (`{sweep.name}`)", "",
        "Means over seeds × group sizes (95% intervals):", "", *rows, "",
        f"- Precondition, clipping acts: mean `actor/pg_clipfrac` at ε = 0.2 is {acts:.4f} "
        f"({'above' if precondition else 'not above'} 0.001).",
        _line("Entropy falls with ε = 0.2", fall, " nats", 1.0, 4),
        _line("Entropy change, ε = ∞ minus ε = 0.2", vs, " nats", 1.0, 4),
        f"\n**Finding {five} verdict: {entropy_verdict}.**\n",
        _line("Final accuracy, ε = 0.2 minus ε = ∞", acc),
        f"\n**Finding {six} verdict: {acc.verdict}.**\n",
        f"![entropy under random rewards by clip ratio]({fig})",
        summary(five, "Under random rewards clipping lowers entropy; without it entropy does "
                "not fall", "paper 2, §4.2, Figure 2",
                f"fall at ε = 0.2: {fall.cell(1.0, ' nats', 4)}; "
                f"∞ − 0.2: {vs.cell(1.0, ' nats', 4)}",
                entropy_verdict,
                "; ".join(v.why for v in (fall, vs)) if precondition
                else f"clipping did not act (pg_clipfrac {acts:.4f})", key),
        summary(six, "Clipping is not what raises accuracy under random rewards",
                "paper 2, §3.2, Figure 1", acc.cell(100, " pts"), acc.verdict, acc.why,
                key)])


write_spurious = spurious_writer("spurious", ("5", "6"), "5–6. Random rewards and clipping",
                                 "spurious_entropy.png")
write_spurious_pressure = spurious_writer(
    "spurious_pressure", ("5b", "6b"), "5b–6b. Random rewards and clipping, with pressure",
    "spurious_pressure_entropy.png")
