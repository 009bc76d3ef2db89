"""Validation of long-format scores (query_id, system, metric, score[, repeat]) and the dense score cube."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stats.errors import StatsInputError

REQUIRED_COLUMNS = ("query_id", "system", "metric", "score")
REPEAT_COLUMN = "repeat"  # optional: which of the repeated judgments of one (query, system, metric) a row is
_SHOWN = 5  # offending rows quoted in an error message


@dataclass(frozen=True)
class ScoreCube:
    """values[q, s, m] is the score of query q, system s, metric m; NaN where missing.

    With a repeat column, repeats[q, s, m, r] is the score of the metric's r-th repeat label
    (repeat_labels[m][r]; NaN where missing or beyond the metric's labels) and values[q, s, m] is the mean
    of a cell's repeats, NaN unless it has every repeat label of its metric."""

    query_ids: tuple[str, ...]
    systems: tuple[str, ...]
    metrics: tuple[str, ...]
    values: np.ndarray
    repeats: np.ndarray | None = None
    repeat_labels: tuple[tuple[int, ...], ...] = ()

    def metric_matrix(self, metric: str) -> np.ndarray:
        """(n_queries, n_systems) scores of one metric (repeat-averaged), NaN where missing."""
        return self.values[:, :, self.metrics.index(metric)]

    def n_repeats(self, metric: str) -> int:
        """How many repeat labels the metric's judgments carry (1 without a repeat column)."""
        return len(self.repeat_labels[self.metrics.index(metric)]) if self.repeats is not None else 1

    def metric_repeats(self, metric: str) -> np.ndarray:
        """(n_queries, n_systems, n_repeats) scores of one metric, NaN where a repeat is missing."""
        if self.repeats is None:
            return self.metric_matrix(metric)[:, :, None]
        index = self.metrics.index(metric)
        return self.repeats[:, :, index, : len(self.repeat_labels[index])]


def validate_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """Checked copy with columns query_id, system, metric (str) and score (float64, in [0, 1]).

    Rows with an empty score (NaN, None or "") are missing judgments and are dropped. An optional `repeat`
    column (an integer per repeated judgment of the same query, system and metric) is kept as int64.
    """
    if not isinstance(frame, pd.DataFrame):
        raise StatsInputError(f"scores must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise StatsInputError(f"scores lack column(s) {missing}; found {list(frame.columns)}")
    repeated = REPEAT_COLUMN in frame.columns
    frame = frame.loc[:, [*REQUIRED_COLUMNS, *([REPEAT_COLUMN] if repeated else [])]].reset_index(drop=True)
    for column in ("query_id", "system", "metric"):
        frame[column] = _key_column(frame, column)
    frame["score"] = _score_column(frame)
    if repeated:
        frame[REPEAT_COLUMN] = _repeat_column(frame[REPEAT_COLUMN])
    _reject_duplicates(frame)
    return frame[frame["score"].notna()].reset_index(drop=True)


def build_cube(frame: pd.DataFrame, order: Sequence[str] = ()) -> ScoreCube:
    """Dense cube from validated scores: queries sorted, systems sorted, metrics in reporting order, repeat
    labels sorted per metric."""
    query_ids = tuple(sorted(frame["query_id"].unique()))
    systems = tuple(sorted(frame["system"].unique()))
    metrics = metric_order(frame["metric"], order)
    if not systems:
        raise StatsInputError("no scores to analyse: no row has a score (a failed judgment has none)")
    q = pd.Index(query_ids).get_indexer(frame["query_id"])
    s = pd.Index(systems).get_indexer(frame["system"])
    m = pd.Index(metrics).get_indexer(frame["metric"])
    scores = frame["score"].to_numpy(dtype=np.float64)
    values = np.full((len(query_ids), len(systems), len(metrics)), np.nan)
    if REPEAT_COLUMN not in frame.columns:
        values[q, s, m] = scores
        return ScoreCube(query_ids, systems, metrics, values)
    labels = tuple(tuple(sorted(frame.loc[frame["metric"] == metric, REPEAT_COLUMN].unique().tolist()))
                   for metric in metrics)
    r = frame.groupby("metric")[REPEAT_COLUMN].rank(method="dense").to_numpy(dtype=np.intp) - 1
    repeats = np.full((*values.shape, max(len(labels_of) for labels_of in labels)), np.nan)
    repeats[q, s, m, r] = scores
    for index, labels_of in enumerate(labels):
        # a one-repeat metric keeps its scores as they are; a cell lacking a repeat stays NaN
        values[:, :, index] = repeats[:, :, index, : len(labels_of)].mean(axis=-1)
    return ScoreCube(query_ids, systems, metrics, values, repeats, labels)


def metric_order(metrics: pd.Series, order: Sequence[str] = ()) -> tuple[str, ...]:
    """The metrics named in `order` first, in that order (the pipeline passes the judge registry's display
    order: CCRS's CC, QR, ID, AC, IR first), then any others sorted by name, so the order (and with it
    the random streams) never depends on the order of the input rows."""
    seen = set(pd.unique(metrics))
    first = [metric for metric in dict.fromkeys(order) if metric in seen]
    return tuple(first + sorted(seen - set(first)))


def _key_column(frame: pd.DataFrame, column: str) -> pd.Series:
    values = frame[column]
    empty = values.isna() | (values.astype(str).str.strip() == "")
    if empty.any():
        raise StatsInputError(f"empty {column} in row(s) {_rows(empty)}")
    return values.astype(str)


def _numeric_scores(raw: pd.Series) -> pd.Series:
    """Scores as float64, NaN where empty (NaN, None, ""); anything else that is no number is an error."""
    text = raw.astype(str).str.strip()
    empty = raw.isna() | (text == "")
    numeric = pd.to_numeric(raw.where(~empty), errors="coerce")
    if raw.dtype == bool:
        numeric = pd.Series(np.nan, index=raw.index)
    not_numeric = numeric.isna() & ~empty
    if not_numeric.any():
        raise StatsInputError(f"non-numeric score in row(s) {_rows(not_numeric, raw)}")
    return numeric.astype(np.float64)


def _score_column(frame: pd.DataFrame) -> pd.Series:
    numeric = _numeric_scores(frame["score"])
    outside = numeric.notna() & ~numeric.between(0.0, 1.0)
    if outside.any():
        raise StatsInputError(f"score outside [0, 1] in row(s) {_rows(outside, numeric)}; scores on another "
                              "scale need it named (ccrs stats --scale MIN MAX, e.g. --scale 1 5)")
    return numeric


def _repeat_column(raw: pd.Series) -> pd.Series:
    """Repeat labels as int64: integers, integral floats (1.0) or digit strings (CSV); anything else, an
    empty value included, is an error naming the rows."""
    text = raw.astype(str).str.strip()
    numeric = pd.to_numeric(raw.where(~(raw.isna() | (text == ""))), errors="coerce").astype(np.float64)
    if raw.dtype == object:
        boolean = raw.map(lambda value: isinstance(value, (bool, np.bool_))).astype(bool)
    else:
        boolean = pd.Series(raw.dtype == bool, index=raw.index)
    bad = boolean | numeric.isna() | ~np.isfinite(numeric) | (numeric != np.round(numeric))
    if bad.any():
        raise StatsInputError(f"repeat must be an integer (which repeated judgment of the same query, system "
                              f"and metric a row is); not an integer in row(s) {_rows(bad, raw)}")
    return numeric.astype(np.int64)


def _reject_duplicates(frame: pd.DataFrame) -> None:
    keys = ["query_id", "system", "metric", *([REPEAT_COLUMN] if REPEAT_COLUMN in frame.columns else [])]
    duplicated = frame.duplicated(keys, keep=False)
    if duplicated.any():
        rows = frame.loc[duplicated, keys].drop_duplicates().head(_SHOWN)
        shown = ", ".join("(" + ", ".join(str(value) for value in row) + ")"
                          for row in rows.itertuples(index=False))
        raise StatsInputError(
            f"duplicate ({', '.join(keys)}) rows: {int(duplicated.sum())} rows, e.g. {shown}"
        )


def _rows(mask: pd.Series, values: pd.Series | None = None) -> str:
    """Row numbers (0-based, data rows) of a mask, with their values, at most _SHOWN quoted."""
    index = np.flatnonzero(mask.to_numpy())
    shown = [f"{i}" if values is None else f"{i} ({_plain(values.iloc[i])!r})" for i in index[:_SHOWN]]
    more = f" and {len(index) - _SHOWN} more" if len(index) > _SHOWN else ""
    return ", ".join(shown) + more + " (rows counted from 0, header excluded)"


def _plain(value):
    """numpy scalars as Python scalars, so that messages show 1.5 rather than np.float64(1.5)."""
    return value.item() if isinstance(value, np.generic) else value


ID_ALIASES = ("query_id", "question_id", "id")  # a per-question id column, as the evaluation tools name it
KEY_COLUMNS = ("system",)


def long_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """Long format (query_id, system, metric, score) from long or wide input: wide = one row per (question,
    system) with one column per metric (every column besides the id and `system`)."""
    if not isinstance(frame, pd.DataFrame):
        raise StatsInputError(f"scores must be a pandas DataFrame, got {type(frame).__name__}")
    ids = [name for name in ID_ALIASES if name in frame.columns]
    if not ids:
        raise StatsInputError(f"scores lack a question id column ({' | '.join(ID_ALIASES)}); found "
                              f"{list(frame.columns)}")
    frame = frame.rename(columns={ids[0]: "query_id"})
    if "system" not in frame.columns:
        raise StatsInputError(f"scores lack a system column; found {list(frame.columns)}")
    if {"metric", "score"} <= set(frame.columns):
        return frame
    keys = ["query_id", "system", *([REPEAT_COLUMN] if REPEAT_COLUMN in frame.columns else [])]
    metrics = [name for name in frame.columns if name not in (*keys, *ids[1:])]
    if not metrics:
        raise StatsInputError("scores have neither metric/score columns (long format) nor metric columns "
                              "(wide format: one column per metric beside query_id and system)")
    return frame.melt(id_vars=keys, value_vars=metrics, var_name="metric", value_name="score")


def rescale_scores(frame: pd.DataFrame, low: float, high: float) -> pd.DataFrame:
    """Scores on [low, high] (e.g. a 1-5 Likert mark) mapped linearly onto [0, 1]; a score outside the
    scale is an error naming the rows, never clipped. Empty scores stay empty."""
    if not high > low:
        raise StatsInputError(f"--scale needs MIN < MAX, got {low:g} {high:g}")
    frame = frame.copy()
    numeric = _numeric_scores(frame["score"])
    outside = numeric.notna() & ~numeric.between(low, high)
    if outside.any():
        raise StatsInputError(f"score outside the scale {low:g}-{high:g} in row(s) {_rows(outside, numeric)}")
    frame["score"] = (numeric - low) / (high - low)
    return frame


# --- one score per (question, system, metric) where repeats were judged
SAMPLE_KEYS = ("query_id", "system", "metric")


def mean_over_repeats(frame: pd.DataFrame, keys: Sequence[str] = SAMPLE_KEYS,
                      value: str = "score") -> pd.DataFrame:
    """`frame` (columns `keys`, `value` and perhaps `repeat`) with one row per `keys`: the mean `value` over
    its repeats, in the order the keys first appear; the frame itself when it has no repeat column."""
    if REPEAT_COLUMN not in frame.columns:
        return frame
    return (frame.groupby(list(keys), sort=False, dropna=False)[value].mean().reset_index())
