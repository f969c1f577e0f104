"""The verdict rules of docs/findings.md, fixed before the final studies ran.

Each rule takes per-cell numbers that ``kappa export`` / ``kappa convergence`` / the run
folders' curves gave, and returns a :class:`Verdict`: the estimate with its 95% interval,
``n``, and one of "reproduces", "contradicts", "inconclusive" (or "not tested" when a
precondition failed). Pure functions on plain data, so tests can feed them any numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.analysis.stats import Interval, t_interval
from orchestrator.analysis.verdict import (
    CONTRADICTS,
    INCONCLUSIVE,
    REPRODUCES,
    directional_verdict,
)

NOT_TESTED = "not tested"
_SIDE = {REPRODUCES: "the interval lies above 0", CONTRADICTS: "the interval lies below 0",
         INCONCLUSIVE: "the interval includes 0"}
# "No lasting gain" / "not better" claims: a gain under this many points is no gain.
EQUIVALENCE_MARGIN = 0.02


@dataclass(frozen=True)
class Verdict:
    """A finding's estimate, interval and verdict, with the one-sentence reason."""

    interval: Interval
    verdict: str
    why: str

    def cell(self, scale: float = 100.0, unit: str = "", digits: int = 2) -> str:
        """``+1.23 [−0.40, +2.86] (n=18)`` in ``scale`` units, ``digits`` decimals."""
        iv = self.interval
        if iv.n == 0:
            return "no complete pair (n=0)"
        if iv.low is None or iv.high is None:
            return f"{iv.estimate * scale:+.{digits}f}{unit} (n={iv.n}, no interval)"
        return (f"{iv.estimate * scale:+.{digits}f}{unit} "
                f"[{iv.low * scale:+.{digits}f}, {iv.high * scale:+.{digits}f}] (n={iv.n})")


def directional(interval: Interval, claim: str) -> Verdict:
    """Claim "the difference is above 0": reproduces when the interval is above 0,
    contradicts when below, inconclusive otherwise (``kappa demo`` applies the same rule)."""
    verdict = directional_verdict(interval)
    return Verdict(interval, verdict, f"{claim}: {_SIDE[verdict]}")


def no_gain(interval: Interval, claim: str, margin: float = EQUIVALENCE_MARGIN) -> Verdict:
    """Claim "no gain": reproduces when the interval's upper end is under ``margin``,
    contradicts when its lower end is above 0, inconclusive otherwise."""
    points = f"{margin * 100:g} points"
    if interval.high is not None and interval.high < margin:
        return Verdict(interval, REPRODUCES,
                       f"{claim}: any gain is under {points} (interval's upper end)")
    if interval.low is not None and interval.low > 0:
        return Verdict(interval, CONTRADICTS, f"{claim}: the interval lies above 0 — a gain")
    return Verdict(interval, INCONCLUSIVE,
                   f"{claim}: the interval reaches past +{points} and includes 0")


def paired(after: Mapping[object, float], before: Mapping[object, float]) -> list[float]:
    """``after[k] − before[k]`` for every key both have (a run that failed has no pair)."""
    return [after[k] - before[k] for k in sorted(set(after) & set(before), key=repr)
            if math.isfinite(after[k]) and math.isfinite(before[k])]


def t_verdict(diffs: Sequence[float], claim: str, rule: str = "directional") -> Verdict:
    """A paired-t verdict on ``diffs`` with ``rule`` "directional" or "no_gain"."""
    if not diffs:
        return Verdict(Interval(float("nan"), None, None, 0), NOT_TESTED,
                       f"{claim}: no complete pair")
    interval = t_interval(diffs)
    return directional(interval, claim) if rule == "directional" else no_gain(interval, claim)


def all_reproduce(verdicts: Sequence[Verdict]) -> str:
    """One verdict for a finding made of several parts: reproduces only if all do,
    contradicts if any part does, else inconclusive."""
    kinds = {v.verdict for v in verdicts}
    if NOT_TESTED in kinds:
        return NOT_TESTED
    if CONTRADICTS in kinds:
        return CONTRADICTS
    return REPRODUCES if kinds == {REPRODUCES} else INCONCLUSIVE
