"""Seeds on demand: the sequential rule that decides when a comparison has seeds enough.

A comparison is a paired difference of one metric (treatment − base, paired by seed),
looked at each time one more pair has finished, from ``start`` pairs to ``max``: look
``k`` sees ``n_k = start + k − 1`` pairs and gets the two-sided paired Student-t interval
at level ``1 − α_k``. The comparison is

* **positive** when the interval lies above 0, **negative** when below 0;
* **within margin** when it lies inside ``(−margin, +margin)`` (``margin > 0``);
* else **undecided**: one more seed, or, at ``n_k = max``, **undecided at max**.

The first look that decides is final: seeds added for other comparisons never change it.

The levels ``α_k = A(n_k / max) − A(n_{k−1} / max)`` (``A(n_0 / max) = 0``) are the
increments of a Lan–DeMets α-spending function with ``A(1) = α`` (*Biometrika* 70, 1983):
O'Brien–Fleming type ``A(t) = 2 − 2Φ(z_{1−α/2} / √t)`` (default: little α early) or
Pocock type ``A(t) = α·ln(1 + (e − 1)·t)``.

The guarantee: if the paired differences are independent normal draws with mean 0, each
look's interval excludes 0 with probability exactly ``α_k``, so by Bonferroni the
comparison is ever decided positive or negative with probability at most ``Σ α_k = α``;
likewise a true difference of at least ``margin`` is called within margin with
probability at most ``α / 2``. The bound is conservative (simulated: 2.8% at ``α = 0.05``,
``start = 3, max = 8``); the reported interval is the deciding look's, wider than a
fixed-``n`` 95% one. Skewed differences are not covered.

The functions are pure: the scheduler and the offline replay feed them the finished
seeds' differences in seed order, so a restarted sweep recomputes the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Literal

Decision = Literal["positive", "negative", "within margin", "undecided", "undecided at max"]
DECIDED: frozenset[Decision] = frozenset({"positive", "negative", "within margin"})


def _obrien_fleming(t: float, alpha: float) -> float:
    from scipy.special import ndtr, ndtri

    return float(2.0 - 2.0 * ndtr(ndtri(1.0 - alpha / 2.0) / math.sqrt(t)))


def _pocock(t: float, alpha: float) -> float:
    return alpha * math.log(1.0 + (math.e - 1.0) * t)


SPENDING: dict[str, Callable[[float, float], float]] = {
    "obrien-fleming": _obrien_fleming, "pocock": _pocock}


@dataclass(frozen=True)
class SeedRule:
    """``start`` to ``max`` seeds per comparison, overall error ``alpha``, a ``margin`` (in
    the metric's units; 0: never decide "within margin") and the spending function."""

    start: int
    max: int
    alpha: float = 0.05
    margin: float = 0.0
    spending: str = "obrien-fleming"

    def __post_init__(self) -> None:
        if not 2 <= self.start <= self.max:
            raise ValueError(f"need 2 <= start <= max, got start={self.start}, max={self.max}")
        if not 0.0 < self.alpha < 1.0 or self.margin < 0.0 or self.spending not in SPENDING:
            raise ValueError(f"bad seed rule {self}")

    def levels(self) -> tuple[float, ...]:
        """``α_k`` of each look, from ``start`` pairs to ``max`` (they sum to ``alpha``)."""
        return _levels(self)


@cache
def _levels(rule: SeedRule) -> tuple[float, ...]:
    spend = SPENDING[rule.spending]
    spent = [0.0, *(spend(n / rule.max, rule.alpha) for n in range(rule.start, rule.max + 1))]
    return tuple(b - a for a, b in pairwise(spent))


@dataclass(frozen=True)
class Look:
    """One look at a comparison: its ``n`` pairs, mean difference, the ``1 − level_alpha``
    interval and the decision it gives."""

    n: int
    estimate: float
    low: float
    high: float
    level_alpha: float
    decision: Decision


def look(diffs: Sequence[float], rule: SeedRule) -> Look:
    """The look at ``len(diffs)`` pairs (``start ≤ n ≤ max``; ``ValueError`` otherwise)."""
    from scipy.special import stdtrit

    n = len(diffs)
    if not rule.start <= n <= rule.max:
        raise ValueError(f"a look needs {rule.start}..{rule.max} pairs, got {n}")
    alpha_k = rule.levels()[n - rule.start]
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = float(stdtrit(n - 1, 1.0 - alpha_k / 2.0)) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    decision: Decision
    if low > 0.0:
        decision = "positive"
    elif high < 0.0:
        decision = "negative"
    elif rule.margin > 0.0 and -rule.margin < low and high < rule.margin:
        decision = "within margin"
    else:
        decision = "undecided at max" if n == rule.max else "undecided"
    return Look(n, mean, low, high, alpha_k, decision)


def decide(diffs: Sequence[float], rule: SeedRule) -> Look | None:
    """The comparison as its looks stand over ``diffs`` (in seed order): the first look
    that decided, else the last look made; ``None`` before ``start`` pairs. Pairs past the
    deciding look (seeds run for other comparisons) are ignored."""
    last = None
    for n in range(rule.start, min(len(diffs), rule.max) + 1):
        last = look(diffs[:n], rule)
        if last.decision in DECIDED:
            return last
    return last


def wants_seed(diffs: Sequence[float], rule: SeedRule) -> bool:
    """Whether the comparison needs another seed: fewer than ``start`` pairs, or every look
    so far undecided below ``max``."""
    current = decide(diffs, rule)
    return current is None or current.decision == "undecided"
