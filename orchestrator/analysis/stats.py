"""Statistics for ablation tables: Student-t intervals over seeds.

A mean over seeds and a paired delta (the mean of per-seed differences, treatment − base)
get the same interval: :func:`t_interval`, with ``n − 1`` degrees of freedom. At the seed
counts people run (2–10) its coverage is nominal for normal differences and conservative
for heavier tails; a percentile bootstrap over 3 pairs is the pairs' range and covers about
75% (docs/algorithms.md#intervals). With fewer than two observations there is no interval
(``low``/``high`` are ``None``) and a table shows the bare estimate with its ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_CONFIDENCE = 0.95
Values = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class Interval:
    """An estimate with its confidence interval, computed from ``n`` observations."""

    estimate: float
    low: float | None
    high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (the ``±`` of a symmetric interval)."""
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2.0

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies strictly on one side of zero (a "significant" delta)."""
        if self.low is None or self.high is None:
            return False
        return self.low > 0.0 or self.high < 0.0


def t_interval(values: Values, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Mean of ``values`` with a two-sided Student-t confidence interval; non-finite values
    are ignored, ``n == 1`` has no interval, ``n == 0`` raises ``ValueError``."""
    # scipy.special is a fraction of scipy.stats' import time and has the t quantile.
    from scipy.special import stdtrit

    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n == 0:
        raise ValueError("t_interval of no finite values")
    mean = float(arr.mean())
    if n < 2:
        return Interval(mean, None, None, n)
    sem = float(arr.std(ddof=1)) / math.sqrt(n)
    half = float(stdtrit(n - 1, 0.5 + confidence / 2.0)) * sem
    return Interval(mean, mean - half, mean + half, n)


def fixed_groups_interval(diffs: Mapping[str, Sequence[float]],
                          confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Interval of the average over fixed groups (e.g. the baselines of a table) of per-group
    mean differences, the seeds being the replicates: the variance is pooled within groups.

    With groups ``g`` of ``n_g`` replicates, the estimate is ``mean_g(mean(d_g))`` and its
    variance ``sum_g s²/n_g / G²`` with ``s²`` pooled over ``sum(n_g − 1)`` degrees of
    freedom; ``n`` is the number of differences. No interval without a degree of freedom;
    a group with no replicate is a ``ValueError`` (the caller decides what is missing).
    """
    from scipy.special import stdtrit

    groups = {k: np.asarray(v, dtype=float) for k, v in diffs.items()}
    if not groups or any(v.size == 0 for v in groups.values()):
        raise ValueError("every group needs at least one difference")
    estimate = float(np.mean([v.mean() for v in groups.values()]))
    n = sum(v.size for v in groups.values())
    dof = n - len(groups)
    if dof < 1:
        return Interval(estimate, None, None, n)
    pooled = sum(float(((v - v.mean()) ** 2).sum()) for v in groups.values()) / dof
    se = math.sqrt(sum(pooled / v.size for v in groups.values())) / len(groups)
    half = float(stdtrit(dof, 0.5 + confidence / 2.0)) * se
    return Interval(estimate, estimate - half, estimate + half, n)
