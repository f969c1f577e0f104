"""Statistics for ablation tables: seed means with t-intervals, paired bootstrap deltas.

Both return an :class:`Interval`. With fewer than two observations there is no interval
(``low``/``high`` are ``None``) and a table shows the bare estimate with its ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 10_000
DEFAULT_BOOTSTRAP_SEED = 0
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


def _intervals(diffs: np.ndarray, confidence: float, n_resamples: int,
               seed: int) -> list[Interval]:
    """Per column of complete paired differences ``(pairs, columns)``: the mean and, from two
    pairs on, its percentile bootstrap interval. Columns share one draw of resampled pairs,
    counted per pair so that the resamples' means are one matrix product, not a 3-d gather."""
    n = diffs.shape[0]
    means = diffs.mean(axis=0)
    if n < 2:
        return [Interval(float(m), None, None, n) for m in means]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    flat = (idx + (np.arange(n_resamples) * n)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_resamples * n).reshape(n_resamples, n)
    alpha = (1.0 - confidence) / 2.0
    lows, highs = np.quantile(counts @ diffs / n, [alpha, 1.0 - alpha], axis=0)
    return [Interval(float(m), float(lo), float(hi), n)
            for m, lo, hi in zip(means, lows, highs, strict=True)]


def paired_bootstrap_delta(base: Values, treatment: Values, *,
                           confidence: float = DEFAULT_CONFIDENCE,
                           n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int = DEFAULT_BOOTSTRAP_SEED) -> Interval:
    """Mean of ``treatment - base`` over paired observations, with a percentile bootstrap CI.
    ``base[i]`` and ``treatment[i]`` belong to the same pairing unit (the same seed). Pairs where
    either side is not finite are dropped. Resampling is over pairs, so the interval reflects
    seed-to-seed variation of the *difference*; it is deterministic for a given ``seed``."""
    b = np.asarray(base, dtype=float)
    t = np.asarray(treatment, dtype=float)
    if b.shape != t.shape or b.ndim != 1:
        raise ValueError(f"paired samples must be 1-d and of equal length, got {b.shape} and "
                         f"{t.shape}")
    keep = np.isfinite(b) & np.isfinite(t)
    if not keep.any():
        raise ValueError("paired_bootstrap_delta of no complete pairs")
    return _intervals((t[keep] - b[keep])[:, None], confidence, n_resamples, seed)[0]


def paired_bootstrap_columns(base: np.ndarray, treatment: np.ndarray, *,
                             confidence: float = DEFAULT_CONFIDENCE,
                             n_resamples: int = DEFAULT_RESAMPLES,
                             seed: int = DEFAULT_BOOTSTRAP_SEED) -> list[Interval | None]:
    """:func:`paired_bootstrap_delta` for every column of ``(pairs, columns)`` arrays at once.
    Columns share one draw of resampled pairs, so each column's result equals the single-column call
    with the same ``seed``; a column with incomplete pairs is computed over its complete ones.
    ``None`` for a column without a complete pair."""
    b = np.asarray(base, dtype=float)
    t = np.asarray(treatment, dtype=float)
    if b.shape != t.shape or b.ndim != 2:
        raise ValueError(f"expected two (pairs, columns) arrays, got {b.shape} and {t.shape}")
    complete = np.isfinite(b) & np.isfinite(t)
    full = complete.all(axis=0)
    out: list[Interval | None] = [None] * b.shape[1]
    if full.any():
        shared = _intervals(t[:, full] - b[:, full], confidence, n_resamples, seed)
        for col, interval in zip(np.flatnonzero(full).tolist(), shared, strict=True):
            out[col] = interval
    for j in np.flatnonzero(~full & complete.any(axis=0)).tolist():
        out[j] = paired_bootstrap_delta(b[:, j], t[:, j], confidence=confidence,
                                        n_resamples=n_resamples, seed=seed)
    return out
