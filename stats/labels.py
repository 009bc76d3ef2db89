"""Human labels of judged answers, checked against the scores they calibrate, and the human-calibrated
(PPI++) entry of a metric in stats.json (docs/human-labels.md).

A label is a person's mark of one answer (question, system) on one metric: the judge metric itself, or a
human metric of its own (`acceptable`, 0/1) that a named judge metric predicts. Marks are mapped onto
[0, 1] from their scale, as `ccrs stats --scale` maps scores. Several annotators' marks of one answer are
averaged. Tables in, typed results out: reading a labels file is tasks/reduce.py's job.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from stats.errors import StatsInputError
from stats.ppi import MIN_LABELS, PPIEstimate, judge_bias, ppi_pairwise
from stats.scores import ScoreCube

LABEL_COLUMNS = ("query_id", "system", "metric", "label")
SKIP_COLUMNS = ("query_id", "metric")
ANNOTATOR_COLUMN = "annotator"
LABEL_SCALE = (0.0, 1.0)  # every label is mapped onto it (validate_labels): the PPI++ intervals' bounds
SKIP_NOTE_SHARE = 0.10  # questions skipped and left unlabeled beyond this share of the labeled ones: a note
PAIR_LOSS_NOTE = 0.25  # a pair labeled together on less than 1 - this of its systems' labels: a note
_KEY_ALIASES = ("question_id", "id")  # as scores accept them for query_id
_SHOWN = 5

Scale = tuple[float, float]


@dataclass(frozen=True)
class LabelSet:
    """Checked labels: `frame` has query_id, system, metric (the label's own metric), label on [0, 1] and
    annotator (str, "" where unnamed), one row per (query, system, metric, annotator); `predicted_by`
    maps each label metric to the judge metric whose scores it calibrates."""

    frame: pd.DataFrame
    predicted_by: dict[str, str]
    superseded: int = 0  # marks replaced by a later mark of the same annotator on the same answer
    stale: int = 0  # marks of answers that changed after they were given (left out by the reader)
    skips: pd.DataFrame = field(default_factory=lambda: _empty_skips())  # validate_skips: questions skipped


@dataclass(frozen=True)
class LabelMatrices:
    """One judge metric's labels beside its scores, on the questions every system was judged on."""

    metric: str                 # the judge metric
    human_metric: str           # the labels' metric (== metric unless a human metric of its own)
    systems: tuple[str, ...]
    query_ids: tuple[str, ...]
    labels: np.ndarray          # (questions, systems) on [0, 1], NaN where unlabeled (mean of annotators)
    judged: np.ndarray          # (questions, systems) the judge's scores
    n_annotators: int
    unjudged_labels: int        # labeled answers on questions not judged for every system (left out)
    skips: dict[str, dict[str, int]] = field(default_factory=dict)  # {annotator: {system: questions skipped}}
    skipped_unlabeled: int = 0  # questions skipped by an annotator that no one labeled for any system


def label_step(labels: np.ndarray) -> float:
    """The smallest gap between two distinct labels (on [0, 1]; 0 where they are all one value): the step of
    the lattice a mean of them moves on, for a continuity correction (the nightly gate's human-scale test)."""
    values = np.unique(np.asarray(labels, dtype=np.float64))
    return float(np.diff(values).min()) if values.size > 1 else 0.0


def validate_labels(frame: pd.DataFrame, scale: Scale | Mapping[str, Scale] | None = None,
                    predicted_by: Mapping[str, str] | None = None) -> LabelSet:
    """Labels from the user's table: `question_id` (or query_id), system, metric, label[, annotator].
    `scale`: the marks' (low, high), one for all metrics or per metric (default (0, 1)); a mark outside its
    scale, a non-numeric mark or a missing key is a StatsInputError naming the rows."""
    if not isinstance(frame, pd.DataFrame):
        raise StatsInputError(f"labels must be a pandas DataFrame, got {type(frame).__name__}")
    frame = _with_query_id(frame)
    missing = [column for column in LABEL_COLUMNS if column not in frame.columns]
    if missing:
        raise StatsInputError(f"labels lack column(s) {missing}; found {list(frame.columns)}")
    if frame.empty:
        raise StatsInputError("the labels file holds no label")
    checked = pd.DataFrame({column: _text_column(frame, column) for column in LABEL_COLUMNS[:3]})
    checked[ANNOTATOR_COLUMN] = (frame[ANNOTATOR_COLUMN].fillna("").astype(str)
                                 if ANNOTATOR_COLUMN in frame.columns else "")
    checked["label"] = _on_unit_scale(frame, checked["metric"], scale)
    rows = len(checked)
    checked = checked.drop_duplicates(["query_id", "system", "metric", ANNOTATOR_COLUMN], keep="last")
    mapping = {metric: metric for metric in checked["metric"].unique()}
    for human, judge in (predicted_by or {}).items():
        if human not in mapping:
            raise StatsInputError(f"--predicted-by names label metric {human!r}, which no label has; the "
                                  f"labels' metrics: {sorted(mapping)}")
        mapping[human] = judge
    return LabelSet(checked.reset_index(drop=True), mapping, rows - len(checked))


def validate_skips(frame: pd.DataFrame) -> pd.DataFrame:
    """Skipped questions (`ccrs label`'s skips.jsonl): `question_id` (or query_id), metric[, annotator];
    one row per (question, metric, annotator)."""
    if not isinstance(frame, pd.DataFrame):
        raise StatsInputError(f"skips must be a pandas DataFrame, got {type(frame).__name__}")
    if frame.empty:
        return _empty_skips()
    frame = _with_query_id(frame)
    missing = [column for column in SKIP_COLUMNS if column not in frame.columns]
    if missing:
        raise StatsInputError(f"skips lack column(s) {missing}; found {list(frame.columns)}")
    checked = pd.DataFrame({column: _text_column(frame, column, "skips") for column in SKIP_COLUMNS})
    checked[ANNOTATOR_COLUMN] = (frame[ANNOTATOR_COLUMN].fillna("").astype(str)
                                 if ANNOTATOR_COLUMN in frame.columns else "")
    return checked.drop_duplicates().reset_index(drop=True)


def check_labels_against(labels: LabelSet, cube: ScoreCube) -> None:
    """Every label must be of a question, a system and (through predicted_by) a metric the scores have;
    two label metrics may not calibrate one judge metric."""
    judges = list(labels.predicted_by.values())
    for judge in judges:
        if judge not in cube.metrics:
            human = next(h for h, j in labels.predicted_by.items() if j == judge)
            hint = ("" if human != judge
                    else f" (name the judge metric that predicts it: --predicted-by {human}=METRIC)")
            raise StatsInputError(f"labels of metric {human!r}: the scores have no metric {judge!r}; they "
                                  f"have {list(cube.metrics)}{hint}")
    doubled = sorted({judge for judge in judges if judges.count(judge) > 1})
    if doubled:
        raise StatsInputError(f"two label metrics are predicted by the same judge metric {doubled[0]!r}: "
                              f"label one of them, or compute them separately")
    frame = labels.frame
    for column, known, what in (("system", cube.systems, "systems"),
                                ("query_id", cube.query_ids, "questions")):
        unknown = sorted(set(frame[column]) - set(known))
        if unknown:
            shown = ", ".join(map(repr, unknown[:_SHOWN])) + (f" and {len(unknown) - _SHOWN} more"
                                                              if len(unknown) > _SHOWN else "")
            raise StatsInputError(f"labels name {len(unknown)} {what} the scores lack: {shown}")


def label_matrices(labels: LabelSet, cube: ScoreCube) -> dict[str, LabelMatrices]:
    """{judge metric: its labels and scores}, for every judge metric a label metric is predicted by."""
    check_labels_against(labels, cube)
    result = {}
    for human, metric in labels.predicted_by.items():
        rows = labels.frame[labels.frame["metric"] == human]
        judged = cube.metric_matrix(metric)
        complete = np.isfinite(judged).all(axis=1)
        means = rows.groupby(["query_id", "system"])["label"].mean()
        grid = np.full(judged.shape, np.nan)
        q_index = {q: i for i, q in enumerate(cube.query_ids)}
        s_index = {s: i for i, s in enumerate(cube.systems)}
        for (query, system), value in means.items():
            grid[q_index[query], s_index[system]] = value
        unjudged = int(np.isfinite(grid[~complete]).sum())
        query_ids = tuple(np.asarray(cube.query_ids)[complete])
        skips, unlabeled = _skip_counts(labels.skips, human, query_ids, grid[complete], cube.systems)
        result[metric] = LabelMatrices(
            metric, human, cube.systems, query_ids, grid[complete], judged[complete],
            int(rows[ANNOTATOR_COLUMN].nunique()), unjudged, skips, unlabeled)
    return result


def _skip_counts(skips: pd.DataFrame, human: str, query_ids: tuple[str, ...], labels: np.ndarray,
                 systems: tuple[str, ...]) -> tuple[dict[str, dict[str, int]], int]:
    """({annotator: {system: questions skipped}}, questions skipped that no one labeled for any system),
    over the questions judged for every system: a skip leaves every system's answer of its question
    without that annotator's mark."""
    rows = skips[(skips["metric"] == human) & skips["query_id"].isin(query_ids)]
    counts = {str(annotator): {system: int(len(group)) for system in systems}
              for annotator, group in rows.groupby(ANNOTATOR_COLUMN)}
    unlabeled = ~np.isfinite(labels).any(axis=1)
    index = {query: row for row, query in enumerate(query_ids)}
    return counts, int(sum(unlabeled[index[query]] for query in set(rows["query_id"])))


def human_calibrated_entry(matrices: LabelMatrices, judge_pairwise: list[dict],
                           alpha: float) -> dict[str, Any]:
    """A metric's `human_calibrated` block of stats.json: per system the labels, PPI++ mean and interval and
    (for labels of the judge metric itself) the judge's bias; per pair the PPI++ difference (Holm across the
    pairs), and whether its decision differs from the judge-only HSD's (`judge_pairwise`: the metric's
    `pairwise` list); the questions skipped; notes where the labels leave the figures less than they seem."""
    labels, judged, systems = matrices.labels, matrices.judged, matrices.systems
    labeled = np.isfinite(labels)
    estimate = ppi_pairwise(labels, judged, systems, alpha, bounds=LABEL_SCALE)
    hsd = {(pair["a"], pair["b"]): pair["significant"] for pair in judge_pairwise}
    own_labels = matrices.human_metric == matrices.metric  # a human metric of its own: another construct
    biases = {system: judge_bias(labels[labeled[:, s], s], judged[labeled[:, s], s], alpha)
              for s, system in enumerate(systems) if own_labels and labeled[:, s].sum() >= 2}
    means = estimate.means
    n_labels = {system: int(labeled[:, s].sum()) for s, system in enumerate(systems)}
    return {
        "human_metric": matrices.human_metric,
        "n_labels": n_labels,
        "n_annotators": matrices.n_annotators,
        "means": {system: value.estimate for system, value in means.items()},
        "ci95": {system: list(value.ci) for system, value in means.items()},
        "lam": {system: value.lam for system, value in means.items()},
        "judge_bias": {system: bias.mean for system, bias in biases.items()},
        "judge_bias_ci95": {system: list(bias.ci) for system, bias in biases.items()},
        "pairwise": [_pair_entry(pair, hsd) for pair in estimate.pairs],
        "too_few_labels": list(estimate.too_few_labels),
        "pairs_too_few_labels": [list(pair) for pair in estimate.pairs_too_few_labels],
        "min_labels": MIN_LABELS,
        "unjudged_labels": matrices.unjudged_labels,
        "se": {system: value.se for system, value in means.items()},
        "label_step": {system: label_step(labels[labeled[:, s], s]) for s, system in enumerate(systems)},
        "interval": {system: value.interval for system, value in means.items()},
        "constant_labels": [system for system, value in means.items() if value.constant],
        "constant_pairs": [[pair.system_a, pair.system_b] for pair in estimate.pairs
                           if pair.difference.constant],
        "skips": matrices.skips,
        "skipped_unlabeled": matrices.skipped_unlabeled,
        "notes": [note for note in (_skip_note(matrices, labeled),
                                    _pair_rule_note(matrices, labeled, n_labels),
                                    _constant_note(means, estimate.pairs)) if note],
    }


def _skip_note(matrices: LabelMatrices, labeled: np.ndarray) -> str | None:
    labeled_questions = int(labeled.any(axis=1).sum())
    if matrices.skipped_unlabeled <= SKIP_NOTE_SHARE * labeled_questions:
        return None
    return (f"{matrices.skipped_unlabeled} question(s) were skipped and left with no label, against "
            f"{labeled_questions} labeled: the intervals assume the labeled questions are a uniform sample, "
            f"which skips chosen by the answers' content (the hard ones, one topic) break")


def _pair_rule_note(matrices: LabelMatrices, labeled: np.ndarray, n_labels: dict[str, int]) -> str | None:
    """Pairs that keep less than 1 - PAIR_LOSS_NOTE of their systems' labels under the pair rule."""
    lost = []
    for (i, a), (j, b) in combinations(enumerate(matrices.systems), 2):
        together = int((labeled[:, i] & labeled[:, j]).sum())
        if together < (1.0 - PAIR_LOSS_NOTE) * min(n_labels[a], n_labels[b]):
            lost.append(f"{a}-{b} on {together} (of {n_labels[a]} and {n_labels[b]})")
    if not lost:
        return None
    more = f" and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else ""
    return (f"pairs are compared on the questions where both systems are labeled (a paired difference needs "
            f"both answers of one question): {', '.join(lost[:_SHOWN])}{more}; label every system's answer "
            f"of a question, as `ccrs label` does, to keep them")


def _constant_note(means: Mapping[str, PPIEstimate], pairs) -> str | None:
    constant = [f"{system} ({value.n_labeled} x {value.estimate:.2f})" for system, value in means.items()
                if value.constant]
    constant += [f"{pair.system_a} - {pair.system_b} ({pair.difference.n_labeled} x "
                 f"{pair.difference.estimate:+.2f})" for pair in pairs if pair.difference.constant]
    if not constant:
        return None
    return (f"labels (or pairs' label differences) all one value: {', '.join(constant)}; no spread to "
            f"estimate, so their intervals come from the [0, 1] scale (docs/human-labels.md)")


def _pair_entry(pair, hsd: Mapping[tuple[str, str], bool]) -> dict[str, Any]:
    difference = pair.difference
    judge_only = hsd.get((pair.system_a, pair.system_b))
    return {
        "a": pair.system_a, "b": pair.system_b, "diff": difference.estimate, "ci95": list(difference.ci),
        "p_value": pair.p_adjusted, "raw_p": difference.p_value, "significant": pair.significant,
        "n_labels": difference.n_labeled, "judge_only_significant": judge_only,
        "decision_changed": judge_only is not None and judge_only != pair.significant,
        "interval": difference.interval, "constant": difference.constant,
    }


def _with_query_id(frame: pd.DataFrame) -> pd.DataFrame:
    if "query_id" in frame.columns:
        return frame
    for alias in _KEY_ALIASES:
        if alias in frame.columns:
            return frame.rename(columns={alias: "query_id"})
    return frame


def _empty_skips() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=str) for column in (*SKIP_COLUMNS, ANNOTATOR_COLUMN)})


def _text_column(frame: pd.DataFrame, column: str, what: str = "labels") -> pd.Series:
    values = frame[column]
    empty = values.isna() | (values.astype(str).str.strip() == "")
    if empty.any():
        raise StatsInputError(f"{what} have an empty {column} in {int(empty.sum())} row(s), e.g. row(s) "
                              f"{[int(row) for row in np.flatnonzero(empty.to_numpy())[:_SHOWN]]}")
    return values.astype(str)


def _on_unit_scale(frame: pd.DataFrame, metrics: pd.Series, scale) -> pd.Series:
    marks = pd.to_numeric(frame["label"].replace("", np.nan), errors="coerce")
    bad = marks.isna() | ~np.isfinite(marks.astype(float))
    if bad.any():
        rows = [int(row) for row in np.flatnonzero(bad.to_numpy())[:_SHOWN]]
        raise StatsInputError(f"labels hold {int(bad.sum())} missing or non-numeric mark(s), e.g. row(s) "
                              f"{rows}: {list(frame['label'].iloc[rows])}")
    low, high = _scale_columns(metrics, scale)
    outside = (marks < low) | (marks > high)
    if outside.any():
        rows = [int(row) for row in np.flatnonzero(outside.to_numpy())[:_SHOWN]]
        first, shown = rows[0], [float(mark) for mark in marks.iloc[rows]]
        raise StatsInputError(f"{int(outside.sum())} label(s) lie outside their scale, e.g. row(s) {rows}: "
                              f"{shown} not in [{low.iloc[first]:g}, {high.iloc[first]:g}] "
                              f"(give the marks' scale with --label-scale MIN MAX)")
    return ((marks - low) / (high - low)).astype(np.float64)


def _scale_columns(metrics: pd.Series, scale) -> tuple[pd.Series, pd.Series]:
    if scale is None or not isinstance(scale, Mapping):
        low, high = scale if scale is not None else (0.0, 1.0)
        _check_scale(low, high)
        return pd.Series(float(low), index=metrics.index), pd.Series(float(high), index=metrics.index)
    unscaled = sorted(set(metrics) - set(scale))
    if unscaled:
        raise StatsInputError(f"no mark scale is known for label metric(s) {unscaled}")
    for low, high in scale.values():
        _check_scale(low, high)
    return (metrics.map(lambda m: float(scale[m][0])), metrics.map(lambda m: float(scale[m][1])))


def _check_scale(low: float, high: float) -> None:
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise StatsInputError(f"a label scale needs MIN < MAX, got {low} {high}")
