"""How unsure the judge is of each question of a finished run, for the active labeling design: the spread
of its expected-mark distribution where the judge stage recorded one (judge.scoring: expected, the marks'
probabilities in judgments.parquet's `detail`), else the disagreement of its repeats (judge.repeats), else
the systems' disagreement on the question (the sd of their scores). A question's uncertainty is the root
of the sum of its answers' squared spreads (repeat sds), or the systems' sd; on the [0, 1] score scale."""
from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stats.errors import StatsInputError
from stats.scores import ScoreCube, build_cube
from tasks.runtime.layout import RunLayout

SPREAD, REPEATS, DISAGREEMENT = "judge's mark spread", "judge's repeats", "systems' disagreement"
SOURCES = (SPREAD, REPEATS, DISAGREEMENT)  # in the order they are preferred


@dataclass(frozen=True)
class JudgeUncertainty:
    """One judge metric's scores (questions x systems on [0, 1], NaN where not judged), each question's
    uncertainty and where it came from; `filled`: answers without a spread given the largest one."""

    metric: str
    query_ids: tuple[str, ...]
    systems: tuple[str, ...]
    judged: np.ndarray
    per_question: np.ndarray
    source: str
    filled: int = 0

    def digest(self) -> str:
        """A fingerprint of the scores: a design drawn from other scores is not this run's."""
        cells = [[q, s, round(float(v), 12)] for i, q in enumerate(self.query_ids)
                 for j, s in enumerate(self.systems) if np.isfinite(v := self.judged[i, j])]
        return hashlib.sha1(json.dumps(cells).encode("utf-8")).hexdigest()[:16]

    def for_questions(self, query_ids: Sequence[str]) -> np.ndarray:
        """The uncertainty of each of `query_ids` (0 for a question no system's answer was judged on)."""
        index = {q: i for i, q in enumerate(self.query_ids)}
        return np.array([self.per_question[index[q]] if q in index else 0.0 for q in query_ids])

    def judged_for(self, query_ids: Sequence[str]) -> np.ndarray:
        """(len(query_ids), systems) scores in that order, NaN rows for questions never judged."""
        index = {q: i for i, q in enumerate(self.query_ids)}
        rows = np.full((len(query_ids), len(self.systems)), np.nan)
        for row, q in enumerate(query_ids):
            if q in index:
                rows[row] = self.judged[index[q]]
        return rows


def run_uncertainty(layout: RunLayout, metric: str) -> JudgeUncertainty:
    """The judge metric `metric`'s uncertainty per question of the run's finished judge stages."""
    from tasks.reduce import concat_scores, load_scores, run_scores

    frame = concat_scores([load_scores(path) for path in run_scores(layout.root)])
    if metric not in set(frame["metric"]):
        raise StatsInputError(f"{layout.root} has no scores of {metric}")
    return uncertainty_of(frame[frame["metric"] == metric], metric, mark_spreads(layout, metric))


def uncertainty_of(frame: pd.DataFrame, metric: str,
                   spreads: pd.DataFrame | None = None) -> JudgeUncertainty:
    """From validated long scores of `metric` (a `repeat` column where judged repeatedly) and, where the
    run has them, the answers' mark spreads (query_id, system, spread on [0, 1])."""
    cube = build_cube(frame[frame["metric"] == metric])
    judged = cube.metric_matrix(metric)
    if spreads is not None and len(spreads):
        per_answer, filled = _spread_matrix(cube, spreads, judged)
        return JudgeUncertainty(metric, cube.query_ids, cube.systems, judged, _root_sum(per_answer), SPREAD,
                                filled)
    if cube.n_repeats(metric) >= 2:
        with warnings.catch_warnings():  # an answer judged in no repeat: NaN, left out of the sum
            warnings.simplefilter("ignore", RuntimeWarning)
            repeat_sd = np.nanstd(cube.metric_repeats(metric), axis=2)
        return JudgeUncertainty(metric, cube.query_ids, cube.systems, judged, _root_sum(repeat_sd), REPEATS)
    counts = np.isfinite(judged).sum(axis=1)
    with warnings.catch_warnings():  # a question judged for no system: 0
        warnings.simplefilter("ignore", RuntimeWarning)
        disagreement = np.where(counts >= 2, np.nanstd(judged, axis=1), 0.0)
    return JudgeUncertainty(metric, cube.query_ids, cube.systems, judged, disagreement, DISAGREEMENT)


def mark_spreads(layout: RunLayout, metric: str) -> pd.DataFrame | None:
    """(query_id, system, spread): the sd of each answer's expected-mark distribution on [0, 1] (its
    repeats' variances averaged), from the judge stage's judgments; None where none was recorded."""
    from judges.suite import all_metrics

    declared = {m.name: m for m in all_metrics()}.get(metric)
    if declared is None:
        return None
    path = layout.judgments(declared.suite)
    if not Path(path).is_file():
        return None
    judgments = pd.read_parquet(path, columns=["query_id", "system", "metric", "detail"])
    judgments = judgments[(judgments["metric"] == metric) & judgments["detail"].notna()]
    width = float(declared.scale[1]) - float(declared.scale[0])
    rows = [(str(q), str(s), variance) for q, s, detail in judgments[["query_id", "system", "detail"]]
            .itertuples(index=False) if (variance := _mark_variance(detail)) is not None]
    if not rows or not width > 0.0:
        return None
    table = pd.DataFrame(rows, columns=["query_id", "system", "variance"])
    table = table.groupby(["query_id", "system"], as_index=False)["variance"].mean()
    return table.assign(spread=np.sqrt(table.pop("variance")) / width)


def _mark_variance(detail: str) -> float | None:
    try:
        marks = json.loads(detail).get("marks")
    except (TypeError, ValueError, AttributeError):
        return None
    if not marks:
        return None
    values = np.array([float(mark) for mark in marks])
    weights = np.array([float(p) for p in marks.values()])
    if not weights.sum() > 0.0:
        return None
    weights = weights / weights.sum()
    mean = float((values * weights).sum())
    return float((weights * (values - mean) ** 2).sum())


def _spread_matrix(cube: ScoreCube, spreads: pd.DataFrame, judged: np.ndarray) -> tuple[np.ndarray, int]:
    """Spreads as (questions, systems); a judged answer without one gets the largest (it is not known to be
    sure), counted."""
    grid = np.full(judged.shape, np.nan)
    q_index = {q: i for i, q in enumerate(cube.query_ids)}
    s_index = {s: j for j, s in enumerate(cube.systems)}
    for q, s, spread in spreads[["query_id", "system", "spread"]].itertuples(index=False):
        if q in q_index and s in s_index:
            grid[q_index[q], s_index[s]] = spread
    missing = np.isfinite(judged) & ~np.isfinite(grid)
    grid[missing] = np.nanmax(grid) if np.isfinite(grid).any() else 0.0
    return grid, int(missing.sum())


def _root_sum(per_answer: np.ndarray) -> np.ndarray:
    return np.sqrt(np.nansum(per_answer**2, axis=1))
