"""Discriminative power of every metric side by side, grouped by the suite that judged it (the shape of the
CCRS paper's Table 3, CCRS against the RAGChecker-style claim metrics, for any set of suites).

Pure: suite membership comes in as plain data ({suite: [metric, ...]}); the numbers come from the
per-metric entries of the stats.json result, i.e. from the same randomized Tukey HSD (same systems, same
B, same alpha) for every metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stats.errors import StatsInputError

COMPARISON_COLUMNS = (
    "suite", "metric", "rank", "significant_pairs", "pairs", "discriminative_power", "median_asl", "n_used",
)


def discriminative_power_comparison(
    per_metric: Mapping[str, Mapping[str, Any]], suites: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """One row per metric of `per_metric`: suites in the given order, then metrics of no listed suite
    (suite None); within a group by discriminative power, highest first (ties and undefined powers keep
    the order of `per_metric`, undefined last). `rank` counts from 1 within the group; `median_asl` is the
    median of the metric's pairwise HSD p-values (its ASL curve's middle), None without a complete query.
    """
    suite_of = _suite_of(suites)
    groups: dict[str | None, list[str]] = {name: [] for name in suites}
    groups[None] = []
    for metric in per_metric:
        groups[suite_of.get(metric)].append(metric)
    rows = []
    for suite, metrics in groups.items():
        ordered = sorted(metrics, key=lambda m: _power_order(per_metric[m]["discriminative_power"]))
        rows += [_row(suite, metric, rank, per_metric[metric]) for rank, metric in enumerate(ordered, 1)]
    return rows


def _suite_of(suites: Mapping[str, Sequence[str]]) -> dict[str, str]:
    suite_of: dict[str, str] = {}
    for suite, metrics in suites.items():
        for metric in metrics:
            if suite_of.setdefault(metric, suite) != suite:
                raise StatsInputError(
                    f"metric {metric!r} is listed under two suites: {suite_of[metric]!r} and {suite!r}"
                )
    return suite_of


def _power_order(power: float | None) -> tuple[bool, float]:
    """Sort key: defined powers first, highest first (sorted() is stable, so ties keep their order)."""
    return (power is None, -(power or 0.0))


def pair_counts(entry: Mapping[str, Any]) -> dict[str, int]:
    """A metric's significant pairs and all its pairs (the two counts behind its discriminative power)."""
    pairwise = entry["pairwise"]
    return {"significant_pairs": sum(bool(pair["significant"]) for pair in pairwise), "pairs": len(pairwise)}


def _row(suite: str | None, metric: str, rank: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    p_values = [pair["p_value"] for pair in entry["pairwise"] if pair["p_value"] is not None]
    return {
        "suite": suite,
        "metric": metric,
        "rank": rank,
        **pair_counts(entry),
        "discriminative_power": entry["discriminative_power"],
        "median_asl": float(np.median(p_values)) if p_values else None,
        "n_used": entry["n_used"],
    }
