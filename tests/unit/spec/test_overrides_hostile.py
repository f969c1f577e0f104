"""Hostile text in command-line overrides stays text: the spec a sweep stores after its
overrides plans exactly the cells of the spec plus the overrides, whatever line breaks and
YAML indicators the overrides (or the spec's file name) carry. Before, the stored text
quoted the overrides on a comment line, which U+2028, U+2029 or NEL ended for YAML: the
rest became spec keys (an ``include:`` planned a fifth cell)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import UserInputError
from orchestrator.grid.plan import checked, plan
from orchestrator.spec.loader import read_spec

SPEC = yaml.safe_dump({
    "name": "hostile", "backend": "embedded",
    "base": {"task": "arithmetic", "max_steps": 10, "group_size": 4},
    "axes": {"baseline": ["grpo", "drgrpo"], "seed": [0, 1]},
    "resources": {"gpus": 0, "hours": 0.5}}, sort_keys=False)
#: Every character Python, YAML or a terminal may take as the end of a line.
LINE_BREAKS = ("\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
               "\u2029")
#: YAML's indicators and the pieces of an injected key (``'`` and ``\`` are left out: they
#: end or escape Hydra's quoted value, which is then refused, not planned).
PIECES = (*LINE_BREAKS, *"-?:,[]{}#&*!|>%@`\" \t", "include: [{baseline: grpo, seed: 7}]",
          "name: evil", "axes: {seed: [9]}", "---", "...", "&a ", "*a", "!!python/object ",
          "  #", "x", "0")
INJECTED = "x{}include: [{{baseline: grpo, seed: 7}}]  #"


def planned(text: str, filename: str, overrides: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The spec text ``read_spec`` makes (what a sweep stores) and the cell ids it plans."""
    reading = read_spec(text, filename, None, overrides)
    cells = plan(checked(reading), preflight=False).grid.cells
    return reading.spec.source_text, [c.cell_id for c in cells]


def assert_stored_plans_the_same(filename: str, overrides: tuple[str, ...]) -> list[str]:
    stored, cells = planned(SPEC, filename, overrides)
    # Every line of the stored text is a line of YAML: no break but \n is left in it.
    assert stored.splitlines() == stored.split("\n")[:-1], repr(stored)
    assert planned(stored, "stored.yaml")[1] == cells, repr(stored)
    return cells


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[repr(b) for b in LINE_BREAKS])
def test_a_line_break_in_an_override_or_file_name_adds_no_cell(brk: str) -> None:
    cells = assert_stored_plans_the_same(f"s{brk}include: [1]  #.yaml",
                                         (f"++description='{INJECTED.format(brk)}'",))
    assert len(cells) == 4
    with_label = assert_stored_plans_the_same("s.yaml", (
        "+labels=[note]", f"+axes.note=['{INJECTED.format(brk)}', plain]"))
    assert len(with_label) == 8  # the hostile text is a label value, kept exactly


def by_hand(payload: str) -> list[str] | None:
    """The cells of the same edit made to the spec's data (``None``: refused)."""
    data = yaml.safe_load(SPEC)
    data.update(description=payload, labels=["note"])
    data["axes"]["note"] = [payload, f"plain{payload}"]
    try:
        return planned(yaml.safe_dump(data, sort_keys=False), "by-hand.yaml")[1]
    except UserInputError:
        return None


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
       name=st.lists(st.sampled_from(PIECES), max_size=4).map("".join))
def test_the_stored_spec_plans_the_cells_of_the_spec_and_its_overrides(payload: str,
                                                                         name: str) -> None:
    overrides = (f"++description='{payload}'", "+labels=[note]",
                 f"+axes.note=['{payload}', 'plain{payload}']")
    try:
        cells = assert_stored_plans_the_same(f"s{name}.yaml", overrides)
    except UserInputError:
        cells = None
    assert cells == by_hand(payload)  # accepted and refused alike, the same cells
