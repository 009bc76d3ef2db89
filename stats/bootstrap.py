"""Percentile bootstrap confidence intervals of column means, all columns from one set of resamples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.errors import StatsInputError

_COUNT_BYTES_PER_CHUNK = 64 * 2**20


@dataclass(frozen=True)
class BootstrapResult:
    means: np.ndarray  # (c,) observed column means
    low: np.ndarray  # (c,)
    high: np.ndarray  # (c,)
    confidence: float
    b: int


def bootstrap_mean_ci(
    scores: np.ndarray, b: int, rng: np.random.Generator, confidence: float = 0.95
) -> BootstrapResult:
    """Percentile CI of each column's mean from b resamples of the rows (queries) with replacement.

    Every resample is a vector of row counts (bincount of n random row indices); the resampled means of
    all columns are then one matrix product counts @ scores / n.
    """
    scores = _checked_matrix(scores, b, confidence)
    boot_means = bootstrap_means(scores, b, rng)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(boot_means, [tail, 100.0 - tail], axis=0)
    return BootstrapResult(scores.mean(axis=0), low, high, confidence, b)


def bootstrap_means(scores: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """(b, c) column means of b row resamples."""
    n = scores.shape[0]
    chunk = max(1, min(b, _COUNT_BYTES_PER_CHUNK // (8 * n)))
    means = np.empty((b, scores.shape[1]))
    for start in range(0, b, chunk):
        size = min(b, start + chunk) - start
        # size * n stays below 2**31 by the chunk size, so int32 indices (cheaper to draw) suffice.
        rows = rng.integers(0, n, size=(size, n), dtype=np.int32)
        rows += (np.arange(size, dtype=np.int32) * n)[:, None]
        counts = np.bincount(rows.ravel(), minlength=size * n).reshape(size, n)
        # float64 counts: numpy multiplies int64 @ float64 without BLAS, several times slower.
        means[start : start + size] = (counts.astype(np.float64) @ scores) / n
    return means


def _checked_matrix(scores: np.ndarray, b: int, confidence: float) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if scores.ndim != 2 or scores.shape[0] < 1:
        raise StatsInputError(f"bootstrap needs an (n >= 1, c) matrix, got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise StatsInputError("bootstrap needs complete data: the score matrix holds NaN or infinite values")
    if b < 1:
        raise StatsInputError(f"the number of resamples b must be at least 1, got {b}")
    if not 0.0 < confidence < 1.0:
        raise StatsInputError(f"confidence must lie in (0, 1), got {confidence}")
    return scores
