"""Paired randomization (sign-flip) test of mean differences, for run-to-run regression checks."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedTestResult:
    n: int
    mean_diff: float
    p_value: float


def paired_randomization_test(
    current: np.ndarray, baseline: np.ndarray, b: int, rng: np.random.Generator, chunk: int = 2000
) -> PairedTestResult:
    """Two-sided test of H0: mean(current - baseline) = 0 by randomly flipping the sign of each
    per-query difference. p = (1 + #{|mean*| >= |mean_obs|}) / (1 + b), so it is never 0."""
    current = np.asarray(current, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    if current.shape != baseline.shape or current.ndim != 1:
        raise ValueError(
            f"paired arrays must be 1-D and equal length, got {current.shape} and {baseline.shape}"
        )
    if current.size == 0:
        raise ValueError("paired test needs at least one query scored in both runs")
    diffs = current - baseline
    observed = abs(diffs.mean())
    tolerance = 1e-12 * max(1.0, observed)
    hits = 0
    for start in range(0, b, chunk):
        size = min(chunk, b - start)
        signs = rng.integers(0, 2, size=(size, diffs.size), dtype=np.int8) * 2 - 1
        hits += int((np.abs(signs @ diffs) / diffs.size >= observed - tolerance).sum())
    return PairedTestResult(int(diffs.size), float(diffs.mean()), (hits + 1) / (b + 1))

