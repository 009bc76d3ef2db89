"""Randomized Tukey HSD for independent groups: variants whose scores share no question.

The counterpart of stats/hsd.py's within-question shuffle: each of B iterations permutes the pooled scores
of all groups across the groups (sizes kept) and records the range (max - min) of the group means. The
two-sided p-value of a pair is the share of iterations whose range reaches the observed |mean_i - mean_j|,
the observed labelling counted as one: p = (1 + #{range* >= |diff|}) / (1 + B), never 0. One maximum
statistic for every pair controls the family-wise error over all pairs (Westfall & Young 1993, the
randomization form of Tukey's HSD). With unequal sizes the range is dominated by the small groups' means,
which vary most; it stays a valid test, with less power for the large groups' pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats.errors import StatsInputError
from stats.hsd import HSDResult
from stats.unpaired import checked_group, permuted_rows


@dataclass(frozen=True)
class UnpairedHSDResult(HSDResult):
    """The paired HSD's result (so a verdict reads either); n_queries counts all groups' scores."""

    sizes: np.ndarray  # (k,): scores per group


def unpaired_tukey_hsd(groups: Sequence[np.ndarray], b: int, rng: np.random.Generator) -> UnpairedHSDResult:
    """Two-sided randomized Tukey HSD of k >= 2 independent groups of at least 2 scores each."""
    checked = _checked_groups(groups, b)
    pooled = np.concatenate(checked)
    sizes = np.array([group.size for group in checked])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranges = np.sort(np.concatenate([_mean_ranges(rows, starts, sizes)
                                     for rows in permuted_rows(pooled, b, rng)]))
    means = np.array([group.mean() for group in checked])
    diffs = means[:, None] - means[None, :]
    tolerance = 1e-10 * max(1.0, float(np.abs(pooled).max()))
    reached = b - np.searchsorted(ranges, np.abs(diffs) - tolerance, side="left")
    p_values = (1.0 + reached) / (1.0 + b)
    np.fill_diagonal(p_values, 1.0)
    return UnpairedHSDResult(means, diffs, p_values, int(pooled.size), b, sizes)


def _mean_ranges(rows: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    means = np.add.reduceat(rows, starts, axis=1) / sizes
    return means.max(axis=1) - means.min(axis=1)


def _checked_groups(groups: Sequence[np.ndarray], b: int) -> list[np.ndarray]:
    if len(groups) < 2:
        raise StatsInputError(f"an unpaired HSD needs at least 2 groups, got {len(groups)}")
    if b < 1:
        raise StatsInputError(f"the number of iterations b must be at least 1, got {b}")
    return [checked_group(group, str(index)) for index, group in enumerate(groups)]
