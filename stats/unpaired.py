"""Unpaired comparisons: two groups that share no question (two nights of production traces, two variants).

- `unpaired_randomization_test`: the two-sample permutation test of the difference in means (Good,
  Permutation Tests, 2000): the pooled scores are split at random into groups of the observed sizes.
  Randomized, p = (1 + #{extreme}) / (1 + B), the observed split counted in the null distribution so that p
  is never 0; exact, when B covers every distinct split, p = #{extreme splits} / C(n_a + n_b, n_a), as
  `scipy.stats.permutation_test(permutation_type="independent")` does.
- `unpaired_randomization_tests`: one test per cell (ragged sizes), Holm over the cells (stats/multiple.py).
- `unpaired_minimum_detectable_difference`: the Welch t-test's (Welch 1947, Satterthwaite's df).

A group needs MIN_GROUP_SIZE = 2 scores: one score has no spread, so neither the MDD nor Welch's df exist,
and one against one can never differ (both splits give the same |diff|, p = 1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, stats

from stats.errors import StatsInputError
from stats.multiple import holm_adjust
from stats.power import two_sided_t_power

Alternative = Literal["two-sided", "greater", "less"]
ALTERNATIVES: tuple[Alternative, ...] = ("two-sided", "greater", "less")
MIN_GROUP_SIZE = 2
_VALUES_PER_CHUNK = 4 * 2**20  # permuted values held at once (32 MiB of float64)
_SPLITS_PER_CHUNK = 2**16


@dataclass(frozen=True)
class UnpairedTestResult:
    n_a: int
    n_b: int
    mean_diff: float  # mean(a) - mean(b)
    p_value: float
    permutations: int  # random splits drawn, or every distinct split when exact
    exact: bool


@dataclass(frozen=True)
class UnpairedCellTests:
    """One unpaired test per cell, in the cells' order, and their Holm-adjusted p-values."""

    tests: tuple[UnpairedTestResult, ...]
    adjusted_p: np.ndarray


def unpaired_randomization_test(a: np.ndarray, b: np.ndarray, b_iterations: int, rng: np.random.Generator,
                                alternative: Alternative = "two-sided") -> UnpairedTestResult:
    """Test of H0: a and b come from one distribution, by the difference in means mean(a) - mean(b).

    "greater": a higher; "two-sided" counts |diff*| >= |diff|. When the distinct splits number at most
    b_iterations, all are enumerated (exact, rng unused), as scipy does."""
    a, b = checked_group(a, "a"), checked_group(b, "b")
    _check_iterations(b_iterations)
    _check_alternative(alternative)
    pooled = np.concatenate([a, b])
    splits = math.comb(pooled.size, a.size)
    exact = splits <= b_iterations
    sums = _exact_sums_of_first(pooled, a.size) if exact else _random_sums_of_first(pooled, a.size,
                                                                                       b_iterations, rng)
    null = _mean_differences(sums, pooled.sum(), a.size, b.size)
    observed = _mean_differences(np.array([a.sum()]), pooled.sum(), a.size, b.size)[0]
    extreme = _count_extreme(null, observed, alternative, 1e-10 * max(1.0, float(np.abs(pooled).max())))
    p_value = extreme / splits if exact else (1 + extreme) / (1 + b_iterations)
    return UnpairedTestResult(a.size, b.size, float(a.mean() - b.mean()), float(p_value),
                              splits if exact else b_iterations, exact)


def unpaired_randomization_tests(cells: Sequence[tuple[np.ndarray, np.ndarray]], b_iterations: int,
                                 rng: np.random.Generator,
                                 alternative: Alternative = "two-sided") -> UnpairedCellTests:
    """The unpaired test of every (a, b) cell, one rng drawn from in order, Holm over the cells."""
    tests = tuple(unpaired_randomization_test(a, b, b_iterations, rng, alternative) for a, b in cells)
    return UnpairedCellTests(tests, holm_adjust([test.p_value for test in tests]))


def smallest_unpaired_p_value(n_a: int, n_b: int, alternative: Alternative = "two-sided") -> float:
    """The smallest exact p-value of groups of n_a and n_b distinct scores: 1 / C(n_a + n_b, n_a), twice
    that two-sided with equal sizes (the split with the groups swapped reaches the same |diff|). A
    randomized p estimates it, and is at least 1 / (1 + B)."""
    _check_alternative(alternative)
    mirrored = alternative == "two-sided" and n_a == n_b
    return min(1.0, (2 if mirrored else 1) / math.comb(n_a + n_b, n_a))


def welch_standard_error(n_a: int, n_b: int, sd_a: float, sd_b: float) -> tuple[float, float]:
    """(standard error of mean(a) - mean(b), Welch-Satterthwaite degrees of freedom)."""
    if min(n_a, n_b) < MIN_GROUP_SIZE:
        raise StatsInputError(f"each group needs at least {MIN_GROUP_SIZE} scores, got {n_a} and {n_b}")
    if not (np.isfinite(sd_a) and np.isfinite(sd_b) and sd_a >= 0.0 and sd_b >= 0.0):
        raise StatsInputError(f"standard deviations must be finite and >= 0, got {sd_a} and {sd_b}")
    var_a, var_b = sd_a**2 / n_a, sd_b**2 / n_b
    if var_a + var_b == 0.0:
        return 0.0, float(n_a + n_b - 2)
    df = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    return float(np.sqrt(var_a + var_b)), float(df)


def welch_power(delta: float, n_a: int, n_b: int, sd_a: float, sd_b: float, alpha: float) -> float:
    """Power of the two-sided Welch t-test at level alpha for a true difference delta (noncentral t)."""
    _check_probability("alpha", alpha)
    se, df = welch_standard_error(n_a, n_b, sd_a, sd_b)
    if se == 0.0:
        return 1.0 if delta != 0.0 else alpha
    return two_sided_t_power(stats.t.ppf(1.0 - alpha / 2.0, df), df, abs(delta) / se)


def unpaired_minimum_detectable_difference(n_a: int, n_b: int, sd_a: float, sd_b: float, alpha: float,
                                           power: float) -> float:
    """The difference in means the two-sided Welch t-test finds with probability `power` (0 without noise).

    For a cell of the gate pass alpha / m, m cells: Holm's first step, as the paired MDD is called."""
    _check_probability("power", power)
    _check_probability("alpha", alpha)
    if power <= alpha:
        raise StatsInputError(f"power ({power}) must exceed alpha ({alpha})")
    se, _ = welch_standard_error(n_a, n_b, sd_a, sd_b)
    if se == 0.0:
        return 0.0

    def shortfall(delta: float) -> float:
        return welch_power(delta, n_a, n_b, sd_a, sd_b, alpha) - power

    high = se
    while shortfall(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10 * max(1.0, high)))


def permuted_rows(pooled: np.ndarray, b_iterations: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """B independent random orderings of the pooled scores, as (chunk, n) arrays."""
    chunk = max(1, _VALUES_PER_CHUNK // pooled.size)
    for start in range(0, b_iterations, chunk):
        size = min(chunk, b_iterations - start)
        yield rng.permuted(np.broadcast_to(pooled, (size, pooled.size)), axis=1)


def checked_group(values: np.ndarray, name: str) -> np.ndarray:
    group = np.asarray(values, dtype=np.float64)
    if group.ndim != 1 or group.size < MIN_GROUP_SIZE:
        raise StatsInputError(f"group {name} needs a 1-D array of at least {MIN_GROUP_SIZE} scores, "
                              f"got shape {group.shape}")
    if not np.isfinite(group).all():
        raise StatsInputError(f"group {name} holds NaN or infinite scores")
    return group


def _random_sums_of_first(pooled: np.ndarray, n_first: int, b_iterations: int,
                          rng: np.random.Generator) -> np.ndarray:
    chunks = permuted_rows(pooled, b_iterations, rng)
    return np.concatenate([rows[:, :n_first].sum(axis=1) for rows in chunks])


def _exact_sums_of_first(pooled: np.ndarray, n_first: int) -> np.ndarray:
    """The sum of the first group for every distinct split (every n_first-subset of the pooled scores)."""
    subsets = itertools.combinations(range(pooled.size), n_first)
    sums = []
    while block := list(itertools.islice(subsets, _SPLITS_PER_CHUNK)):
        sums.append(pooled[np.array(block, dtype=np.intp)].sum(axis=1))
    return np.concatenate(sums)


def _mean_differences(sums_a: np.ndarray, total: float, n_a: int, n_b: int) -> np.ndarray:
    return sums_a / n_a - (total - sums_a) / n_b


def _count_extreme(null: np.ndarray, observed: float, alternative: Alternative, tolerance: float) -> int:
    # Permuted sums are added in another order than the observed one; the tolerance keeps a split that
    # reproduces the observed difference from being lost to rounding.
    if alternative == "greater":
        return int((null >= observed - tolerance).sum())
    if alternative == "less":
        return int((null <= observed + tolerance).sum())
    return int((np.abs(null) >= abs(observed) - tolerance).sum())


def _check_iterations(b_iterations: int) -> None:
    if b_iterations < 1:
        raise StatsInputError(f"the number of iterations must be at least 1, got {b_iterations}")


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise StatsInputError(f"unknown alternative {alternative!r}; use one of {', '.join(ALTERNATIVES)}")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise StatsInputError(f"{name} must lie strictly between 0 and 1, got {value}")
