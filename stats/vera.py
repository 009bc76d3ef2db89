"""VERA bootstrap statistics (vera-paper section 3.3-3.4), pure numpy.

- bootstrap_metric: B bootstrap samples of size n (settable, default = number of observations) drawn with
  replacement from one metric's per-query values; mean, standard error (std of the bootstrap means) and
  percentile interval.
- convergence: standard error and interval width as B grows (nested prefixes of one draw of max(B)
  resamples), with the first B after which the SE changes by less than `tol` (relative).
- topicality: positive vs negative query sets on one repository; bootstrap distributions of both means,
  the distribution of their difference, its percentile interval and a verdict.
Reuses stats/bootstrap.py when n equals the number of observations.
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
    se: float  # standard deviation of the bootstrap means
    variance: float  # mean of the bootstrap sample variances (VERA's variability estimate)
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


def bootstrap_samples(
    scores, b: int, rng: np.random.Generator, n: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(b,) means and (b,) sample variances of b resamples of size n drawn with replacement."""
    values = _values(scores)
    if b < 1:
        raise StatsInputError(f"B must be >= 1, got {b}")
    n = values.size if n is None else int(n)
    if n < 1:
        raise StatsInputError(f"sample size n must be >= 1, got {n}")
    means, variances = np.empty(b), np.empty(b)
    chunk = max(1, _MAX_CELLS // n)
    for start in range(0, b, chunk):
        size = min(b, start + chunk) - start
        draw = values[rng.integers(0, values.size, size=(size, n))]
        means[start:start + size] = draw.mean(axis=1)
        variances[start:start + size] = draw.var(axis=1, ddof=1) if n > 1 else 0.0
    return means, variances


def _summary(values: np.ndarray, means: np.ndarray, variances: np.ndarray, n: int, b: int,
             confidence: float) -> BootstrapStats:
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    se = float(means.std(ddof=1)) if b > 1 else 0.0
    return BootstrapStats(float(means.mean()), float(values.mean()), se, float(variances.mean()), float(low),
                          float(high), n, values.size, b, confidence)


def bootstrap_metric(scores, b: int, rng: np.random.Generator, n: int | None = None,
                     confidence: float = 0.95) -> BootstrapStats:
    values = _values(scores)
    n = values.size if n is None else int(n)
    if not 0 < confidence < 1:
        raise StatsInputError(f"confidence must be in (0, 1), got {confidence}")
    if n == values.size:  # stats/bootstrap.py's draw: row counts @ [v, v^2] gives means and variances
        moments = bootstrap_means(np.column_stack([values, values ** 2]), b, rng)
        means = moments[:, 0]
        variances = (moments[:, 1] - means ** 2) * n / (n - 1) if n > 1 else np.zeros(b)
        variances = np.maximum(variances, 0.0)
    else:
        means, variances = bootstrap_samples(values, b, rng, n)
    return _summary(values, means, variances, n, b, confidence)


def convergence(scores, b_values: Sequence[int], rng: np.random.Generator, n: int | None = None,
                tol: float = 0.01, confidence: float = 0.95) -> ConvergenceReport:
    """SE and CI width for each B in b_values, from nested prefixes of max(b_values) resamples."""
    grid = sorted({int(b) for b in b_values})
    if not grid or grid[0] < 2:
        raise StatsInputError("convergence needs B values >= 2")
    means, _ = bootstrap_samples(scores, grid[-1], rng, n)
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
    pos_means, pos_var = bootstrap_samples(pos_vals, b, rng, n)
    neg_means, neg_var = bootstrap_samples(neg_vals, b, rng, n)
    pos = _summary(pos_vals, pos_means, pos_var, n or pos_vals.size, b, confidence)
    neg = _summary(neg_vals, neg_means, neg_var, n or neg_vals.size, b, confidence)
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
