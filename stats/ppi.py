"""Prediction-powered inference (PPI++) of the mean human score from a few human labels and the LLM judge's
scores on every question (Angelopoulos, Duchi, Zrnic 2023, "PPI++: Efficient Prediction-Powered
Inference"; the original PPI: Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, Science 2023).

What it computes. With n human labels Y and the judge's scores f on the same n answers, and the judge's
scores on N further answers nobody labeled, the estimate of the mean human score is

    lam * mean(f_unlabeled) + mean(Y - lam * f_labeled),

unbiased for every fixed lam: the judge's bias is measured on the labeled set and subtracted. Its standard
error is sqrt(Var(Y - lam * f_labeled) / n + lam^2 * Var(f_unlabeled) / N), its interval the normal (z) one.
lam = 0 is the classical labels-only mean; lam = 1 is the original PPI; by default lam is PPI++'s
power-tuned value, which makes the interval no wider than the classical one up to estimation noise, and
narrower the better the judge tracks the humans. On top: the paired difference of two systems, the judge's
bias (human - judge) on the labeled set, and every system and pair of a matrix of scores with Holm-adjusted
p-values across the pairs.

Assumptions. The labeled answers are a uniform random sample of the answers (questions) the estimate is
about, drawn independently of the judge's scores and of the answers' content; the judge scored every
answer, labeled or not, in the same way. Labels and scores are on one numeric scale.

What it does not claim. It does not correct any single score or make the judge right; it says nothing of
the mean over answers outside the judged set. The interval is asymptotic (central limit theorem): with few
labels, or labels that are nearly all one value, its coverage can fall short, so below MIN_LABELS labels
ppi_pairwise claims no interval. It applies no finite-population correction (the judged questions are
treated as a sample), which makes it conservative for the judged set itself. A hand-picked labeled set
(the hard questions, one topic) voids it. The intervals of ppi_pairwise are each at 1 - alpha on their own;
only the pairs' p-values are adjusted for multiplicity.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from stats.errors import StatsInputError
from stats.multiple import holm_adjust, is_significant

MIN_LABELS = 10  # fewer labels for a system (or a pair): no interval claimed, a named gap


@dataclass(frozen=True)
class PPIEstimate:
    estimate: float
    se: float
    ci: tuple[float, float]     # normal interval at `confidence`
    confidence: float           # 1 - alpha
    lam: float                  # the power-tuning weight used (0: labels only)
    n_labeled: int
    n_unlabeled: int
    p_value: float              # two-sided, H0: mean = null
    null: float


@dataclass(frozen=True)
class BiasEstimate:
    mean: float                 # mean of human - judge on the labeled set (> 0: the judge scores low)
    se: float
    ci: tuple[float, float]     # Student t interval, n - 1 degrees of freedom
    confidence: float
    n: int


@dataclass(frozen=True)
class PairEstimate:
    system_a: str
    system_b: str
    difference: PPIEstimate     # of a - b, p-value against 0
    p_adjusted: float           # Holm across the pairs that have an estimate
    significant: bool           # stats.multiple.is_significant(p_adjusted, alpha)


@dataclass(frozen=True)
class PPIPairwise:
    systems: tuple[str, ...]
    means: dict[str, PPIEstimate]           # systems with at least MIN_LABELS labels
    pairs: tuple[PairEstimate, ...]         # a before b in `systems`' order
    too_few_labels: tuple[str, ...]         # systems with fewer than MIN_LABELS labels: no interval claimed
    pairs_too_few_labels: tuple[tuple[str, str], ...]  # pairs labeled together on fewer than MIN_LABELS
    alpha: float


def ppi_mean(labels, judged_labeled, judged_unlabeled, alpha: float = 0.05, lam: float | None = None,
             null: float = 0.0) -> PPIEstimate:
    """PPI++ estimate of the mean human score. `labels` and `judged_labeled`: the same n >= 2 answers;
    `judged_unlabeled`: the N other answers. lam None: the power-tuned lam. Fewer than 2 unlabeled scores
    (one cannot estimate its own variance): lam is 0 whatever was passed, the classical mean."""
    _check_alpha(alpha)
    y = _finite_1d(labels, "labels")
    f = _finite_1d(judged_labeled, "judged_labeled")
    f_unlabeled = _finite_1d(judged_unlabeled, "judged_unlabeled")
    if y.size != f.size:
        raise StatsInputError(f"labels and judged_labeled must have equal length, got {y.size} and {f.size}")
    if y.size < 2:
        raise StatsInputError(f"PPI needs at least 2 labels, got {y.size}")
    if lam is not None and not np.isfinite(lam):
        raise StatsInputError(f"lam must be a finite number, got {lam}")
    if f_unlabeled.size < 2:
        lam = 0.0
    elif lam is None:
        lam = power_tuned_lam(y, f, f_unlabeled)
    rectified = y - lam * f
    estimate = float(rectified.mean() + (lam * f_unlabeled.mean() if lam else 0.0))
    # ddof=1 (ppi_py's ppi_mean_ci takes np.std, ddof=0): the unbiased variance, as everywhere in stats/, so
    # lam = 0 is the textbook z-interval s / sqrt(n); it widens the se by sqrt(n / (n - 1)), 5% at the
    # 10-label floor where the normal approximation is weakest, and nothing asymptotically.
    variance = rectified.var(ddof=1) / y.size
    if lam:
        variance += lam**2 * f_unlabeled.var(ddof=1) / f_unlabeled.size
    return _normal_estimate(estimate, float(np.sqrt(variance)), alpha, float(lam), y.size,
                            f_unlabeled.size, null)


def power_tuned_lam(labels: np.ndarray, judged_labeled: np.ndarray, judged_unlabeled: np.ndarray) -> float:
    """PPI++'s variance-minimizing lam for the mean, Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1].

    The estimator of ppi_py's _calc_lam_glm (clip=True) for the mean: the covariance over the labeled
    pairs with ddof=0, Var(f) over all n + N judge scores with ddof=1 (np.cov), since f is known on every
    answer. A constant judge (Var(f) = 0) carries no information: lam 0."""
    n, big_n = labels.size, judged_unlabeled.size
    covariance = np.mean((labels - labels.mean()) * (judged_labeled - judged_labeled.mean()))
    judge_variance = np.concatenate([judged_labeled, judged_unlabeled]).var(ddof=1)
    if judge_variance <= 0.0:
        return 0.0
    return float(np.clip(covariance / ((1.0 + n / big_n) * judge_variance), 0.0, 1.0))


def ppi_paired_difference(labels_a, labels_b, judged_a_labeled, judged_b_labeled, judged_a_unlabeled,
                          judged_b_unlabeled, alpha: float = 0.05) -> PPIEstimate:
    """PPI++ estimate of the mean per-question difference a - b, p-value against 0. Labeled: the questions
    where both systems' answers were labeled; unlabeled: those where both were judged and not both labeled."""
    labels_a, labels_b = _same_length(labels_a, labels_b, "labels_a", "labels_b")
    judged_a_labeled, judged_b_labeled = _same_length(judged_a_labeled, judged_b_labeled,
                                                      "judged_a_labeled", "judged_b_labeled")
    judged_a_unlabeled, judged_b_unlabeled = _same_length(judged_a_unlabeled, judged_b_unlabeled,
                                                          "judged_a_unlabeled", "judged_b_unlabeled")
    return ppi_mean(labels_a - labels_b, judged_a_labeled - judged_b_labeled,
                    judged_a_unlabeled - judged_b_unlabeled, alpha=alpha, null=0.0)


def judge_bias(labels, judged_labeled, alpha: float = 0.05) -> BiasEstimate:
    """Mean of human - judge over the labeled answers with its Student t interval (n >= 2)."""
    _check_alpha(alpha)
    labels, judged_labeled = _same_length(labels, judged_labeled, "labels", "judged_labeled")
    differences = labels - judged_labeled
    n = differences.size
    if n < 2:
        raise StatsInputError(f"the judge's bias needs at least 2 labels, got {n}")
    mean = float(differences.mean())
    se = float(differences.std(ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf(1.0 - alpha / 2.0, n - 1)) * se
    return BiasEstimate(mean, se, (mean - half, mean + half), 1.0 - alpha, n)


def ppi_pairwise(labels, judged, systems: Sequence[str], alpha: float = 0.05) -> PPIPairwise:
    """Every system's PPI++ mean and every pair's paired difference, Holm across the pairs.

    `labels` and `judged`: (n_questions, n_systems); `labels` NaN where an answer was not labeled,
    `judged` finite everywhere. A system's labeled set is its labeled questions, the rest its unlabeled
    set; a pair's labeled set is the questions where both are labeled. Systems and pairs with fewer than
    MIN_LABELS labels get no estimate and are named instead; the Holm family is the pairs estimated."""
    labels, judged, systems = _checked_matrix(labels, judged, systems)
    _check_alpha(alpha)
    labeled = ~np.isnan(labels)
    means, too_few = {}, []
    for column, system in enumerate(systems):
        rows = labeled[:, column]
        if rows.sum() < MIN_LABELS:
            too_few.append(system)
            continue
        means[system] = ppi_mean(labels[rows, column], judged[rows, column], judged[~rows, column], alpha)
    differences, pair_names, pairs_too_few = [], [], []
    for a in range(len(systems)):
        for b in range(a + 1, len(systems)):
            rows = labeled[:, a] & labeled[:, b]
            if rows.sum() < MIN_LABELS:
                pairs_too_few.append((systems[a], systems[b]))
                continue
            differences.append(ppi_paired_difference(
                labels[rows, a], labels[rows, b], judged[rows, a], judged[rows, b], judged[~rows, a],
                judged[~rows, b], alpha))
            pair_names.append((systems[a], systems[b]))
    adjusted = holm_adjust([difference.p_value for difference in differences])
    pairs = tuple(PairEstimate(a, b, difference, float(p), is_significant(float(p), alpha))
                  for (a, b), difference, p in zip(pair_names, differences, adjusted))
    return PPIPairwise(systems, means, pairs, tuple(too_few), tuple(pairs_too_few), alpha)


def _normal_estimate(estimate: float, se: float, alpha: float, lam: float, n: int, big_n: int,
                     null: float) -> PPIEstimate:
    half = float(stats.norm.ppf(1.0 - alpha / 2.0)) * se
    if se > 0.0:
        p_value = float(2.0 * stats.norm.sf(abs(estimate - null) / se))
    else:  # every rectified value equal: the estimate is exact
        p_value = 1.0 if estimate == null else 0.0
    return PPIEstimate(estimate, se, (estimate - half, estimate + half), 1.0 - alpha, lam, n, big_n,
                       p_value, null)


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha must lie strictly between 0 and 1, got {alpha}")


def _finite_1d(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise StatsInputError(f"{name} must be 1-D, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise StatsInputError(f"{name} holds {int((~np.isfinite(array)).sum())} NaN or infinite values")
    return array


def _same_length(first, second, first_name: str, second_name: str) -> tuple[np.ndarray, np.ndarray]:
    first, second = _finite_1d(first, first_name), _finite_1d(second, second_name)
    if first.size != second.size:
        raise StatsInputError(f"{first_name} and {second_name} must have equal length, got {first.size} "
                              f"and {second.size}")
    return first, second


def _checked_matrix(labels, judged, systems: Sequence[str]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    labels = np.asarray(labels, dtype=np.float64)
    judged = np.asarray(judged, dtype=np.float64)
    systems = tuple(systems)
    if labels.ndim != 2 or labels.shape != judged.shape:
        raise StatsInputError(f"labels and judged must be 2-D (questions, systems) of one shape, got "
                              f"{labels.shape} and {judged.shape}")
    if len(systems) != labels.shape[1] or len(set(systems)) != len(systems):
        raise StatsInputError(f"systems must name each of the {labels.shape[1]} columns once, got {systems}")
    if not np.isfinite(judged).all():
        raise StatsInputError(f"judged must be finite on every (question, system); "
                              f"{int((~np.isfinite(judged)).sum())} are not")
    if np.isinf(labels).any():
        raise StatsInputError(f"labels hold {int(np.isinf(labels).sum())} infinite values (NaN marks "
                              f"an unlabeled answer)")
    return labels, judged, systems
