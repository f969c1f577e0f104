"""Provenance and replications of the findings page's studies.

Every section of docs/findings.md says which code and machine made its numbers (``kappa
status --json``'s ``made_by``: numerics, base model, CPU kernel set, kappa commit). A study
may also have *replicas*: the same spec run again under something that should not matter
(the other CPU kernel set, seeds no run has used). A replica is judged by the study's own
writer, so by the same rule, and the page says per finding whether the verdict holds.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import findings_studies as fs

HIDDEN = "<!-- replicas |"


@dataclass(frozen=True)
class Replica:
    """The study's spec run again as sweep ``sweep`` with ``overrides`` and ``env`` (added
    to the environment); ``label`` says what changed."""

    label: str
    sweep: str
    overrides: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def made_by(kappa: Callable[[list[str]], str], sweep: str) -> str:
    """The one line on what made the sweep's numbers, or "not recorded"."""
    status = json.loads(kappa(["status", sweep, "--json"]))
    return str(status.get("made_by") or "not recorded")


def summary_rows(section: str) -> dict[str, list[str]]:
    """The section's hidden summary rows by finding: [finding, claim, source, result,
    verdict, why, command]."""
    rows = [line.removeprefix(fs.SUMMARY).removesuffix("-->").strip()
            for line in section.splitlines() if line.startswith(fs.SUMMARY)]
    return {parts[0]: parts for parts in (
        [p.strip() for p in row.split(" | ")] for row in rows)}


def compare(original: dict[str, list[str]], again: dict[str, list[str]]) -> dict[str, str]:
    """Per finding: ``holds (reproduces)`` or ``flips: reproduces → inconclusive``, with
    the replica's estimate."""
    out = {}
    for finding, row in original.items():
        if finding not in again:
            continue
        before, after = row[4].strip("*"), again[finding][4].strip("*")
        said = f"holds ({after})" if before == after else f"flips: {before} → {after}"
        out[finding] = f"{said}, {again[finding][3]}"
    return out


@contextmanager
def figures_aside() -> Iterator[None]:
    """A replica's writer draws its figures where the page never looks, then they go."""
    saved = fs.FIGURES
    fs.FIGURES = saved / ".replica"
    try:
        yield
    finally:
        shutil.rmtree(fs.FIGURES, ignore_errors=True)
        fs.FIGURES = saved


def block(label: str, sweep: str, made: str, verdicts: dict[str, str]) -> str:
    """The section's lines for one replica, plus its hidden row for the summary table."""
    lines = [f"- **Replication, {label}** (`{sweep}`, made by: {made}): "
             + "; ".join(f"finding {k} {v}" for k, v in verdicts.items()) + "."]
    lines += [f"{HIDDEN} {k} | {label}: {v} -->" for k, v in verdicts.items()]
    return "\n".join(lines)


def replications(sections: list[str]) -> dict[str, str]:
    """Per finding, every replica's line joined (the summary table's last column)."""
    found: dict[str, list[str]] = {}
    for part in sections:
        for line in part.splitlines():
            if line.startswith(HIDDEN):
                finding, text = line.removeprefix(HIDDEN).removesuffix("-->").split(" | ", 1)
                found.setdefault(finding.strip(), []).append(text.strip())
    return {k: "; ".join(v) for k, v in found.items()}
