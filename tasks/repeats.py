"""Scores of a run judged with `judge.repeats.k` > 1 carry an integer `repeat` column (0..k-1): one row per
(question, system, metric, repeat). The statistics read the repeats themselves (stats/scores.py and
stats/judge_noise.py: the judge's noise, the HSD on repeat-averaged scores, where a sample lacking a repeat
counts as missing); a view that shows one score per (question, system, metric) (the per-sample MLflow
table, the GQM report, `ccrs compare`) shows `mean_over_repeats`: the mean of the sample's scored repeats
(a failed repeat is left out; a sample none of whose repeats scored stays without a score).
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from stats.scores import REPEAT_COLUMN

SAMPLE_KEYS = ("query_id", "system", "metric")


def mean_over_repeats(frame: pd.DataFrame, keys: Sequence[str] = SAMPLE_KEYS,
                      value: str = "score") -> pd.DataFrame:
    """`frame` (columns `keys`, `value` and perhaps `repeat`) with one row per `keys`: the mean `value` over
    its repeats, in the order the keys first appear; the frame itself when it has no repeat column."""
    if REPEAT_COLUMN not in frame.columns:
        return frame
    return (frame.groupby(list(keys), sort=False, dropna=False)[value].mean().reset_index())
