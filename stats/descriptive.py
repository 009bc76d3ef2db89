"""Descriptive statistics: tie rate, bound counts, population statistics, correlations, Fisher-z mean."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from stats.errors import StatsInputError

CorrelationMethod = Literal["pearson", "spearman", "kendall"]
CORRELATION_METHODS: tuple[CorrelationMethod, ...] = ("pearson", "spearman", "kendall")

# arctanh(+-1) is infinite; correlations are clipped just inside (-1, 1) before the transform.
_FISHER_CLIP = 1.0 - 1e-12


@dataclass(frozen=True)
class PopulationStats:
    """Population statistics of one score vector; NaN where undefined (e.g. skewness of constant data)."""

    mean: float
    geo_mean: float
    median: float
    midhinge: float
    iqr: float
    variance: float
    skewness: float
    kurtosis: float
    min: float
    max: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def tie_rate(values: np.ndarray) -> float:
    """Probability that two different queries (drawn without replacement) received the same score.

    sum over distinct scores of c * (c - 1), divided by n * (n - 1); NaN for fewer than two scores.
    """
    values = _finite_vector(values)
    n = len(values)
    if n < 2:
        return float("nan")
    _, counts = np.unique(values, return_counts=True)
    counts = counts.astype(np.float64)
    return float((counts * (counts - 1.0)).sum() / (n * (n - 1.0)))


def bound_counts(values: np.ndarray) -> tuple[int, int]:
    """How many scores sit exactly at the lower bound 0 and the upper bound 1."""
    values = _finite_vector(values)
    return int((values == 0.0).sum()), int((values == 1.0).sum())


def population_stats(values: np.ndarray) -> PopulationStats:
    """Mean, geometric mean (0 when any score is 0), median, midhinge ((Q1 + Q3) / 2), interquartile range
    (Q3 - Q1), sample variance (ddof=1), skewness and excess kurtosis (Fisher, biased moment estimators as
    in scipy), min, max. Quartiles are numpy's default linear interpolation (Hyndman-Fan type 7), the same
    as scipy.stats.iqr's default."""
    values = _finite_vector(values)
    if len(values) == 0:
        nan = float("nan")
        return PopulationStats(nan, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    q1, median, q3 = np.percentile(values, [25.0, 50.0, 75.0])
    return PopulationStats(
        mean=float(values.mean()),
        geo_mean=_geometric_mean(values),
        median=float(median),
        midhinge=float((q1 + q3) / 2.0),
        iqr=float(q3 - q1),
        variance=float(values.var(ddof=1)) if len(values) > 1 else float("nan"),
        skewness=_moment_stat(scipy_stats.skew, values),
        kurtosis=_moment_stat(scipy_stats.kurtosis, values),
        min=float(values.min()),
        max=float(values.max()),
    )


def correlation_matrix(data: np.ndarray, method: CorrelationMethod) -> np.ndarray:
    """(m, m) correlations between the columns of an (n, m) matrix, each pair over the rows where both
    columns are finite. Pearson = scipy.stats.pearsonr, Spearman = Pearson of average ranks, Kendall =
    tau-b (scipy.stats.kendalltau). NaN where undefined (constant column or fewer than 2 rows)."""
    if method not in CORRELATION_METHODS:
        raise StatsInputError(f"unknown correlation method {method!r}; use one of {CORRELATION_METHODS}")
    data = np.asarray(data, dtype=np.float64)
    m = data.shape[1]
    result = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            result[i, j] = result[j, i] = _pair_correlation(data[:, i], data[:, j], method)
    return result


def fisher_z_mean(matrices: np.ndarray) -> np.ndarray:
    """Average of correlation matrices (s, m, m) through Fisher's z: tanh(mean(arctanh(clip(r))))).

    Undefined entries (NaN) are left out of the average; an entry undefined everywhere stays NaN.
    """
    matrices = np.asarray(matrices, dtype=np.float64)
    z = np.arctanh(np.clip(matrices, -_FISHER_CLIP, _FISHER_CLIP))
    defined = np.isfinite(z)
    counts = defined.sum(axis=0)
    total = np.where(defined, z, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.tanh(total / counts)
    mean[counts == 0] = np.nan
    np.fill_diagonal(mean, 1.0)
    return mean


def _pair_correlation(x: np.ndarray, y: np.ndarray, method: CorrelationMethod) -> float:
    both = np.isfinite(x) & np.isfinite(y)
    x, y = x[both], y[both]
    if len(x) < 2 or np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        return float("nan")
    if method == "kendall":
        return float(scipy_stats.kendalltau(x, y).statistic)
    if method == "spearman":
        x, y = scipy_stats.rankdata(x), scipy_stats.rankdata(y)
    return float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))


def _geometric_mean(values: np.ndarray) -> float:
    if (values <= 0.0).any():
        return 0.0
    return float(np.exp(np.log(values).mean()))


def _moment_stat(function, values: np.ndarray) -> float:
    if len(values) < 2 or np.ptp(values) == 0.0:
        return float("nan")
    return float(function(values))


def _finite_vector(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).ravel()
    return values[np.isfinite(values)]
