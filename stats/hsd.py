"""Randomized Tukey HSD (Sakai's procedure), all pairs from one set of B permutation iterations.

Each iteration permutes every query's scores across the systems and records the range (max - min) of
the system means. The two-sided p-value of a pair is the fraction of iterations whose range reaches the
observed absolute difference of the pair's means.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from stats.errors import StatsInputError

Direction = Literal["greater", "less", "two-sided"]

# Precomputed permutation tables are used up to this many systems (6! = 720 rows per query).
_MAX_SYSTEMS_FOR_TABLE = 6
_INDEX_BYTES_PER_CHUNK = 128 * 2**20
_QUERY_BLOCK = 256


@dataclass(frozen=True)
class HSDResult:
    """Pairwise results over k systems; matrices are indexed [a, b]."""

    means: np.ndarray  # (k,)
    diffs: np.ndarray  # (k, k): means[a] - means[b]
    p_values: np.ndarray  # (k, k): two-sided, symmetric, 1 on the diagonal
    n_queries: int
    b: int


def randomized_tukey_hsd(scores: np.ndarray, b: int, rng: np.random.Generator) -> HSDResult:
    """Two-sided randomized Tukey HSD on a complete (n_queries, k_systems) score matrix."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise StatsInputError(f"HSD needs an (n_queries, k_systems) matrix, got shape {scores.shape}")
    return randomized_tukey_hsd_many(scores[:, :, None], b, rng)[0]


def randomized_tukey_hsd_many(scores: np.ndarray, b: int, rng: np.random.Generator) -> tuple[HSDResult, ...]:
    """HSD for m metrics measured on the same queries: (n_queries, k_systems, m_metrics) -> m results.

    One set of B permutations serves every metric (a query's scores move together across its metrics);
    each metric's test is the same randomization test as when run alone. (It saves random numbers, but
    for 6 systems one call per metric is faster: the narrow gathered rows stay in cache.)
    """
    scores = _checked_cube(scores, b)
    n = scores.shape[0]
    # A query whose systems all tie adds the same to every system sum under any permutation, so it cannot
    # change a range: leaving it out is exact (and common with ceiling effects, e.g. QR at 1.0).
    varying = np.ptp(scores, axis=1).max(axis=1) > 0.0
    ranges = np.sort(permutation_sum_ranges(scores[varying], b, rng), axis=0)
    # Permuted sums are added in another order than the observed ones; the tolerance keeps an iteration
    # that reproduces an observed difference from being lost to rounding.
    tolerance = 1e-10 * max(1.0, float(n))
    results = []
    for metric in range(scores.shape[2]):
        sums = scores[:, :, metric].sum(axis=0)
        abs_diffs = np.abs(sums[:, None] - sums[None, :])
        reached = b - np.searchsorted(ranges[:, metric], abs_diffs - tolerance, side="left")
        p_values = reached / b
        np.fill_diagonal(p_values, 1.0)
        means = sums / n
        results.append(HSDResult(means, means[:, None] - means[None, :], p_values, n, b))
    return tuple(results)


def smallest_p_value(n_queries: int, n_systems: int) -> float:
    """The smallest p-value the HSD can give on n_queries complete queries of n_systems: (k!)^(1 - n).

    Of the (k!)^n within-query permutations, the k! that apply one relabelling to every query reproduce
    the observed range, so no pair's p falls below their share (a randomized p estimates it)."""
    if n_systems < 2 or n_queries < 1:
        return 1.0
    return float(math.factorial(n_systems) ** (1 - n_queries))


def questions_to_separate(n_systems: int, alpha: float) -> int:
    """The fewest complete queries on which the HSD can find a pair of n_systems (>= 2) significant."""
    n = 1
    while not smallest_p_value(n, n_systems) < alpha:
        n += 1
    return n


def one_sided_p_value(two_sided_p: float, diff: float, direction: Direction) -> float:
    """p-value for a stated direction ("greater": mean_a > mean_b), from the two-sided HSD p-value.

    As in the CCRS listing: half the two-sided p when the observed difference has the stated sign and 0.5
    when it is (numerically) zero. When the sign contradicts the direction the listing keeps the two-sided
    p; here it is 1 - p/2, so a difference in the wrong direction can never support the hypothesis.
    """
    if direction == "two-sided":
        return float(two_sided_p)
    if abs(diff) < 1e-9:
        return 0.5
    agrees = diff > 0 if direction == "greater" else diff < 0
    return float(two_sided_p / 2.0 if agrees else 1.0 - two_sided_p / 2.0)


def permutation_sum_ranges(scores: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """(b, m) range (max - min over systems) of the per-system score sums for b within-query permutations
    of an (n_queries, k_systems, m_metrics) cube."""
    n, k, m = scores.shape
    ranges = np.zeros((b, m))
    if n == 0:
        return ranges
    chunk = max(1, min(b, _INDEX_BYTES_PER_CHUNK // (2 * max(n, 1))))
    for start in range(0, b, chunk):
        stop = min(b, start + chunk)
        if k <= _MAX_SYSTEMS_FOR_TABLE:
            sums = _permuted_sums_by_table(scores, stop - start, rng)
        else:
            sums = _permuted_sums_by_shuffle(scores, stop - start, rng)
        ranges[start:stop] = sums.max(axis=1) - sums.min(axis=1)
    return ranges


def _permuted_sums_by_table(scores: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """(b, k, m) sums of permuted scores, as sums of rows gathered from each query's table of all k!
    orderings of its (k, m) scores.

    One small random integer per (query, iteration) picks the ordering; the gather from a table that
    stays in cache is much cheaper than generating and applying a shuffle per query and iteration.
    """
    n, k, m = scores.shape
    orderings = np.array(list(itertools.permutations(range(k))), dtype=np.intp)
    picks = rng.integers(0, len(orderings), size=(n, b), dtype=np.int16)
    sums = np.zeros((b, k * m))
    gathered = np.empty((b, k * m))
    for block_start in range(0, n, _QUERY_BLOCK):
        block = scores[block_start : block_start + _QUERY_BLOCK]
        tables = np.take(block, orderings, axis=1).reshape(len(block), len(orderings), k * m)
        for offset, table in enumerate(tables):
            np.take(table, picks[block_start + offset], axis=0, out=gathered)
            sums += gathered
    return sums.reshape(b, k, m)


def _permuted_sums_by_shuffle(scores: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """Fallback for many systems (k! too large for a table): b random orderings drawn per query."""
    _, k, m = scores.shape
    sums = np.zeros((b, k, m))
    for row in scores:
        orderings = np.argsort(rng.random((b, k)), axis=1)
        sums += row[orderings]
    return sums


def _checked_cube(scores: np.ndarray, b: int) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 3 or scores.shape[1] < 2 or scores.shape[2] < 1:
        raise StatsInputError(
            f"HSD needs (n_queries, k_systems >= 2[, m_metrics]) scores, got shape {scores.shape}"
        )
    if scores.shape[0] < 1:
        raise StatsInputError("HSD needs at least one query scored by every system")
    if not np.isfinite(scores).all():
        raise StatsInputError("HSD needs complete data: the scores hold NaN or infinite values")
    if b < 1:
        raise StatsInputError(f"the number of iterations b must be at least 1, got {b}")
    return scores
