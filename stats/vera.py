"""VERA bootstrap statistics (vera-paper section 3.3-3.4), pure numpy.

- bootstrap_metric: B bootstrap samples of size n (settable, default = number of observations) drawn with
  replacement from one metric's per-query values; mean of the bootstrap means, their variance (section 3.3:
  1/(B-1) * sum of squared deviations of the bootstrap means from their mean), standard error (its square
  root) and percentile interval.
- convergence: standard error and interval width as B grows (nested prefixes of one draw of max(B)
  resamples), with the first B after which the SE changes by less than `tol` (relative).
- topicality: positive vs negative query sets on one repository; bootstrap distributions of both means,
  the distribution of their difference, its percentile interval and a verdict.
Reuses stats/bootstrap.py's draw when n equals the number of observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats.bootstrap import bootstrap_means
from stats.errors import StatsInputError

_MAX_CELLS = 8_000_000


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
class TopicalityResult:
    positive: BootstrapStats
    negative: BootstrapStats
    diff_mean: float
    diff_low: float
    diff_high: float
    p_not_greater: float  # share of bootstrap differences <= 0 (one-sided)
    separated: bool  # difference interval entirely above 0
    verdict: str


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


def summarize_means(values: np.ndarray, means: np.ndarray, n: int, confidence: float) -> BootstrapStats:
    """The statistics of one bootstrap distribution of means (VERA section 3.3)."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    variance = float(means.var(ddof=1)) if means.size > 1 else 0.0
    return BootstrapStats(float(means.mean()), float(values.mean()), float(np.sqrt(variance)), variance,
                          float(low), float(high), n, values.size, means.size, confidence)


def bootstrap_metric(scores, b: int, rng: np.random.Generator, n: int | None = None,
                     confidence: float = 0.95) -> BootstrapStats:
    values = _values(scores)
    n = values.size if n is None else int(n)
    if not 0 < confidence < 1:
        raise StatsInputError(f"confidence must be in (0, 1), got {confidence}")
    if b < 1:
        raise StatsInputError(f"B must be >= 1, got {b}")
    if n == values.size:  # stats/bootstrap.py's draw (row counts @ values)
        means = bootstrap_means(values[:, None], b, rng)[:, 0]
    else:
        means = bootstrap_samples(values, b, rng, n)
    return summarize_means(values, means, n, confidence)


def convergence(scores, b_values: Sequence[int], rng: np.random.Generator, n: int | None = None,
                tol: float = 0.01, confidence: float = 0.95) -> ConvergenceReport:
    """SE and CI width for each B in b_values, from nested prefixes of max(b_values) resamples."""
    grid = sorted({int(b) for b in b_values})
    if not grid or grid[0] < 2:
        raise StatsInputError("convergence needs B values >= 2")
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
                             tol, int(n if n is not None else _values(scores).size))


def topicality(positive, negative, b: int, rng: np.random.Generator, n: int | None = None,
               confidence: float = 0.95) -> TopicalityResult:
    """Contrast an on-topic query set with off-topic controls on the same repository (higher = more
    topical). Both sets are resampled independently with the same n and B."""
    pos_vals, neg_vals = _values(positive), _values(negative)
    pos_means = bootstrap_samples(pos_vals, b, rng, n)
    neg_means = bootstrap_samples(neg_vals, b, rng, n)
    pos = summarize_means(pos_vals, pos_means, n or pos_vals.size, confidence)
    neg = summarize_means(neg_vals, neg_means, n or neg_vals.size, confidence)
    diff = pos_means - neg_means
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(diff, [tail, 100.0 - tail])
    separated = bool(low > 0)
    level = f"{confidence:.0%}"
    if separated:
        verdict = (f"on-topic: positive mean exceeds negative by {diff.mean():.3f} "
                   f"({level} interval {low:.3f} to {high:.3f}, excludes 0)")
    elif high < 0:
        verdict = f"inverted: negative queries score higher ({level} interval {low:.3f} to {high:.3f})"
    else:
        verdict = f"not separated: {level} interval of the difference {low:.3f} to {high:.3f} contains 0"
    return TopicalityResult(pos, neg, float(diff.mean()), float(low), float(high), float((diff <= 0).mean()),
                            separated, verdict)
