"""A search sweep's results: the best trial per study (``kappa table``), trial numbers
and states on each cell's row (``kappa export``), and Optuna's plots (``kappa report``)."""

from __future__ import annotations

import contextlib
from typing import Any

from orchestrator.analysis.studies import StudySummary, study_summaries
from orchestrator.analysis.tables.render import frame_table


def sweep_studies(sweep: str, registry_url: str | None = None) -> list[StudySummary]:
    """The studies of ``sweep`` (empty when it is not a search or the registry lacks it)."""
    from orchestrator import paths
    from orchestrator.registry import Registry, RegistryMissing

    try:
        with Registry.open(paths.registry_url(registry_url), create=False) as reg:
            record = reg.find_sweep(sweep)
            return [] if record is None else study_summaries(reg, record)
    except RegistryMissing:
        return []


def best_trials(studies: list[StudySummary], fmt: str) -> str:
    """One row per study in ``fmt`` (markdown, csv, latex or html): its best trial's
    number, value and searched settings, and how many trials ended each way."""
    import pandas as pd

    rows = []
    for study in studies:
        best = study.best
        rows.append({"study": study.name, "best trial": None if best is None else best.number,
                     study.metric: None if best is None else best.value,
                     **({} if best is None else best.params),
                     "done": study.count("COMPLETE"), "pruned": study.count("PRUNED"),
                     "failed": study.count("FAIL")})
    return frame_table(pd.DataFrame(rows), fmt, _md)


def _md(_column: str, value: Any) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:.4g}"
    return "" if value is None else str(value)


def with_trials(frame: Any, sweep: str, registry_url: str | None = None) -> Any:
    """``frame`` (one row per cell of ``sweep``) with ``study``, ``trial.number`` and
    ``trial.state`` when ``sweep`` is a search."""
    from orchestrator import paths
    from orchestrator.registry import Registry

    studies = sweep_studies(sweep, registry_url)
    if not studies or "cell_id" not in frame.columns:
        return frame
    states: dict[tuple[Any, Any], str] = {(s.name, t.number): t.state
                                          for s in studies for t in s.trials}
    with Registry.open(paths.registry_url(registry_url), create=False) as reg:
        labels = {c.cell_id: c.labels for c in reg.cells(sweep)}
    study = [labels.get(c, {}).get("kappa.study") for c in frame["cell_id"]]
    number = [labels.get(c, {}).get("kappa.trial") for c in frame["cell_id"]]
    return frame.assign(**{"study": study, "trial.number": number, "trial.state": [
        states.get((s, n)) for s, n in zip(study, number, strict=True)]})


def optuna_figures(studies: list[StudySummary]) -> list[tuple[str, Any]]:
    """``(title, plotly figure)``: per study, Optuna's optimization history, parameter
    importances (with two or more complete trials and params) and slice plot."""
    import optuna.visualization as vis

    figures: list[tuple[str, Any]] = []
    for study in studies:
        if study.study is None or not study.count("COMPLETE"):
            continue
        figures.append((f"{study.name}: optimization history",
                        vis.plot_optimization_history(study.study)))
        if study.count("COMPLETE") >= 2 and study.best and len(study.best.params) >= 1:
            with contextlib.suppress(RuntimeError, ValueError):  # too few points to judge
                figures.append((f"{study.name}: parameter importances",
                                vis.plot_param_importances(study.study)))
        figures.append((f"{study.name}: slice plot", vis.plot_slice(study.study)))
    return figures


def search_section(studies: list[StudySummary], with_plotlyjs: bool) -> str:
    """The report's search section: each study's line and its Optuna plots (offline HTML:
    plotly.js inlined once, here when the report has no other plotly figure)."""
    import html

    if not studies:
        return ""
    parts = [f"<p>{html.escape(s.line())}</p>" for s in studies]
    for n, (title, figure) in enumerate(optuna_figures(studies)):
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(figure.to_html(full_html=False,
                                    include_plotlyjs=with_plotlyjs and n == 0))
    return "\n".join(parts)
