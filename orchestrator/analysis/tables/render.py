"""kappa's table renderer (markdown, LaTeX, CSV, HTML): ablation tables (:func:`render`) and
the advantage table of ``kappa advantage-table`` (:func:`render_advantage_table`)."""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.analysis.tables.model import Table, TableCell, TableRow
from orchestrator.errors import unknown_name
from orchestrator.redact import one_line

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.algorithms.sharpness import AdvantageRow

T = TypeVar("T")

DAGGER = "†"
MISSING = "—"


def _num(value: float, digits: int, signed: bool) -> str:
    if signed:
        text = f"{value:+.{digits}f}"
        # "-0.00" reads as a loss; a delta that rounds to zero is "+0.00".
        return text.replace("-", "+", 1) if float(text) == 0 else text
    return f"{value:.{digits}f}"


def cell_text(cell: TableCell, digits: int, show_ci: bool) -> str:
    """A cell as plain text: ``59.87 ± 1.20``, ``+6.66 [+2.10, +9.00]†`` or ``— (failed)``. A number
    resting on fewer runs than its row's ``n`` says so: ``30.00 ± 1.10 (n=2)``."""
    if cell.interval is None:
        return f"{MISSING} ({cell.missing})" if cell.missing else MISSING
    iv = cell.interval
    fewer = f" (n={iv.n})" if cell.partial else ""
    if cell.kind == "absolute":
        text = _num(iv.estimate, digits, signed=False)
        if show_ci and iv.half_width is not None:
            text += f" ± {_num(iv.half_width, digits, signed=False)}"
        return text + fewer
    text = _num(iv.estimate, digits, signed=True)
    if show_ci and iv.low is not None and iv.high is not None:
        text += f" [{_num(iv.low, digits, True)}, {_num(iv.high, digits, True)}]"
    return text + (DAGGER if cell.significant else "") + fewer


def _row_labels(row: TableRow, yes: str, no: str) -> list[str]:
    """The row's labels as text (``yes``/``no`` for a boolean), the first followed by the row's
    footnote marker."""
    labels = [(yes if x else no) if isinstance(x, bool) else x for x in row.labels]
    if row.marker and labels:
        labels[0] = f"{labels[0]} {row.marker}"
    return labels


def _cell_texts(row: TableRow, table: Table, escape: Callable[[str], str],
                bold: str) -> list[str]:
    """The row's cells as text, escaped, the bold ones in ``bold`` (a format string)."""
    texts = [escape(cell_text(c, table.digits, table.show_ci)) for c in row.cells]
    return [bold.format(t) if c.bold else t for c, t in zip(row.cells, texts, strict=True)]


def md_row(cells: Sequence[str]) -> str:
    """A markdown table row."""
    return "| " + " | ".join(cells) + " |"


def frame_table(frame: pd.DataFrame, fmt: str, text: Callable[[str, Any], str],
                spaced_rule: bool = False) -> str:
    """A plain frame (a header row, a row per record) in ``fmt``: csv or html as pandas
    writes them (floats to 4 significant digits), or latex or markdown with each value as
    ``text(column, value)`` shows it, escaped (markdown's header rule is ``|---|``, or
    ``| --- |`` when ``spaced_rule``)."""
    if fmt == "csv":
        return str(frame.to_csv(index=False))
    if fmt == "html":
        return str(frame.to_html(index=False, float_format="%.4g"))
    head = [str(c) for c in frame.columns]
    if fmt == "latex":  # pandas' writer escapes nothing: "clip_ratio" would not compile
        from pandas.api.types import is_numeric_dtype

        spec = "".join("r" if is_numeric_dtype(frame[c]) else "l" for c in frame.columns)
        body = [_tex_row([_tex(text(c, v)) for c, v in zip(head, row, strict=True)])
                for row in frame.itertuples(index=False)]
        return "\n".join([rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                          _tex_row(list(map(_tex, head))), r"\midrule", *body,
                          r"\bottomrule", r"\end{tabular}"]) + "\n"
    rule = md_row(["---"] * len(head)) if spaced_rule else f"|{'|'.join(['---'] * len(head))}|"
    rows = [md_row([_md_escape(text(c, v)) for c, v in zip(head, row, strict=True)])
            for row in frame.itertuples(index=False)]
    return "\n".join([md_row(list(map(_md_escape, head))), rule, *rows]) + "\n"


def _md_escape(text: str) -> str:
    # A markdown row is one line, and a terminal shows it: line breaks and control
    # characters in a label (an axis value is free text) as their escapes.
    return one_line(text).replace("|", "\\|")


def to_markdown(table: Table) -> str:
    """GitHub-flavoured markdown, one header row, block titles as bold rows."""
    n_labels = len(table.label_headers)
    header = [*table.label_headers, "n", *table.columns]
    lines = [md_row([_md_escape(h) for h in header]),
             md_row(["---"] * n_labels + ["---:"] * (len(header) - n_labels))]
    for block in table.blocks:
        if block.title is not None:
            lines.append(md_row([f"**{_md_escape(block.title)}**"] + [""] * (len(header) - 1)))
        for row in block.rows:
            labels = [_md_escape(x) for x in _row_labels(row, "✓", "✗")]
            lines.append(md_row([*labels, row.n, *_cell_texts(row, table, _md_escape, "**{}**")]))
    lines.append("")
    lines += [f"{note}  " for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"

_LATEX = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    # In the default OT1 font encoding these print as other glyphs (¡, ¿, —).
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",
    "±": r"$\pm$", DAGGER: r"$^\dagger$", MISSING: "---", "×": r"$\times$", "≥": r"$\geq$",
    "§": r"\S{}", "‡": r"\ddag{}", "−": "$-$", "✓": r"$\checkmark$", "✗": r"$\times$",
}


def _tex(text: str) -> str:
    # one_line first: a blank line ends a tabular's paragraph, a control character is an
    # "invalid character" to TeX; their escapes print instead.
    return "".join(_LATEX.get(ch, ch) for ch in one_line(text))


def _tex_row(cells: Sequence[str]) -> str:
    line = " & ".join(cells)
    # After "\\" LaTeX reads a leading "[" as a length ("\\[2pt]"): shield it.
    return ("{}" + line if line.startswith("[") else line) + r" \\"


def to_latex(table: Table) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}`` and ``amssymb`` for ✓)."""
    n_cols = len(table.label_headers) + 1 + len(table.columns)
    spec = "l" * len(table.label_headers) + "r" + "r" * len(table.columns)
    header = [*(_tex(h) for h in table.label_headers), "$n$", *(_tex(c) for c in table.columns)]
    out = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", _tex_row(header), r"\midrule"]
    for b, block in enumerate(table.blocks):
        if block.title is not None:
            if b:
                out.append(r"\midrule")
            out.append(rf"\multicolumn{{{n_cols}}}{{l}}{{\textit{{{_tex(block.title)}}}}} \\")
        for row in block.rows:
            labels = [_tex(x) for x in _row_labels(row, "✓", "✗")]
            out.append(_tex_row([*labels, row.n, *_cell_texts(row, table, _tex,
                                                                 r"\textbf{{{}}}")]))
    out.append(r"\bottomrule")
    out += [rf"\multicolumn{{{n_cols}}}{{l}}{{\footnotesize {_tex(n)}}} \\" for n in table.notes]
    out.append(r"\end{tabular}")
    return "\n".join(out) + "\n"


def to_csv(table: Table) -> str:
    """Machine-readable: per column the estimate, CI bounds and (for deltas) significance."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    head = ["block", *table.label_headers, "kind", "n"]
    for c in table.columns:
        head += [c, f"{c} low", f"{c} high", f"{c} significant", f"{c} n"]
    # Where a stopping rule ended pairs early: the step they were compared at (.compared).
    compared = any(row.note for block in table.blocks for row in block.rows)
    writer.writerow([*head, "compared"] if compared else head)
    for block in table.blocks:
        for row in block.rows:
            labels = _row_labels(row, "true", "false")
            line: list[object] = [block.title or "", *labels, row.kind, row.n]
            for cell in row.cells:
                iv = cell.interval
                if iv is None:
                    line += [cell_text(cell, table.digits, False), "", "", "", 0]
                else:
                    line += [repr(iv.estimate), "" if iv.low is None else repr(iv.low),
                             "" if iv.high is None else repr(iv.high),
                             str(cell.significant).lower() if cell.kind == "delta" else "", iv.n]
            writer.writerow([*line, row.note or ""] if compared else line)
    return buf.getvalue()


def to_html(table: Table) -> str:
    """An HTML ``<table class="kappa-table">`` fragment with its notes (no external assets)."""
    e = html.escape
    ncols = len(table.label_headers) + 1 + len(table.columns)
    head = "".join(f"<th>{e(h)}</th>" for h in [*table.label_headers, "n", *table.columns])
    body = []
    for block in table.blocks:
        if block.title is not None:
            body.append(f'<tr class="block"><th colspan="{ncols}">{e(block.title)}</th></tr>')
        for row in block.rows:
            tds = [f'<td class="label">{e(x)}</td>' for x in _row_labels(row, "✓", "✗")]
            tds.append(f'<td class="n">{e(row.n)}</td>')
            texts = _cell_texts(row, table, e, "<strong>{}</strong>")
            for cell, text in zip(row.cells, texts, strict=True):
                classes = ["num", *["missing"] * (cell.interval is None),
                           *["significant"] * cell.significant]
                tds.append(f'<td class="{" ".join(classes)}">{text}</td>')
            body.append(f'<tr class="{row.kind}">{"".join(tds)}</tr>')
    notes = "".join(f"<li>{e(n)}</li>" for n in table.notes)
    return (f'<table class="kappa-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><ul class="table-notes">{notes}</ul>\n')


RENDERERS: dict[str, Callable[[Table], str]] = {
    "markdown": to_markdown, "latex": to_latex, "csv": to_csv, "html": to_html}


def _renderer(renderers: Mapping[str, Callable[[T], str]], fmt: str,
              location: str) -> Callable[[T], str]:
    if (renderer := renderers.get(fmt)) is None:
        raise unknown_name("table format", fmt, renderers, location)
    return renderer


def render(table: Table, fmt: str = "markdown") -> str:
    """The table in format ``fmt`` (one of :data:`RENDERERS`)."""
    return _renderer(RENDERERS, fmt, "--format")(table)


# --- the advantage table ------------------------------------------------------------------
# Numbers are rounded half away from zero (0.625 -> 0.63, 166.67 -> 167), as in the paper's
# Table 1, rather than Python's round-half-to-even.

# Column groups: (title, advantage construction).
ADVANTAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Reward Budget", "reward_budget"), ("DrGRPO", "drgrpo"), ("GRPO", "grpo"))


def round_half_up(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, halves rounded away from zero, at any magnitude
    (κ = 1/β grows without bound as β shrinks); ``inf``/``nan`` as such."""
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


def _advantage_cells(row: AdvantageRow) -> list[str]:
    out = [f"{row.k}/{row.group_size}"]
    for cell in (row.by_construction(name) for _, name in ADVANTAGE_COLUMNS):
        out += [round_half_up(cell.pos, 2), round_half_up(cell.neg, 2),
                round_half_up(cell.kappa, 0)]
    return out


def advantage_markdown(rows: Sequence[AdvantageRow]) -> str:
    """A GitHub-flavoured markdown table, one column group per construction."""
    groups = " | ".join(f"{title} A+ | {title} A- | {title} κ" for title, _ in ADVANTAGE_COLUMNS)
    rule = "|" + "---|" * (1 + 3 * len(ADVANTAGE_COLUMNS))
    body = [md_row(_advantage_cells(row)) for row in rows]
    return "\n".join([f"| k/G | {groups} |", rule, *body]) + "\n"


def advantage_csv(rows: Sequence[AdvantageRow]) -> str:
    """CSV with full precision (no rounding): k, G, then pos/neg/kappa per construction."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["k", "G"] + [f"{name}_{part}" for _, name in ADVANTAGE_COLUMNS
                                  for part in ("pos", "neg", "kappa")])
    for row in rows:
        cells = [row.by_construction(name) for _, name in ADVANTAGE_COLUMNS]
        writer.writerow([row.k, row.group_size,
                         *(repr(v) for c in cells for v in (c.pos, c.neg, c.kappa))])
    return buffer.getvalue()


def advantage_latex(rows: Sequence[AdvantageRow]) -> str:
    """A booktabs ``tabular`` in the layout of the paper's Table 1."""
    n = len(ADVANTAGE_COLUMNS)
    titles = " & ".join(rf"\multicolumn{{3}}{{c}}{{{title}}}" for title, _ in ADVANTAGE_COLUMNS)
    rules = " ".join(rf"\cmidrule(lr){{{2 + 3 * i}-{4 + 3 * i}}}" for i in range(n))
    lines = [r"\begin{tabular}{l" + "rrr" * n + "}", r"\toprule", f" & {titles} \\\\", rules,
             "$k/G$ & " + " & ".join(["$+$ & $-$ & $\\kappa$"] * n) + r" \\", r"\midrule"]
    for row in rows:
        cells = _advantage_cells(row)
        cells[0] = f"${cells[0]}$"
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


ADVANTAGE_RENDERERS: dict[str, Callable[[Sequence[AdvantageRow]], str]] = {
    "markdown": advantage_markdown, "csv": advantage_csv, "latex": advantage_latex}


def render_advantage_table(rows: Sequence[AdvantageRow], fmt: str = "markdown") -> str:
    """Rows of :func:`~orchestrator.algorithms.sharpness.advantage_table` in format ``fmt``."""
    return _renderer(ADVANTAGE_RENDERERS, fmt, "format")(rows)
