"""VERA bootstrap statistics (vera-paper section 3.3-3.4), pure numpy.

- bootstrap_metric: B bootstrap samples of size n (settable, default = number of observations) drawn with
  replacement from one metric's per-query values; mean of the bootstrap means, their variance (section 3.3:
  1/(B-1) * sum of squared deviations of the bootstrap means from their mean), standard error (its square
  root) and percentile interval.
- convergence: standard error and interval width as B grows (nested prefixes of one draw of max(B)
  resamples), with the first B after which the SE changes by less than `tol` (relative).
- compare_query_sets: N query sets on one repository (section 3.4 / 5.2, Table 3: an on-topic, a
  minority-topic and an unrelated set), given in the order expected from most to least topical; each
  set's bootstrap distribution of means, the distribution of every pair's difference (earlier minus
  later set), its percentile interval and a verdict, and whether the sets' means fall in the given order.
- SampleSize: how n follows from the N observations. n > N is refused (a resample larger than the data
  gives the standard error of a mean of n values, narrower than the N observed support), unless a ratio is
  set for that case: then n = round(ratio * N) (the paper's preset: its n/N = 50/200).
Reuses stats/bootstrap.py's draw when n equals the number of observations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stats.bootstrap import bootstrap_means
from stats.errors import StatsInputError

_MAX_CELLS = 8_000_000
# Section 5.2: bootstrap samples of 50 drawn from query sets of 200.
PAPER_SAMPLE_RATIO = 50 / 200


@dataclass(frozen=True)
class SampleSize:
    """The bootstrap sample size n asked for (None: every observation) and, for an n above the N
    observations, the share of N to draw instead (None: refused)."""

    n: int | None = None
    ratio_above_observations: float | None = None

    def for_observations(self, n_observed: int) -> int:
        if self.n is None or self.n <= n_observed:
            return n_observed if self.n is None else self.n
        if self.ratio_above_observations is None:
            raise StatsInputError(
                f"bootstrap sample size n = {self.n} exceeds the {n_observed} observations: resamples "
                f"larger than the data understate the standard error; give n <= {n_observed}")
        return max(1, round(self.ratio_above_observations * n_observed))

    def note(self, n_observed: int) -> str | None:
        """Where n > N was drawn at the ratio: what was asked and what was drawn."""
        if self.n is None or self.n <= n_observed:
            return None
        drawn = self.for_observations(n_observed)
        return (f"n = {self.n} asked but only {n_observed} observations: drawn n = {drawn}, the paper's "
                f"ratio n/N = {self.ratio_above_observations:g}")


def sample_size(n: int | SampleSize | None) -> SampleSize:
    """An n given as a number (refused above N), None (every observation) or a SampleSize."""
    return n if isinstance(n, SampleSize) else SampleSize(None if n is None else int(n))


@dataclass(frozen=True)
class BootstrapStats:
    mean: float  # mean of the bootstrap means
    observed_mean: float
    se: float  # standard deviation of the bootstrap means (ddof=1)
    variance: float  # variance of the bootstrap means (ddof=1), VERA section 3.3's sigma^2(M)
    low: float
    high: float
    n: int  # bootstrap sample size
    n_observed: int
    b: int
    confidence: float
    sample_size_note: str | None = None  # n > N drawn at a ratio (SampleSize.note)


@dataclass(frozen=True)
class ConvergenceReport:
    b_values: tuple[int, ...]
    se: tuple[float, ...]
    ci_width: tuple[float, ...]
    relative_change: tuple[float | None, ...]  # |se_k - se_{k-1}| / se_{k-1}
    converged_at: int | None  # smallest B from which every later relative change is < tol
    tol: float
    n: int


@dataclass(frozen=True)
class SetDifference:
    """One pair of query sets: the set expected to score higher minus the one expected lower."""

    higher: str
    lower: str
    diff_mean: float
    diff_low: float
    diff_high: float
    p_not_greater: float  # share of bootstrap differences <= 0 (one-sided)
    separated: bool  # difference interval entirely above 0
    verdict: str


@dataclass(frozen=True)
class QuerySetComparison:
    sets: dict[str, BootstrapStats]  # in the order given (expected most to least topical)
    pairs: tuple[SetDifference, ...]  # every pair (i < j) of that order
    ranking: tuple[str, ...]  # the sets by bootstrap mean, highest first
    expected_order_holds: bool  # the bootstrap means fall strictly in the order given (a tie breaks it)
    expected_order_separated: bool  # and every neighbouring pair of that order is separated


def _values(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64).ravel()
    if values.size < 1:
        raise StatsInputError("bootstrap needs at least one value")
    if not np.isfinite(values).all():
        raise StatsInputError("bootstrap values must be finite (drop missing scores first)")
    return values


def bootstrap_samples(scores, b: int, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
    """(b,) means of b resamples of size n drawn with replacement."""
    values = _values(scores)
    if b < 1:
        raise StatsInputError(f"B must be >= 1, got {b}")
    n = values.size if n is None else int(n)
    if n < 1:
        raise StatsInputError(f"sample size n must be >= 1, got {n}")
    means = np.empty(b)
    chunk = max(1, _MAX_CELLS // n)
    for start in range(0, b, chunk):
        size = min(b, start + chunk) - start
        means[start:start + size] = values[rng.integers(0, values.size, size=(size, n))].mean(axis=1)
    return means


def summarize_means(values: np.ndarray, means: np.ndarray, n: int, confidence: float,
                    note: str | None = None) -> BootstrapStats:
    """The statistics of one bootstrap distribution of means (VERA section 3.3)."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    variance = float(means.var(ddof=1)) if means.size > 1 else 0.0
    return BootstrapStats(float(means.mean()), float(values.mean()), float(np.sqrt(variance)), variance,
                          float(low), float(high), n, values.size, means.size, confidence, note)


def bootstrap_metric(scores, b: int, rng: np.random.Generator, n: int | SampleSize | None = None,
                     confidence: float = 0.95) -> BootstrapStats:
    values = _values(scores)
    rule = sample_size(n)
    n = rule.for_observations(values.size)
    if not 0 < confidence < 1:
        raise StatsInputError(f"confidence must be in (0, 1), got {confidence}")
    if b < 1:
        raise StatsInputError(f"B must be >= 1, got {b}")
    if n == values.size:  # stats/bootstrap.py's draw (row counts @ values)
        means = bootstrap_means(values[:, None], b, rng)[:, 0]
    else:
        means = bootstrap_samples(values, b, rng, n)
    return summarize_means(values, means, n, confidence, rule.note(values.size))


def convergence(scores, b_values: Sequence[int], rng: np.random.Generator, n: int | SampleSize | None = None,
                tol: float = 0.01, confidence: float = 0.95) -> ConvergenceReport:
    """SE and CI width for each B in b_values, from nested prefixes of max(b_values) resamples."""
    grid = sorted({int(b) for b in b_values})
    if not grid or grid[0] < 2:
        raise StatsInputError("convergence needs B values >= 2")
    n = sample_size(n).for_observations(_values(scores).size)
    means = bootstrap_samples(scores, grid[-1], rng, n)
    # SE of every prefix at once from cumulative sums.
    k = np.arange(1, means.size + 1, dtype=np.float64)
    csum, csq = np.cumsum(means), np.cumsum(means ** 2)
    idx = np.array(grid) - 1
    var = (csq[idx] - csum[idx] ** 2 / k[idx]) / (k[idx] - 1)
    se = np.sqrt(np.maximum(var, 0.0))
    tail = (1.0 - confidence) / 2.0 * 100.0
    widths = [float(np.subtract(*np.percentile(means[:b], [100.0 - tail, tail]))) for b in grid]
    rel = [None] + [
        float(abs(se[i] - se[i - 1]) / se[i - 1]) if se[i - 1] > 0 else 0.0 for i in range(1, len(grid))
    ]
    converged = None
    for i in range(1, len(grid)):
        if all(r is not None and r < tol for r in rel[i:]):
            converged = grid[i]
            break
    return ConvergenceReport(tuple(grid), tuple(float(s) for s in se), tuple(widths), tuple(rel), converged,
                             tol, n)


def compare_query_sets(sets: Mapping[str, Sequence[float] | np.ndarray], b: int, rng: np.random.Generator,
                       n: int | SampleSize | None = None, confidence: float = 0.95) -> QuerySetComparison:
    """Contrast query sets on the same repository (higher = more topical), given in the order expected
    from most to least topical (e.g. on-topic, minority topic, unrelated). Every set is resampled
    independently with the same n and B (in the order given, from one stream); the pair differences are
    taken between those same resamples."""
    if len(sets) < 2:
        raise StatsInputError(f"comparing query sets needs at least two sets, got {len(sets)}")
    if not 0 < confidence < 1:
        raise StatsInputError(f"confidence must be in (0, 1), got {confidence}")
    names = list(sets)
    values = [_values(sets[name]) for name in names]
    rule = sample_size(n)
    sizes = [rule.for_observations(v.size) for v in values]
    means = np.stack([bootstrap_samples(v, b, rng, size) for v, size in zip(values, sizes)])  # (sets, B)
    stats = {name: summarize_means(v, m, size, confidence, rule.note(v.size))
             for name, v, m, size in zip(names, values, means, sizes)}
    first, second = np.triu_indices(len(names), k=1)
    diffs = means[first] - means[second]  # (pairs, B)
    tail = (1.0 - confidence) / 2.0 * 100.0
    lows, highs = np.percentile(diffs, [tail, 100.0 - tail], axis=1)
    not_greater = (diffs <= 0).mean(axis=1)
    pairs = tuple(
        SetDifference(names[i], names[j], float(d.mean()), float(lo), float(hi), float(p), bool(lo > 0),
                      _verdict(names[i], names[j], float(d.mean()), float(lo), float(hi), confidence))
        for i, j, d, lo, hi, p in zip(first, second, diffs, lows, highs, not_greater))
    centre = means.mean(axis=1)
    neighbours = [p for p in pairs if names.index(p.lower) == names.index(p.higher) + 1]
    return QuerySetComparison(stats, pairs, tuple(names[i] for i in np.argsort(-centre, kind="stable")),
                              bool(np.all(np.diff(centre) < 0)), all(p.separated for p in neighbours))


def _verdict(higher: str, lower: str, diff: float, low: float, high: float, confidence: float) -> str:
    level = f"{confidence:.0%}"
    if low > 0:
        return (f"separated: {higher} exceeds {lower} by {diff:.3f} ({level} interval {low:.3f} to "
                f"{high:.3f}, excludes 0)")
    if high < 0:
        return f"inverted: {lower} scores higher than {higher} ({level} interval {low:.3f} to {high:.3f})"
    return f"not separated: {level} interval of {higher} - {lower} is {low:.3f} to {high:.3f}, contains 0"
