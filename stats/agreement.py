"""Agreement between two judges on the same samples (GroUSE paper, Table 4): Spearman correlation for the
Likert metrics, three-class (0, 1, null) macro F1 for the nullable binary metrics.

A mark is a number or None (a null mark); inputs are sequences (or arrays, None read as NaN). Which
metrics are Likert and which binary is the caller's knowledge (the judge suite's), passed in.

Between several annotators (human labels, `ccrs label`): Krippendorff's alpha of a units x coders matrix
(`krippendorff_alpha`, interval or nominal), any number of coders, missing marks allowed.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from stats.errors import StatsInputError

NULL = "null"
Marks = Sequence[float | None]


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho over the pairs where both judges gave a mark; None where undefined (`note` says why)."""

    spearman: float | None
    n: int
    note: str | None = None

    def as_dict(self) -> dict:
        shown = {"spearman": self.spearman, "n": self.n}
        return shown if self.note is None else {**shown, "note": self.note}


@dataclass(frozen=True)
class MacroF1:
    """Three-class macro F1 (None without any label) and the F1 of each class present."""

    macro_f1: float | None
    n: int
    per_class: dict[str, float]

    def as_dict(self) -> dict:
        return {"macro_f1": self.macro_f1, "n": self.n, "per_class": dict(self.per_class)}


@dataclass(frozen=True)
class Agreement:
    """Per metric agreement of two judges on the samples both of them judged."""

    n_samples: int
    per_metric: dict[str, RankCorrelation | MacroF1]

    def as_dict(self) -> dict:
        return {"n_samples": self.n_samples, **{m: r.as_dict() for m, r in self.per_metric.items()}}


def spearman(a: Marks, b: Marks) -> RankCorrelation:
    """Spearman's rho over the pairs where both judges gave a mark (nulls dropped pairwise)."""
    x, y = _paired_floats(a, b)
    both = ~(np.isnan(x) | np.isnan(y))
    x, y = x[both], y[both]
    n = int(both.sum())
    if n < 2 or len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        return RankCorrelation(None, n, "fewer than two pairs or a constant side")
    rho = float(spearmanr(x, y).statistic)
    return RankCorrelation(None if math.isnan(rho) else rho, n)


def macro_f1(a: Marks, b: Marks) -> MacroF1:
    """Three-class macro F1 with `a` as the reference labels; the classes averaged are those present in
    either side (as scikit-learn does by default). F1 of a class is 0 when it has no true positive."""
    truth, pred = (_labels(marks) for marks in _paired_floats(a, b))
    classes = np.unique(np.concatenate([truth, pred]))
    if not len(classes):
        return MacroF1(None, 0, {})
    per_class = {str(cls): _f1(truth == cls, pred == cls) for cls in classes}
    return MacroF1(sum(per_class.values()) / len(classes), len(truth), per_class)


def agreement(
    a: Mapping[str, Mapping[str, float | None]],
    b: Mapping[str, Mapping[str, float | None]],
    likert_metrics: Sequence[str],
    binary_metrics: Sequence[str],
) -> Agreement:
    """a, b: {sample_id: {metric: mark or None}}; None is a null mark, a missing key a mark the judge
    could not give (left out). Each metric is compared on the samples where both judges hold it: Spearman
    for `likert_metrics`, macro F1 for `binary_metrics` (reported in that order)."""
    shared = sorted(set(a) & set(b))
    per_metric: dict[str, RankCorrelation | MacroF1] = {}
    for metric in (*likert_metrics, *binary_metrics):
        both = [s for s in shared if metric in a[s] and metric in b[s]]
        score = spearman if metric in likert_metrics else macro_f1
        per_metric[metric] = score([a[s][metric] for s in both], [b[s][metric] for s in both])
    return Agreement(len(shared), per_metric)


def _paired_floats(a: Marks, b: Marks) -> tuple[np.ndarray, np.ndarray]:
    """Both judges' marks as float arrays, NaN for a null mark; the two must mark the same samples."""
    if len(a) != len(b):
        raise ValueError("both judges must label the same samples")
    return np.array(a, dtype=float).reshape(-1), np.array(b, dtype=float).reshape(-1)


def _labels(marks: np.ndarray) -> np.ndarray:
    """Class labels: "null" for a null mark, else the integer mark as text ("0", "1")."""
    null = np.isnan(marks)
    return np.where(null, NULL, np.where(null, 0, marks).astype(np.int64).astype(str)).astype(str)


def _f1(truth: np.ndarray, pred: np.ndarray) -> float:
    tp = int(np.sum(truth & pred))
    fp = int(np.sum(~truth & pred))
    fn = int(np.sum(truth & ~pred))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


ALPHA_LEVELS = ("interval", "nominal")


@dataclass(frozen=True)
class KrippendorffAlpha:
    """Krippendorff's alpha over the pairable units (those with two or more marks); None where undefined
    (`note` says why). `n_units`: pairable units; `n_values`: the marks in them."""

    alpha: float | None
    level: str
    n_units: int
    n_values: int
    note: str | None = None

    def as_dict(self) -> dict:
        shown = {"alpha": self.alpha, "level": self.level, "n_units": self.n_units, "n_values": self.n_values}
        return shown if self.note is None else {**shown, "note": self.note}


def krippendorff_alpha(matrix: Sequence[Sequence[float | None]] | np.ndarray,
                       level: str = "interval") -> KrippendorffAlpha:
    """Krippendorff's alpha of a units x coders matrix of marks (NaN or None: no mark), for `level`
    "interval" (squared difference) or "nominal" (any difference counts 1), from the coincidence matrix
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"). Units with fewer than two marks are
    not pairable and left out; alpha is None with a note where no unit is pairable or the pairable marks
    do not vary (no disagreement is expected, 0/0)."""
    if level not in ALPHA_LEVELS:
        raise StatsInputError(f"level must be one of {ALPHA_LEVELS}, got {level!r}")
    marks = np.array(matrix, dtype=float)
    if marks.ndim != 2:
        raise StatsInputError(f"marks must be a units x coders matrix, got {marks.ndim} dimension(s)")
    if np.isinf(marks).any():
        raise StatsInputError("marks must be finite (NaN for a missing mark)")
    marks = marks[np.sum(~np.isnan(marks), axis=1) >= 2]
    n_values = int(np.sum(~np.isnan(marks)))
    if not len(marks):
        return KrippendorffAlpha(None, level, 0, 0, "no unit has marks of two or more coders")
    values, coded = np.unique(marks[~np.isnan(marks)], return_inverse=True)
    counts = np.zeros((len(marks), len(values)))  # units x values: how many coders gave each value
    np.add.at(counts, (np.nonzero(~np.isnan(marks))[0], coded), 1)
    pairs_per_unit = counts.sum(axis=1) - 1
    weighted = counts / pairs_per_unit[:, None]
    coincidence = counts.T @ weighted - np.diag(weighted.sum(axis=0))
    totals = coincidence.sum(axis=1)
    delta = ((values[:, None] - values[None, :]) ** 2 if level == "interval"
             else (values[:, None] != values[None, :]).astype(float))
    expected = totals @ delta @ totals
    if expected == 0:
        return KrippendorffAlpha(None, level, len(marks), n_values, "the marks do not vary: alpha is 0/0")
    observed = float(np.sum(coincidence * delta))
    return KrippendorffAlpha(1 - (n_values - 1) * observed / float(expected), level, len(marks), n_values)
