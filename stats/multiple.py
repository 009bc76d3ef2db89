"""Multiple testing: the significance rule, combining p-values within a hypothesis, Holm-Bonferroni across
hypotheses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from stats.errors import StatsInputError

Combine = Literal["all", "any"]


def is_significant(p_value: float, alpha: float) -> bool:
    """The one significance rule of the project: p < alpha, strictly (the CCRS paper marks p-values
    "< 0.05" as significant, App. E). A randomized p-value is a count / B, so p == alpha does occur
    (500 / 10,000 = 0.05) and is not significant."""
    return bool(p_value < alpha)


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, monotone in the order of the raw p-values, capped at 1.

    adjusted p_(i) = max over j <= i of min(1, (m - j + 1) * p_(j)), with p_(1) <= ... <= p_(m).
    """
    p = _checked_p_values(p_values)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    stepped = p[order] * np.arange(m, 0, -1)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(stepped))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted


def combine_p_values(p_values: Sequence[float], combine: Combine, n_metrics: int) -> float:
    """One p-value for a hypothesis made of several tests.

    "all" (every test must hold; intersection-union): the largest p-value.
    "any" (at least one metric shows it): the smallest p-value times the number of metrics (Bonferroni
    over metrics; within one metric the pairs already come from one family-wise HSD), capped at 1.
    """
    p = _checked_p_values(p_values)
    if len(p) == 0:
        raise StatsInputError("a hypothesis needs at least one test to combine")
    if combine == "all":
        return float(p.max())
    if combine == "any":
        if n_metrics < 1:
            raise StatsInputError(f"n_metrics must be at least 1, got {n_metrics}")
        return float(min(1.0, p.min() * n_metrics))
    raise StatsInputError(f"unknown combination {combine!r}; use 'all' or 'any'")


def _checked_p_values(p_values: Sequence[float]) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64).ravel()
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        raise StatsInputError(f"p-values must lie in [0, 1]; got {p[bad][:5].tolist()}")
    return p
