"""Prediction-powered inference (PPI++) of the mean human score from a few human labels and the LLM judge's
scores on every question (Angelopoulos, Duchi, Zrnic 2023, "PPI++: Efficient Prediction-Powered
Inference"; the original PPI: Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, Science 2023).

What it computes. With n human labels Y and the judge's scores f on the same n answers, and the judge's
scores on N further answers nobody labeled, the estimate of the mean human score is

    lam * mean(f_unlabeled) + mean(Y - lam * f_labeled),

unbiased for every fixed lam: the judge's bias is measured on the labeled set and subtracted. Its standard
error is sqrt(Var(Y - lam * f_labeled) / n + lam^2 * Var(f_unlabeled) / N). lam = 0 is the classical
labels-only mean; lam = 1 is the original PPI; PPI++'s power-tuned value makes the interval no wider than
the classical one up to estimation noise, and narrower the better the judge tracks the humans. On top: the
paired difference of two systems, the judge's bias (human - judge) on the labeled set, and every system
and pair of a matrix of scores with Holm-adjusted p-values across the pairs.

The interval (IntervalRule; measured by benchmarks/bench_ppi_coverage.py, docs/human-labels.md). PPI++ as
published (PUBLISHED: z, lam tuned on the same labels) covered 0.89 at 10 labels per system and let the Holm
decisions err in 16% of data sets. The default, SMALL_SAMPLE: the t(n - 1) quantile; lam 0 below
TUNE_LAM_FROM labels, where tuning it on the labels the interval is built from makes it too narrow; and,
given the labels' scale (bounds, [0, 1] for `ccrs stats`), the score interval of _score_interval (the
means whose own variance admits the estimate, as Wilson's interval for a proportion: labels crowded at an
end of the scale, a 0/1 metric of a good system, no longer get a too-narrow interval), and for labels all
one value inside the scale the exact bound of _constant_bound (no spread was seen: no zero width, no p = 0
but where every label contradicts the null). Without bounds, labels all one value are an error.

Assumptions. The labeled answers are a uniform random sample of the answers (questions) the estimate is
about, drawn independently of the judge's scores and of the answers' content; the judge scored every
answer, labeled or not, in the same way. Labels and scores are on one numeric scale.

What it does not claim. It does not correct any single score or make the judge right; it says nothing of
the mean over answers outside the judged set. The t and score intervals are still large-sample ones: their
coverage was measured (at least 0.93 from MIN_LABELS labels on in the simulated designs), not proven, and
below MIN_LABELS labels ppi_pairwise claims no interval. It applies no finite-population correction (the
judged questions are treated as a sample), which makes it conservative for the judged set itself. A
hand-picked labeled set (the hard questions, one topic) voids it. The intervals of ppi_pairwise are each at
1 - alpha on their own; only the pairs' p-values are adjusted for multiplicity.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from stats.errors import StatsInputError
from stats.multiple import holm_adjust, is_significant

MIN_LABELS = 10  # fewer labels for a system (or a pair): no interval claimed, a named gap
TUNE_LAM_FROM = 20  # fewer labels: lam is 0 (tuning it on the same few labels makes the interval too narrow)

Bounds = tuple[float, float]


@dataclass(frozen=True)
class IntervalRule:
    """How an estimate becomes an interval: the quantile and the label count from which lam is tuned."""

    quantile: Literal["t", "z"]   # t: Student t with n - 1 degrees of freedom (n labels); z: normal
    tune_lam_from: int            # below this many labels lam = 0 (the labels' own mean); from it, tuned
    use_scale: bool = True        # with the labels' bounds: _score_interval, and _constant_bound for labels
    #                               all one value inside the scale


# PPI++ as published (and this module before issue 45): z, lam always tuned, all-equal labels a point
PUBLISHED = IntervalRule("z", 2, use_scale=False)
SMALL_SAMPLE = IntervalRule("t", TUNE_LAM_FROM)  # the default, chosen by benchmarks/bench_ppi_coverage.py
SCORE_GRID = 1001  # candidate means on the scale where _score_interval starts its search
CONSTANT_TOLERANCE = 1e-9  # labels closer than this (relative) are all one value: (b + 0.1) - b is not exact


@dataclass(frozen=True)
class PPIEstimate:
    estimate: float
    se: float
    ci: tuple[float, float]     # at `confidence`, of the kind `interval` names
    confidence: float           # 1 - alpha
    lam: float                  # the power-tuning weight used (0: labels only)
    n_labeled: int
    n_unlabeled: int
    p_value: float              # two-sided, H0: mean = null
    null: float
    constant: bool = False      # every label the same value
    interval: str = "t"         # "t", "z", "constant" (_constant_bound) or "score" (_score_interval); for
    #                             the last two `se` is the interval's width / (2 quantile), not a moment


@dataclass(frozen=True)
class PPIBatch:
    """ppi_mean_batch's results, one entry per data set (row of its inputs)."""

    estimate: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    lam: np.ndarray
    p_value: np.ndarray
    constant: np.ndarray        # bool: the row's labels were all one value
    score: np.ndarray           # bool: its interval is _score_interval's (the labels' scale known and they
    #                             are not all one value inside it: that is _constant_bound's)

    def interval(self, row: int, rule: IntervalRule) -> str:
        if self.score[row]:
            return "score"
        return "constant" if self.constant[row] and rule.use_scale else rule.quantile


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
             null: float = 0.0, *, rule: IntervalRule = SMALL_SAMPLE, bounds: Bounds | None = None
             ) -> PPIEstimate:
    """PPI++ estimate of the mean human score. `labels` and `judged_labeled`: the same n >= 2 answers;
    `judged_unlabeled`: the N other answers. lam None: the power-tuned lam from rule.tune_lam_from labels
    on, 0 below. Fewer than 2 unlabeled scores (one cannot estimate its own variance): lam is 0 whatever
    was passed, the classical mean. `bounds`: the scale the labels lie on; with it the interval is
    _score_interval's (or _constant_bound's for labels all one value inside the scale), without it the t
    (z) one, and labels all one value are an error."""
    arrays = [_finite_1d(values, name)[None, :] for values, name in (
        (labels, "labels"), (judged_labeled, "judged_labeled"), (judged_unlabeled, "judged_unlabeled"))]
    batch = ppi_mean_batch(*arrays, alpha=alpha, lam=lam, null=null, rule=rule, bounds=bounds)
    ci = (float(batch.low[0]), float(batch.high[0]))
    return PPIEstimate(float(batch.estimate[0]), float(batch.se[0]), ci, 1.0 - alpha, float(batch.lam[0]),
                       arrays[0].shape[1], arrays[2].shape[1], float(batch.p_value[0]), null,
                       bool(batch.constant[0]), batch.interval(0, rule))


def ppi_mean_batch(labels, judged_labeled, judged_unlabeled, alpha: float = 0.05, *, lam: float | None = None,
                   null: float = 0.0, rule: IntervalRule = SMALL_SAMPLE, bounds: Bounds | None = None
                   ) -> PPIBatch:
    """ppi_mean on D data sets at once: `labels`, `judged_labeled` (D, n), `judged_unlabeled` (D, N)."""
    _check_alpha(alpha)
    y, f, f_unlabeled = (_finite_2d(values, name) for values, name in (
        (labels, "labels"), (judged_labeled, "judged_labeled"), (judged_unlabeled, "judged_unlabeled")))
    if y.shape[1] != f.shape[1]:
        raise StatsInputError(f"labels and judged_labeled must have equal length, got {y.shape[1]} and "
                              f"{f.shape[1]}")
    if not y.shape[0] == f.shape[0] == f_unlabeled.shape[0]:
        raise StatsInputError(f"labels, judged_labeled and judged_unlabeled must hold as many data sets, got "
                              f"{y.shape[0]}, {f.shape[0]} and {f_unlabeled.shape[0]}")
    n = y.shape[1]
    if n < 2:
        raise StatsInputError(f"PPI needs at least 2 labels, got {n}")
    if lam is not None and not np.isfinite(lam):
        raise StatsInputError(f"lam must be a finite number, got {lam}")
    if bounds is not None:
        bounds = _labels_within(y, bounds)
    constant = np.ptp(y, axis=1) <= CONSTANT_TOLERANCE * np.maximum(1.0, np.abs(y).max(axis=1))
    lams = np.where(constant, 0.0, _lams(y, f, f_unlabeled, lam, rule))
    estimate, variance = _estimate_and_variance(y, f, f_unlabeled, lams)
    exact = (variance <= 0.0) & ~constant  # only with a given lam: y - lam f and the judge constant
    if exact.any():  # the labels vary, so the labels-only variance does not vanish
        lams = np.where(exact, 0.0, lams)
        estimate, variance = _estimate_and_variance(y, f, f_unlabeled, lams)
    return _intervals(y, f, f_unlabeled, lams, estimate, np.sqrt(variance), constant, alpha, null, rule,
                      bounds)


def _intervals(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray, lams: np.ndarray, estimate: np.ndarray,
               se: np.ndarray, constant: np.ndarray, alpha: float, null: float, rule: IntervalRule,
               bounds: Bounds | None) -> PPIBatch:
    """Each row's interval and p-value: t (z) from the se; with the scale, the score interval, or the exact
    bound for labels all one value inside it."""
    n, q = y.shape[1], _quantile(rule, alpha, y.shape[1])
    low, high, p_value = estimate - q * se, estimate + q * se, _p_value(estimate, se, null, rule, n)
    score = np.zeros_like(constant)
    if rule.use_scale and bounds is not None:
        at_end = np.isclose(estimate, bounds[0], rtol=0.0, atol=CONSTANT_TOLERANCE) | np.isclose(
            estimate, bounds[1], rtol=0.0, atol=CONSTANT_TOLERANCE)
        score = ~constant | at_end
        if score.any():
            _put(score, (low, high, p_value), _score_interval(
                y[score], f[score], f_unlabeled[score], lams[score], estimate[score], constant[score], bounds,
                q, null, rule))
    inside = constant & ~score
    if rule.use_scale and inside.any():
        _put(inside, (low, high, p_value), _constant_bound(estimate[inside], n, alpha, null, bounds))
    se = np.where(inside | score, (high - low) / (2.0 * q), se)
    return PPIBatch(estimate, se, low, high, lams, p_value, constant, score)


def _put(rows: np.ndarray, targets: tuple[np.ndarray, ...], values: tuple[np.ndarray, ...]) -> None:
    for target, value in zip(targets, values):
        target[rows] = value


def power_tuned_lam(labels: np.ndarray, judged_labeled: np.ndarray, judged_unlabeled: np.ndarray) -> float:
    """PPI++'s variance-minimizing lam for the mean, Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1].

    The estimator of ppi_py's _calc_lam_glm (clip=True) for the mean: the covariance over the labeled
    pairs with ddof=0, Var(f) over all n + N judge scores with ddof=1 (np.cov), since f is known on every
    answer. A constant judge (Var(f) = 0) carries no information: lam 0."""
    return float(_tuned_lams(*(np.asarray(values, dtype=np.float64)[None, :] for values in (
        labels, judged_labeled, judged_unlabeled)))[0])


def ppi_paired_difference(labels_a, labels_b, judged_a_labeled, judged_b_labeled, judged_a_unlabeled,
                          judged_b_unlabeled, alpha: float = 0.05, *, rule: IntervalRule = SMALL_SAMPLE,
                          bounds: Bounds | None = None) -> PPIEstimate:
    """PPI++ estimate of the mean per-question difference a - b, p-value against 0. Labeled: the questions
    where both systems' answers were labeled; unlabeled: those where both were judged and not both labeled.
    `bounds`: the scale of each system's labels; the differences lie on (low - high, high - low)."""
    labels_a, labels_b = _same_length(labels_a, labels_b, "labels_a", "labels_b")
    judged_a_labeled, judged_b_labeled = _same_length(judged_a_labeled, judged_b_labeled,
                                                      "judged_a_labeled", "judged_b_labeled")
    judged_a_unlabeled, judged_b_unlabeled = _same_length(judged_a_unlabeled, judged_b_unlabeled,
                                                          "judged_a_unlabeled", "judged_b_unlabeled")
    return ppi_mean(labels_a - labels_b, judged_a_labeled - judged_b_labeled,
                    judged_a_unlabeled - judged_b_unlabeled, alpha=alpha, null=0.0, rule=rule,
                    bounds=_difference_bounds(bounds))


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


def ppi_pairwise(labels, judged, systems: Sequence[str], alpha: float = 0.05, *,
                 rule: IntervalRule = SMALL_SAMPLE, bounds: Bounds | None = None) -> PPIPairwise:
    """Every system's PPI++ mean and every pair's paired difference, Holm across the pairs.

    `labels` and `judged`: (n_questions, n_systems); `labels` NaN where an answer was not labeled,
    `judged` finite everywhere. A system's labeled set is its labeled questions, the rest its unlabeled
    set; a pair's labeled set is the questions where both are labeled. Systems and pairs with fewer than
    MIN_LABELS labels get no estimate and are named instead; the Holm family is the pairs estimated.
    `bounds`: the labels' scale (ppi_mean), needed where a system's labels or a pair's differences are
    all one value."""
    labels, judged, systems = _checked_matrix(labels, judged, systems)
    _check_alpha(alpha)
    labeled = ~np.isnan(labels)
    means, too_few = {}, []
    for column, system in enumerate(systems):
        rows = labeled[:, column]
        if rows.sum() < MIN_LABELS:
            too_few.append(system)
            continue
        means[system] = ppi_mean(labels[rows, column], judged[rows, column], judged[~rows, column], alpha,
                                 rule=rule, bounds=bounds)
    differences, pair_names, pairs_too_few = [], [], []
    for a in range(len(systems)):
        for b in range(a + 1, len(systems)):
            rows = labeled[:, a] & labeled[:, b]
            if rows.sum() < MIN_LABELS:
                pairs_too_few.append((systems[a], systems[b]))
                continue
            differences.append(ppi_paired_difference(
                labels[rows, a], labels[rows, b], judged[rows, a], judged[rows, b], judged[~rows, a],
                judged[~rows, b], alpha, rule=rule, bounds=bounds))
            pair_names.append((systems[a], systems[b]))
    adjusted = holm_adjust([difference.p_value for difference in differences])
    pairs = tuple(PairEstimate(a, b, difference, float(p), is_significant(float(p), alpha))
                  for (a, b), difference, p in zip(pair_names, differences, adjusted))
    return PPIPairwise(systems, means, pairs, tuple(too_few), tuple(pairs_too_few), alpha)


def _lams(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray, lam: float | None,
          rule: IntervalRule) -> np.ndarray:
    if f_unlabeled.shape[1] < 2:
        return np.zeros(y.shape[0])
    if lam is not None:
        return np.full(y.shape[0], float(lam))
    if y.shape[1] < rule.tune_lam_from:
        return np.zeros(y.shape[0])
    return _tuned_lams(y, f, f_unlabeled)


def _tuned_lams(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray) -> np.ndarray:
    """power_tuned_lam of each row."""
    n, big_n = y.shape[1], f_unlabeled.shape[1]
    covariance = np.mean((y - y.mean(axis=1, keepdims=True)) * (f - f.mean(axis=1, keepdims=True)), axis=1)
    judge_variance = np.concatenate([f, f_unlabeled], axis=1).var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lams = np.clip(covariance / ((1.0 + n / big_n) * judge_variance), 0.0, 1.0)
    return np.where(judge_variance > 0.0, lams, 0.0)


def _estimate_and_variance(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray,
                           lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # ddof=1 (ppi_py's ppi_mean_ci takes np.std, ddof=0): the unbiased variance, as everywhere in stats/, so
    # lam = 0 is the textbook interval s / sqrt(n)
    rectified = y - lams[:, None] * f
    estimate = rectified.mean(axis=1)
    variance = rectified.var(axis=1, ddof=1) / y.shape[1]
    if f_unlabeled.shape[1] >= 2:  # otherwise lam is 0
        estimate = estimate + lams * f_unlabeled.mean(axis=1)
        variance = variance + lams**2 * f_unlabeled.var(axis=1, ddof=1) / f_unlabeled.shape[1]
    return estimate, variance


def _quantile(rule: IntervalRule, alpha: float, n: int) -> float:
    if rule.quantile == "t":
        return float(stats.t.ppf(1.0 - alpha / 2.0, n - 1))
    return float(stats.norm.ppf(1.0 - alpha / 2.0))


def _p_value(estimate: np.ndarray, se: np.ndarray, null: float, rule: IntervalRule, n: int) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.abs(estimate - null) / se
    p_value = 2.0 * (stats.t.sf(statistic, n - 1) if rule.quantile == "t" else stats.norm.sf(statistic))
    return np.where(se > 0.0, p_value, np.where(estimate == null, 1.0, 0.0))  # se 0: the published PPI++


def _constant_bound(values: np.ndarray, n: int, alpha: float, null: float,
                    bounds: Bounds | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, p-value) for n labels all equal to c (one c per row), from nothing but the scale.

    No spread was seen, so no standard error can be estimated; what n equal labels do say is that the
    share s of answers whose label differs from c is small: s <= 1 - alpha^(1/n) at 1 - alpha (the exact
    one-sided Clopper-Pearson bound for 0 of n; ~3/n at 95%, the rule of three). Those answers lie on the
    scale, so the mean lies in [c - s (c - low), c + s (high - c)]: an interval that holds for every
    distribution on the scale. Its p-value against `null` is the chance of n equal labels at the least
    favourable share, (1 - r)^n with r = |c - null| / (c - low) or (high - c) on null's side: below alpha
    exactly when null is outside the interval, 0 only where null is the scale's far end."""
    if bounds is None:
        raise StatsInputError(f"{n} labels are all {float(values[0]):g}: an honest interval needs their "
                              f"scale (bounds=(low, high)), which was not given")
    low, high = bounds
    share = 1.0 - alpha ** (1.0 / n)
    below, above = values - low, high - values
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = np.where(null < values, (values - null) / below, (null - values) / above)
    p_value = np.where(null == values, 1.0, (1.0 - np.clip(np.nan_to_num(reach, nan=1.0), 0.0, 1.0)) ** n)
    return values - share * below, values + share * above, p_value


def _score_interval(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray, lams: np.ndarray,
                    estimate: np.ndarray, constant: np.ndarray, bounds: Bounds, q: float, null: float,
                    rule: IntervalRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, p-value) of labels on a known scale [low, high]: the candidate means m whose own variance
    admits the estimate, (estimate - m)^2 <= q^2 V(m), as Wilson's interval does for a proportion.

    Why: near an end of the scale the labels' sample variance is small exactly when the estimate lies too
    close to that end (most labels at the top), so estimate +- q se covers too little there (a 0/1 metric
    of a good system: 0.63 at 10 labels with the published z interval). V(m) takes the labels' variance at
    m rather than at the estimate: kappa (m - low)(high - m), the quasi-binomial variance, kappa the
    labels' variance over (estimate - low)(high - estimate) (1 for labels all at one end: Wilson's
    interval; about 1 for 0/1 labels; below 1 for marks spread inside the scale, where the interval is
    then close to the t one). With lam, the PPI++ variance at m: (kappa v - 2 lam rho sd_f sqrt(kappa v) +
    lam^2 Var(f)) / n + lam^2 Var(f_unlabeled) / N, rho the labeled correlation of labels and judge."""
    n, low, high = y.shape[1], *bounds
    mean = y.mean(axis=1)
    judge_sd = f.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # all-equal labels, a constant judge: 0 / 0
        kappa = np.where(constant, 1.0, y.var(axis=1, ddof=1) / ((mean - low) * (high - mean)))
        rho = np.mean((y - mean[:, None]) * (f - f.mean(axis=1, keepdims=True)), axis=1) * n / (n - 1) / (
            y.std(axis=1, ddof=1) * judge_sd)
    tilt = np.nan_to_num(2.0 * lams * rho * judge_sd)[:, None]  # lam is 0 where rho is undefined
    judge_term = (lams**2 * judge_sd**2)[:, None] / n
    if f_unlabeled.shape[1] >= 2:
        judge_term = judge_term + (lams**2 * f_unlabeled.var(axis=1, ddof=1))[:, None] / f_unlabeled.shape[1]

    def variance(means: np.ndarray) -> np.ndarray:  # (rows, k) candidate means -> their variance
        spread = kappa[:, None] * np.clip((means - low) * (high - means), 0.0, None)
        return (spread - tilt * np.sqrt(spread)) / n + judge_term

    def admitted(means: np.ndarray) -> np.ndarray:
        return (estimate[:, None] - means) ** 2 <= q**2 * variance(means)

    grid = np.broadcast_to(np.linspace(low, high, SCORE_GRID), (y.shape[0], SCORE_GRID))
    inside = admitted(grid)  # and the estimate, always (V >= 0): a narrow interval may hold no grid point
    lowest = np.minimum(np.where(inside, grid, np.inf).min(axis=1), estimate)
    highest = np.maximum(np.where(inside, grid, -np.inf).max(axis=1), estimate)
    at_null = np.clip(variance(np.full((y.shape[0], 1), null)), 0.0, None)[:, 0]
    return (_edge(admitted, lowest, low, high, downward=True),
            _edge(admitted, highest, low, high, downward=False),
            _p_value(estimate, np.sqrt(at_null), null, rule, n))


def _edge(admitted, inner: np.ndarray, low: float, high: float, downward: bool) -> np.ndarray:
    """Where the admitted means end beyond `inner` (admitted), toward `low` (downward) or `high`: bisection
    between inner and the next grid point outward (not admitted); the outer side is returned, a hair wide
    and never narrow. No grid point outward: the scale's end."""
    step = (high - low) / (SCORE_GRID - 1)
    index = np.ceil((inner - low) / step) - 1.0 if downward else np.floor((inner - low) / step) + 1.0
    at_end = (index < 0) | (index > SCORE_GRID - 1)
    good, bad = inner, low + np.clip(index, 0, SCORE_GRID - 1) * step
    for _ in range(40):
        middle = (good + bad) / 2.0
        ok = admitted(middle[:, None])[:, 0]
        good, bad = np.where(ok, middle, good), np.where(ok, bad, middle)
    return np.where(at_end, low if downward else high, bad)


def _checked_bounds(bounds: Bounds) -> tuple[float, float]:
    low, high = (float(value) for value in bounds)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise StatsInputError(f"bounds must be finite with low < high, got {bounds}")
    return low, high


def _labels_within(y: np.ndarray, bounds: Bounds) -> Bounds:
    low, high = _checked_bounds(bounds)
    outside = (y < low) | (y > high)
    if outside.any():
        raise StatsInputError(f"{int(outside.sum())} label(s) lie outside their scale [{low:g}, {high:g}], "
                              f"e.g. {float(y[outside][0]):g}")
    return low, high


def _difference_bounds(bounds: Bounds | None) -> Bounds | None:
    if bounds is None:
        return None
    low, high = _checked_bounds(bounds)
    return low - high, high - low


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha must lie strictly between 0 and 1, got {alpha}")


def _finite_1d(values, name: str) -> np.ndarray:
    return finite_array(values, name, 1, "1-D")


def _finite_2d(values, name: str) -> np.ndarray:
    return finite_array(values, name, 2, "2-D (data sets, answers)")


def finite_array(values, name: str, ndim: int, shape: str) -> np.ndarray:
    """`values` as a float array of `ndim` dimensions with no NaN or infinite value (else StatsInputError)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise StatsInputError(f"{name} must be {shape}, got shape {array.shape}")
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
