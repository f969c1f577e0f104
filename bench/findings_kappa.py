"""The κ studies of docs/findings.md (findings 3 and 3b): convergence step per κ setting.

The rules were fixed before the final runs (``docs/findings.md``, predictions 3 and 3b);
the shared helpers live in ``findings_studies``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import findings_studies as fs
import pandas as pd
from findings_rules import Verdict, all_reproduce, paired, t_verdict

if TYPE_CHECKING:
    from findings import Sweep


@dataclass(frozen=True)
class KappaDesign:
    """One κ study: its settings (largest κ first), the finding it tests and its rule.

    ``censor_at``: when set, a run with no convergence step counts as converging at that
    step (the end of its budget) — a lower bound, stated with the rule before the run.
    """

    settings: tuple[str, ...]
    finding: str
    heading: str
    figure: str
    key: str
    censor_at: int | None = None


PAPER_KAPPA = KappaDesign(("k5000", "k2000", "k200"), "3",
                          "3. Sharpening pressure κ and convergence (`toy-kappa`)",
                          "kappa_accuracy.png", "kappa")
SCALED_KAPPA = KappaDesign(("k50", "k20", "k2"), "3b",
                           "3b. κ with a KL that binds: κ = 50, 20, 2 (`toy-kappa-scaled`)",
                           "kappa_scaled_accuracy.png", "kappa_scaled", censor_at=150)


def _kappa_steps(conv: pd.DataFrame, design: KappaDesign) -> dict[str, dict[Any, float]]:
    steps: dict[str, dict[Any, float]] = {}
    for k, g in conv.groupby("kappa"):
        found = g["convergence_step"].astype(float)
        if design.censor_at is not None:
            found = found.fillna(float(design.censor_at))
        steps[str(k)] = dict(zip(g["seed"], found, strict=True))
    return steps


def write_kappa(sweep: Sweep, design: KappaDesign = PAPER_KAPPA) -> str:
    conv = sweep.convergence()
    conv = conv[conv["state"] == "succeeded"]
    big, small = design.settings[0], design.settings[-1]
    kb, ks = big.removeprefix("k"), small.removeprefix("k")
    steps = _kappa_steps(conv, design)
    later = t_verdict(paired(steps.get(small, {}), steps.get(big, {})),
                      f"t_conv(κ={ks}) − t_conv(κ={kb})")
    found = int(conv["convergence_step"].notna().sum())
    if later.verdict == "not tested":
        later = Verdict(later.interval, later.verdict,
                        f"a convergence step was found in {found} of {len(conv)} runs, so no "
                        f"κ = {ks} / κ = {kb} pair has both")
    frame = fs._ok(sweep.cells)
    curves = sweep.curves([fs.VAL_CURVE])
    figure = _kappa_figure(curves, conv, design)
    rows = ["| κ setting | convergence step (runs where one was found) | "
            "final greedy val acc (points) | n |",
            "| --- | --- | --- | --- |"]
    for k in design.settings:
        cells = conv[conv["kappa"] == k]
        final = frame[frame["axis.kappa"] == k][fs.VAL]
        settled = int(cells["convergence_step"].notna().sum())
        rows.append(f"| {k} | {fs._mean_ci(cells['convergence_step'], 1.0)} "
                    f"({settled} of {len(cells)}) | "
                    f"{fs._mean_ci(final, 100.0)} | {len(cells)} |")
    lines = [f"### {design.heading}", "",
             f"Convergence step from `kappa convergence {sweep.name}`:", "", *rows, "",
             f"![validation accuracy against step per κ]({figure})", "",
             fs._line(f"t_conv(κ={ks}) − t_conv(κ={kb}), paired by seed", later, " steps", 1.0)]
    result = later.cell(1.0, " steps")
    verdict, why = later.verdict, later.why
    if design.censor_at is not None:
        lines[-1] += (f" A run with no convergence step counts as converging at step "
                      f"{design.censor_at} ({len(conv) - found} of {len(conv)} runs).")
        mean_acc = fs._window_mean(curves[curves["axis.kappa"].isin([big, small])],
                                fs.VAL_CURVE, 0, 10**9)
        seed_of = dict(zip(frame["cell_id"], frame["axis.seed"], strict=True))
        kappa_of = dict(zip(frame["cell_id"], frame["axis.kappa"], strict=True))
        by = {k: {seed_of[c]: v for c, v in mean_acc.items() if kappa_of[c] == k}
              for k in (big, small)}
        slower = t_verdict(paired(by[big], by[small]),
                           f"mean val acc over the run, κ={kb} − κ={ks}")
        lines.append(fs._line(f"Slower training: mean validation accuracy over the run, "
                           f"κ={kb} − κ={ks}", slower))
        result += f"; slower: {slower.cell(100, ' pts')}"
        verdict = all_reproduce([later, slower])
        why = f"{why}; {slower.why}"
    return "\n".join([*lines, fs._verdict_row(verdict),
                      fs.summary(design.finding, "Smaller κ converges later"
                              + (" and trains slower" if design.censor_at else ""),
                              "paper 1, §3.2.1, Figure 3", result, verdict, why,
                              design.key)])


def write_kappa_scaled(sweep: Sweep) -> str:
    return write_kappa(sweep, SCALED_KAPPA)


def _kappa_figure(curves: pd.DataFrame, conv: pd.DataFrame, design: KappaDesign) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fs.FIGURES.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, k in enumerate(design.settings):
        color = f"C{i}"
        mine = curves[(curves["axis.kappa"] == k) & (curves["metric"] == fs.VAL_CURVE)]
        if mine.empty:
            continue
        mean = mine.groupby("step")["value"].mean()
        ax.plot(mean.index, mean.to_numpy(), color=color, label=f"{k} (mean of seeds)")
        for _, run in mine.groupby("cell_id"):
            ax.plot(run["step"], run["value"], color=color, alpha=0.2, linewidth=0.8)
        t = conv[conv["kappa"] == k]["convergence_step"].dropna()
        if not t.empty:
            ax.axvline(float(t.mean()), color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("RL step")
    ax.set_ylabel("greedy validation accuracy")
    ax.set_title("κ study: dashed = mean convergence step of the runs that have one")
    ax.legend()
    fig.tight_layout()
    path = fs.FIGURES / design.figure
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(fs.ROOT / "docs"))
