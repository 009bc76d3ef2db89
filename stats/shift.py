"""The paired shift of a perturbation (probed - clean, per query) with its percentile bootstrap CI, and
whether it exceeds a tolerance: the statistic of the judge bias probes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.bootstrap import bootstrap_mean_ci
from stats.errors import StatsInputError


@dataclass(frozen=True)
class PairedShift:
    n: int
    mean: float                 # mean of probed - clean
    low: float                  # percentile bootstrap CI of that mean
    high: float
    confidence: float
    b: int
    tolerance: float
    flagged: bool               # |mean| > tolerance
    ci_beyond_tolerance: bool   # the whole CI lies outside [-tolerance, tolerance]


def paired_shift(probed: np.ndarray, clean: np.ndarray, tolerance: float, b: int, rng: np.random.Generator,
                 confidence: float = 0.95) -> PairedShift:
    """`probed` and `clean`: the scores of the same queries (1-D, equal length, finite, n >= 1)."""
    probed = np.asarray(probed, dtype=np.float64)
    clean = np.asarray(clean, dtype=np.float64)
    if probed.shape != clean.shape or probed.ndim != 1:
        raise StatsInputError(f"paired scores must be 1-D and of equal length, got {probed.shape} and "
                              f"{clean.shape}")
    if tolerance < 0:
        raise StatsInputError(f"tolerance must be >= 0, got {tolerance}")
    ci = bootstrap_mean_ci(probed - clean, b, rng, confidence)
    mean, low, high = float(ci.means[0]), float(ci.low[0]), float(ci.high[0])
    slack = 1e-12  # a shift of exactly the tolerance, computed with rounding error, is not over it
    return PairedShift(int(probed.size), mean, low, high, confidence, b, tolerance,
                       abs(mean) > tolerance + slack,
                       low > tolerance + slack or high < -tolerance - slack)
