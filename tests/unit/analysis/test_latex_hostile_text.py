"""LaTeX output shows a label, never runs it: an axis value, a study's parameter name or a
block title is free text, and ``clip_ratio`` alone used not to compile in a best-trials or
convergence table (pandas' writer escaped nothing). Every table kappa writes as LaTeX goes
through one escape; these tests check what reaches the file, seeded and printed."""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from orchestrator.analysis.stats import Interval
from orchestrator.analysis.tables.model import Table, TableBlock, TableCell, TableRow
from orchestrator.analysis.tables.render import frame_table, render

PIECES = ["clip_ratio", "50%", "a&b", "#1", "$x$", "{}", "\\input{/etc/passwd}", "~", "^",
          "x\n\ny", "\x1b[31m", "\x07", "\u202e", "<>", "|", "[2pt]", "ünï", "§‡±×"]
# What a TeX reader may see: escapes kappa writes, then plain text without a special.
_ESCAPES = re.compile(r"\\(textbackslash|textasciitilde|textasciicircum|textless|textgreater|"
                      r"textbar|S|ddag)\{\}|\\[&%$#_{}]|\$(\\pm|\^\\dagger|\\times|\\geq|-|"
                      r"\\checkmark)\$|^\{\}|^\$n\$$")


def _hostile(rng: random.Random) -> str:
    return "".join(rng.sample(PIECES, 3))


def _assert_inert(row: str, columns: int) -> None:
    """One tabular row: ``columns`` cells, ended by ``\\\\``, nothing TeX would act on."""
    assert row.endswith(r" \\"), row
    cells = row.removesuffix(r" \\").split(" & ")
    assert len(cells) == columns, row
    for cell in cells:
        if cell.startswith(r"\textbf{"):
            cell = cell.removeprefix(r"\textbf{").removesuffix("}")
        rest = _ESCAPES.sub("", cell)
        assert not set(rest) & set("\\&%$#_{}~^"), (cell, rest)
        assert rest.isprintable(), cell


@pytest.mark.parametrize("seed", range(6))
def test_a_plain_frame_as_latex_escapes_every_header_and_value(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed={seed}")
    frame = pd.DataFrame({_hostile(rng): [_hostile(rng), _hostile(rng)],
                          "value": [0.5, float("nan")], "trials": [3, 4]})
    tex = frame_table(frame, "latex", lambda _c, v: "—" if v != v else str(v))
    lines = tex.splitlines()
    assert lines[0] == r"\begin{tabular}{lrr}" and lines[-1] == r"\end{tabular}"
    assert "" not in lines  # a blank line would end the tabular's paragraph
    for line in lines[2:3] + lines[4:-2]:
        _assert_inert(line, 3)


@pytest.mark.parametrize("seed", range(6))
def test_an_ablation_table_as_latex_escapes_labels_titles_and_notes(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed={seed}")
    cell = TableCell(Interval(estimate=0.5, low=0.4, high=0.6, n=3), "absolute", bold=True)
    rows = (TableRow((_hostile(rng), True), "absolute", "3", (cell,)),
            TableRow((_hostile(rng), False), "delta", "3", (cell,)))
    table = Table((_hostile(rng), "RB"), (_hostile(rng),),
                  (TableBlock(_hostile(rng), rows),), (_hostile(rng),))
    tex = render(table, "latex")
    lines = tex.splitlines()
    assert "" not in lines
    _assert_inert(lines[2], 4)  # the header
    body = [x for x in lines if x.endswith(r" \\") and not x.startswith(r"\multicolumn")]
    assert len(body) == 3
    for line in body[1:]:
        _assert_inert(line, 4)
    assert r"$\checkmark$ & 3" in tex and r"$\times$ & 3" in tex
    title, note = (x for x in lines if x.startswith(r"\multicolumn"))
    title = title.removeprefix(r"\multicolumn{4}{l}{\textit{").removesuffix(r"}} \\")
    note = note.removeprefix(r"\multicolumn{4}{l}{\footnotesize ").removesuffix(r"} \\")
    for text in (title, note):
        _assert_inert(text + r" \\", 1)
