"""Renderers of the advantage table: markdown (default), csv and LaTeX.

Numbers are rounded half away from zero (0.625 -> 0.63, 166.67 -> 167), as in the paper's
Table 1, rather than Python's round-half-to-even.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext

from orchestrator.algorithms.sharpness import TABLE_CONSTRUCTIONS, AdvantageRow
from orchestrator.errors import unknown_name


def round_half_up(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, halves rounded away from zero.

    Any magnitude works (κ = 1/β grows without bound as β shrinks); ``inf``/``nan`` are
    written as such.
    """
    if not math.isfinite(value):
        return repr(value)
    # round(…, 10) first absorbs float noise such as 0.07499999999999998 for 0.075.
    exact = Decimal(repr(round(value, 10)))
    quantum = Decimal(1).scaleb(-places)
    with localcontext() as ctx:
        # quantize fails once the result has more digits than the context's precision
        # (28 by default): give it every integer digit plus the decimals.
        ctx.prec = max(ctx.prec, exact.adjusted() + places + 2)
        text = str(exact.quantize(quantum, rounding=ROUND_HALF_UP))
    return "0" + text[2:] if text.startswith("-0") and set(text[2:]) <= {".", "0"} else text


def _cells(row: AdvantageRow) -> list[str]:
    out = [f"{row.k}/{row.group_size}"]
    for _, name in TABLE_CONSTRUCTIONS:
        cell = row.by_construction(name)
        out += [round_half_up(cell.pos, 2), round_half_up(cell.neg, 2),
                round_half_up(cell.kappa, 0)]
    return out


def render_markdown(rows: Sequence[AdvantageRow]) -> str:
    """A GitHub-flavoured markdown table, one column group per construction."""
    groups = " | ".join(f"{title} A+ | {title} A- | {title} κ" for title, _ in TABLE_CONSTRUCTIONS)
    header = f"| k/G | {groups} |"
    rule = "|" + "---|" * (1 + 3 * len(TABLE_CONSTRUCTIONS))
    body = ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join([header, rule, *body]) + "\n"


def render_csv(rows: Sequence[AdvantageRow]) -> str:
    """CSV with full precision (no rounding): k, G, then pos/neg/kappa per construction."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["k", "G"] + [f"{name}_{part}" for _, name in TABLE_CONSTRUCTIONS
                                  for part in ("pos", "neg", "kappa")])
    for row in rows:
        values: list[object] = [row.k, row.group_size]
        for _, name in TABLE_CONSTRUCTIONS:
            cell = row.by_construction(name)
            values += [repr(cell.pos), repr(cell.neg), repr(cell.kappa)]
        writer.writerow(values)
    return buffer.getvalue()


def render_latex(rows: Sequence[AdvantageRow]) -> str:
    """A booktabs ``tabular`` in the layout of the paper's Table 1."""
    n = len(TABLE_CONSTRUCTIONS)
    titles = " & ".join(rf"\multicolumn{{3}}{{c}}{{{title}}}" for title, _ in TABLE_CONSTRUCTIONS)
    rules = " ".join(rf"\cmidrule(lr){{{2 + 3 * i}-{4 + 3 * i}}}" for i in range(n))
    lines = [
        r"\begin{tabular}{l" + "rrr" * n + "}",
        r"\toprule",
        f" & {titles} \\\\",
        rules,
        "$k/G$ & " + " & ".join(["$+$ & $-$ & $\\kappa$"] * n) + r" \\",
        r"\midrule",
    ]
    for row in rows:
        cells = _cells(row)
        cells[0] = f"${cells[0]}$"
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


TABLE_FORMATS: dict[str, Callable[[Sequence[AdvantageRow]], str]] = {
    "markdown": render_markdown,
    "csv": render_csv,
    "latex": render_latex,
}


def render_advantage_table(rows: Sequence[AdvantageRow], fmt: str = "markdown") -> str:
    """Render rows of :func:`~orchestrator.algorithms.sharpness.advantage_table` as ``fmt``."""
    renderer = TABLE_FORMATS.get(fmt)
    if renderer is None:
        raise unknown_name("table format", fmt, TABLE_FORMATS, "format")
    return renderer(rows)
