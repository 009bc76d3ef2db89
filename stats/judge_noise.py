"""Judge noise: what repeated judgments of the same (question, system) cell say about the judge.

Design: every question q is answered by every system s and each answer is judged n_r times (repeats r).
A repeat index means nothing across cells (repeat 1 of one answer shares nothing with repeat 1 of
another: each is a fresh draw from the judge), so repeats are nested in the crossed questions x systems
cells, r:(q x s), all effects random:

    y_qsr = mu + s_s + q_q + sq_qs + e_qsr

Variance components come from the ANOVA mean squares and their expectations (balanced design):

    E MS_residual = var_e
    E MS_sq       = var_e + n_r var_sq
    E MS_question = var_e + n_r var_sq + n_s n_r var_q
    E MS_system   = var_e + n_r var_sq + n_q n_r var_s

A negative estimate (sampling error around a component near 0) is reported as 0 and named in
`truncated`. The residual is the judge's noise: the spread of its verdicts on one and the same answer.

The judge's reliability is the generalizability coefficient (relative error) of the repeat-averaged
score of a cell for its system x question effect, with repeats as the facet generalized over:

    rho = var_sq / (var_sq + var_e / n_r)      (= 1 - MS_residual / MS_sq before truncation)

It is the share of the residual variance of the repeat-averaged questions x systems table (the noise
every HSD pair is judged against) that is real (a system does better on some questions than on others)
rather than judge noise. A judge with no noise has rho = 1 (defined so when var_e = 0).

The system means' CIs come from a two-level bootstrap (Davison & Hinkley 1997, section 3.8, the adjusted
strategy): questions are resampled, then the repeats within each resampled cell. Resampling both levels
as they are would count judge noise twice (a cell mean already carries it), so before the second level
the question effects and the system x question effects are shrunk to their estimated variance
components, and the cell's deviations from its mean are rescaled by sqrt(n_r / (n_r - 1)) so that the
resampled repeats have the judge's estimated variance. The components' and rho's CIs use the same
question draws with the repeats as judged (docs/judge-trust.md: coverage of both choices).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from stats.errors import StatsInputError
from stats.hsd import randomized_tukey_hsd_many

COMPONENTS = ("system", "question", "system_x_question", "residual")
_SYSTEM, _QUESTION, _SQ, _RESIDUAL = range(4)
_VALUES_PER_CHUNK = 4 * 2**20  # resampled scores held at once by the bootstrap (float64: 32 MiB)


@dataclass(frozen=True)
class AnovaEstimates:
    """Mean squares, degrees of freedom and ANOVA estimates (untruncated, possibly negative) of a design's
    `components`, in that order: what the crossed and the single-system designs share."""

    components: ClassVar[tuple[str, ...]]
    signal: ClassVar[str]  # the component whose share of a repeat-averaged score's variance is rho
    mean_squares: np.ndarray
    df: np.ndarray
    estimates: np.ndarray

    @property
    def variances(self) -> np.ndarray:
        """The estimates truncated at 0."""
        return np.maximum(self.estimates, 0.0)

    @property
    def truncated(self) -> tuple[str, ...]:
        """The components whose estimate fell below 0 (their variance is taken as 0)."""
        return tuple(name for name, value in zip(self.components, self.estimates) if value < 0.0)

    def reliability(self, n_repeats: int | None = None) -> float:
        """rho for the mean of n_repeats judgments (default: the pilot's own n_r, each design's field
        `n_repeats`): the `signal` component's share of that mean's variance, signal + residual / n_repeats
        (the residual is each design's last component)."""
        variances = self.variances
        signal = variances[..., self.components.index(self.signal)]
        return float(repeat_mean_reliability(signal, variances[..., -1], n_repeats or self.n_repeats))


@dataclass(frozen=True)
class VarianceComponents(AnovaEstimates):
    """The crossed design's AnovaEstimates, four of each in COMPONENTS order."""

    components: ClassVar[tuple[str, ...]] = COMPONENTS
    signal: ClassVar[str] = "system_x_question"
    n_questions: int
    n_systems: int
    n_repeats: int

    @property
    def residual_share(self) -> float:
        """The judge's noise as a share of a single judgment's variance (sum of the four components)."""
        return float(residual_share(self.variances))

    def residual_variance_of_means(self, n_repeats: int) -> float:
        """Residual variance of the questions x systems table of n_repeats-averaged scores (what the HSD
        judges every pair against): var_sq + var_e / n_repeats."""
        variances = self.variances
        return float(variances[_SQ] + variances[_RESIDUAL] / n_repeats)


@dataclass(frozen=True)
class TwoLevelBootstrap:
    """Percentile CIs from b resamples of the questions: the means' with the repeats resampled within each
    drawn cell (two levels), the components' and rho's with the repeats as judged."""

    means_low: np.ndarray  # (k,) system means of the repeat-averaged scores
    means_high: np.ndarray
    components_low: np.ndarray  # (4,) truncated components
    components_high: np.ndarray
    reliability_low: float
    reliability_high: float
    confidence: float
    b: int


@dataclass(frozen=True)
class VerdictStability:
    """HSD verdicts of every pair on the repeat-averaged scores and on each repeat alone."""

    significant: np.ndarray  # (k, k) bool, repeat-averaged
    per_repeat_significant: np.ndarray  # (n_r, k, k) bool
    per_repeat_p_values: np.ndarray  # (n_r, k, k)

    @property
    def flaky(self) -> np.ndarray:
        """(k, k) bool: the verdict of at least one repeat alone differs from the repeat-averaged one."""
        return (self.per_repeat_significant != self.significant[None]).any(axis=0)

    @property
    def stable_share(self) -> float:
        """Share of the k(k-1)/2 pairs whose verdict every single repeat reproduces."""
        upper = np.triu_indices(self.significant.shape[0], 1)
        return float(1.0 - self.flaky[upper].mean())


def variance_components(scores: np.ndarray) -> VarianceComponents:
    """ANOVA estimates of the r:(q x s) design from complete (n_questions, n_systems, n_repeats) scores."""
    y = checked_design(scores)
    n_q, n_s, n_r = y.shape
    mean_squares = _mean_squares(y)
    return VarianceComponents(mean_squares, _degrees_of_freedom(n_q, n_s, n_r),
                              _estimates(mean_squares, n_q, n_s, n_r), n_q, n_s, n_r)


def reliability(variances: np.ndarray, n_repeats: int) -> np.ndarray:
    """var_sq / (var_sq + var_e / n_repeats) over the last axis of (..., 4) truncated components; 1 where
    the judge has no noise."""
    variances = np.asarray(variances, dtype=np.float64)
    return repeat_mean_reliability(variances[..., _SQ], variances[..., _RESIDUAL], n_repeats)


def repeat_mean_reliability(signal: np.ndarray, residual: np.ndarray, n_repeats: int) -> np.ndarray:
    """signal / (signal + residual / n_repeats): the share of a repeat-averaged score's variance that is
    not the judge's noise; 1 where the judge has no noise."""
    noise = residual / n_repeats
    total = signal + noise
    return np.where(noise > 0.0, signal / np.where(total > 0.0, total, 1.0), 1.0)


def residual_share(variances: np.ndarray) -> np.ndarray:
    """var_e / (sum of the four components) over the last axis; 0 where every component is 0."""
    variances = np.asarray(variances, dtype=np.float64)
    total = variances.sum(axis=-1)
    return np.where(total > 0.0, variances[..., _RESIDUAL] / np.where(total > 0.0, total, 1.0), 0.0)


def two_level_bootstrap(scores: np.ndarray, b: int, rng: np.random.Generator,
                        confidence: float = 0.95) -> TwoLevelBootstrap:
    """Percentile CIs of the system means, the components and rho from b resamples of the questions.

    Each resample draws n_q questions with replacement. System means (two levels): each drawn question's
    cells are its shrunk cell means (system mean + d_q * question effect + d_sq * system x question
    effect, d_q^2 = 1 - MS_residual / MS_question, d_sq^2 = 1 - MS_residual / MS_sq, at least 0) plus
    the mean of n_r of the cell's own deviations drawn with replacement and rescaled by
    sqrt(n_r / (n_r - 1)): the shrunk cells carry the question and system x question components without
    judge noise, the resampled repeats add it back once. Components and rho: the drawn questions with
    their repeats as judged (a second level would add the within-cell sampling variability a second
    time: their CIs would over-cover, docs/judge-trust.md). Systems are not resampled: the CIs are for
    these systems.
    """
    y = checked_design(scores)
    if b < 1:
        raise StatsInputError(f"the number of resamples b must be at least 1, got {b}")
    if not 0.0 < confidence < 1.0:
        raise StatsInputError(f"confidence must lie in (0, 1), got {confidence}")
    n_q, n_s, n_r = y.shape
    draws = _RepeatDraws(*shrunk_cells(y))
    features = _question_features(y)
    chunk = max(1, min(b, _VALUES_PER_CHUNK // draws.values_per_resample))
    means, variances = np.empty((b, n_s)), np.empty((b, len(COMPONENTS)))
    for start in range(0, b, chunk):
        size = min(b, start + chunk) - start
        counts = _counts(rng.integers(0, n_q, size=(size, n_q), dtype=np.int32), n_q)
        # the drawn questions in index order (a sum does not depend on it): the second level's gathers
        # then sweep its table instead of jumping through it, several times faster at 4,719 questions
        questions = np.repeat(np.tile(np.arange(n_q, dtype=np.int32), size),
                              counts.ravel().astype(np.int64)).reshape(size, n_q)
        means[start : start + size] = draws.system_means(questions, rng)
        mean_squares = _weighted_mean_squares(counts @ features, n_q, n_s, n_r)
        variances[start : start + size] = np.maximum(_estimates(mean_squares, n_q, n_s, n_r), 0.0)
    tail = (1.0 - confidence) / 2.0 * 100.0
    bounds = [tail, 100.0 - tail]
    mean_low, mean_high = np.percentile(means, bounds, axis=0)
    component_low, component_high = np.percentile(variances, bounds, axis=0)
    reliability_low, reliability_high = np.percentile(reliability(variances, n_r), bounds)
    return TwoLevelBootstrap(mean_low, mean_high, component_low, component_high, float(reliability_low),
                             float(reliability_high), confidence, b)


def shrunk_cells(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n_q, n_s) cell means with the question and system x question effects shrunk to their components,
    and the (n_q, n_s, n_r) deviations from the cell means rescaled by sqrt(n_r / (n_r - 1))."""
    y = checked_design(scores)
    n_r = y.shape[2]
    cell = y.mean(axis=2)
    grand, question, system = cell.mean(), cell.mean(axis=1), cell.mean(axis=0)
    interaction = cell - question[:, None] - system[None, :] + grand
    mean_squares = _mean_squares(y)
    shrink_q = _shrinkage(mean_squares[_QUESTION], mean_squares[_RESIDUAL])
    shrink_sq = _shrinkage(mean_squares[_SQ], mean_squares[_RESIDUAL])
    shrunk = system[None, :] + shrink_q * (question - grand)[:, None] + shrink_sq * interaction
    return shrunk, (y - cell[:, :, None]) * np.sqrt(n_r / (n_r - 1))


class _RepeatDraws:
    """The second level: each drawn question's cells get the mean of n_r deviations drawn with
    replacement. With few repeats, every cell's n_r^n_r equally likely draws are tabulated (cell value
    + mean of the drawn deviations) and one small random integer per (drawn question, system) picks one;
    otherwise the n_r indices are drawn one by one."""

    def __init__(self, cells: np.ndarray, deviations: np.ndarray):
        self.cells, self.deviations = cells, deviations
        n_q, n_s, n_r = deviations.shape
        sequences = n_r**n_r
        self.tabulated = sequences <= 256 and n_q * n_s * sequences <= _VALUES_PER_CHUNK
        if self.tabulated:
            picks = np.array(list(itertools.product(range(n_r), repeat=n_r)))  # (n_r^n_r, n_r)
            drawn = deviations[:, :, picks].mean(axis=-1)  # (n_q, n_s, n_r^n_r)
            self.table = (cells[:, :, None] + drawn).ravel()
            self.outcomes = sequences
        self.values_per_resample = n_q * n_s * (1 if self.tabulated else n_r)

    def system_means(self, questions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(size, n_s) system means of the resamples whose drawn questions are `questions` (size, n_q)."""
        size, n_q = questions.shape
        n_s, n_r = self.deviations.shape[1:]
        systems = np.arange(n_s, dtype=np.int32)
        if self.tabulated:
            picks = rng.integers(0, self.outcomes, size=(size, n_q, n_s), dtype=np.int16)
            flat = (questions[:, :, None] * n_s + systems) * self.outcomes + picks
            return self.table[flat].sum(axis=1) / n_q
        picks = rng.integers(0, n_r, size=(size, n_q, n_s, n_r), dtype=np.int16)
        flat = (questions[:, :, None, None] * n_s + systems[:, None]) * n_r + picks
        noise = self.deviations.ravel()[flat].mean(axis=3)
        return (self.cells[questions] + noise).sum(axis=1) / n_q


def _question_features(y: np.ndarray) -> np.ndarray:
    """(n_q, n_s + 3) per-question sums from which the mean squares of any resample of the questions
    follow: the cell means (centred on the grand mean, against cancellation), the question mean, the
    squared question mean, the squared interaction within the question and the within-cell sum of
    squares."""
    cell = y.mean(axis=2)
    cell = cell - cell.mean()
    question = cell.mean(axis=1)
    within_question = ((cell - question[:, None]) ** 2).sum(axis=1)
    within_cell = ((y - y.mean(axis=2, keepdims=True)) ** 2).sum(axis=(1, 2))
    return np.column_stack([cell, question, question**2, within_question, within_cell])


def _counts(questions: np.ndarray, n_q: int) -> np.ndarray:
    """(size, n_q) float64 times each question was drawn in each resample."""
    size = len(questions)
    offsets = (np.arange(size, dtype=np.int64) * n_q)[:, None]
    return np.bincount((questions + offsets).ravel(), minlength=size * n_q).reshape(size, n_q).astype(
        np.float64)


def _weighted_mean_squares(sums: np.ndarray, n_q: int, n_s: int, n_r: int) -> np.ndarray:
    """(size, 4) mean squares of resamples from `counts @ _question_features` (size, n_s + 3)."""
    system = sums[:, :n_s] / n_q
    grand = sums[:, n_s] / n_q
    system_spread = ((system - grand[:, None]) ** 2).sum(axis=1)
    squares = np.column_stack([
        n_q * n_r * system_spread,
        n_s * n_r * (sums[:, n_s + 1] - n_q * grand**2),
        n_r * (sums[:, n_s + 2] - n_q * system_spread),
        sums[:, n_s + 3],
    ])
    return squares / _degrees_of_freedom(n_q, n_s, n_r)


def verdict_stability(scores: np.ndarray, averaged_p_values: np.ndarray, b: int, rng: np.random.Generator,
                      alpha: float) -> VerdictStability:
    """The randomized HSD (B = b, one set of permutations for all repeats) on each repeat alone, against
    the verdicts (p < alpha) of the repeat-averaged HSD's p-values."""
    y = checked_design(scores)
    averaged_p_values = np.asarray(averaged_p_values, dtype=np.float64)
    if averaged_p_values.shape != (y.shape[1], y.shape[1]):
        raise StatsInputError(f"averaged p-values must be ({y.shape[1]}, {y.shape[1]}), got "
                              f"{averaged_p_values.shape}")
    per_repeat = np.stack([result.p_values for result in randomized_tukey_hsd_many(y, b, rng)])
    return VerdictStability(averaged_p_values < alpha, per_repeat < alpha, per_repeat)


def checked_design(scores: np.ndarray) -> np.ndarray:
    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 3 or y.shape[0] < 2 or y.shape[1] < 2 or y.shape[2] < 2:
        raise StatsInputError(f"judge noise needs (n_questions >= 2, n_systems >= 2, n_repeats >= 2) "
                              f"scores, got shape {y.shape}")
    if not np.isfinite(y).all():
        raise StatsInputError("judge noise needs complete cells: the scores hold NaN or infinite values")
    return y


def _mean_squares(y: np.ndarray) -> np.ndarray:
    """(..., 4) mean squares of (..., n_q, n_s, n_r) scores, in COMPONENTS order."""
    n_q, n_s, n_r = y.shape[-3:]
    cell = y.mean(axis=-1)
    question, system = cell.mean(axis=-1), cell.mean(axis=-2)
    grand = question.mean(axis=-1)
    interaction = cell - question[..., :, None] - system[..., None, :] + grand[..., None, None]
    sums = np.stack([
        n_q * n_r * ((system - grand[..., None]) ** 2).sum(axis=-1),
        n_s * n_r * ((question - grand[..., None]) ** 2).sum(axis=-1),
        n_r * (interaction**2).sum(axis=(-2, -1)),
        ((y - cell[..., None]) ** 2).sum(axis=(-3, -2, -1)),
    ], axis=-1)
    return sums / _degrees_of_freedom(n_q, n_s, n_r)


def _degrees_of_freedom(n_q: int, n_s: int, n_r: int) -> np.ndarray:
    return np.array([n_s - 1, n_q - 1, (n_q - 1) * (n_s - 1), n_q * n_s * (n_r - 1)])


def _estimates(mean_squares: np.ndarray, n_q: int, n_s: int, n_r: int) -> np.ndarray:
    """(..., 4) components solved from the expected mean squares (untruncated)."""
    ms = np.asarray(mean_squares, dtype=np.float64)
    return np.stack([
        (ms[..., _SYSTEM] - ms[..., _SQ]) / (n_q * n_r),
        (ms[..., _QUESTION] - ms[..., _SQ]) / (n_s * n_r),
        (ms[..., _SQ] - ms[..., _RESIDUAL]) / n_r,
        ms[..., _RESIDUAL],
    ], axis=-1)


def _shrinkage(mean_square: float, residual_mean_square: float) -> float:
    """sqrt(1 - MS_residual / MS), at least 0: the factor that leaves an effect's spread without the
    judge noise its mean square carries."""
    if mean_square <= 0.0:
        return 0.0
    return float(np.sqrt(max(0.0, 1.0 - residual_mean_square / mean_square)))


# --- one system -------------------------------------------------------------------------------------------
# With one system the design is repeats nested in questions, y_qr = mu + q_q + e_qr (a system x question
# effect cannot be told from the question's): two components, and rho is the reliability of the question
# scores, var_q / (var_q + var_e / n_r), the share of the spread of the repeat-averaged question scores
# that is real rather than judge noise (the intraclass correlation of the repeat mean).

SINGLE_SYSTEM_COMPONENTS = ("question", "residual")


@dataclass(frozen=True)
class SingleSystemNoise(AnovaEstimates):
    """Judge noise of one system's (n_questions, n_repeats) scores: mean squares, degrees of freedom and
    estimates (untruncated) of SINGLE_SYSTEM_COMPONENTS, and the two-level bootstrap's percentile CIs of
    the system mean, the (truncated) components and rho."""

    components: ClassVar[tuple[str, ...]] = SINGLE_SYSTEM_COMPONENTS
    signal: ClassVar[str] = "question"
    n_questions: int
    n_repeats: int
    mean_low: float
    mean_high: float
    components_low: np.ndarray  # (2,)
    components_high: np.ndarray
    reliability_low: float
    reliability_high: float

    @property
    def residual_share(self) -> float:
        """The judge's noise as a share of a single judgment's variance (question + residual)."""
        question, residual = self.variances
        return float(residual / (question + residual)) if question + residual > 0.0 else 0.0


def single_system_noise(scores: np.ndarray, b: int, rng: np.random.Generator,
                        confidence: float = 0.95) -> SingleSystemNoise:
    """Components, rho and the two-level bootstrap CIs (as two_level_bootstrap: questions resampled, then
    each drawn question's rescaled deviations around its shrunk mean) of complete (n_questions >= 2,
    n_repeats >= 2) scores of one system."""
    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2 or not np.isfinite(y).all():
        raise StatsInputError(f"judge noise of one system needs complete (n_questions >= 2, n_repeats >= 2) "
                              f"scores, got shape {y.shape}")
    if b < 1:
        raise StatsInputError(f"the number of resamples b must be at least 1, got {b}")
    n_q, n_r = y.shape
    question_means = y.mean(axis=1)
    within = ((y - question_means[:, None]) ** 2).sum(axis=1)
    df = np.array([n_q - 1, n_q * (n_r - 1)])
    grand = question_means.mean()
    mean_squares = _single_system_mean_squares(np.ones((1, n_q)), question_means - grand, within, n_r, df)[0]
    estimates = _single_system_estimates(mean_squares, n_r)
    shrunk = grand + _shrinkage(mean_squares[0], mean_squares[1]) * (question_means - grand)
    draws = _RepeatDraws(shrunk[:, None], ((y - question_means[:, None]) * np.sqrt(n_r / (n_r - 1)))[:, None])
    chunk = max(1, min(b, _VALUES_PER_CHUNK // draws.values_per_resample))
    means, variances = np.empty(b), np.empty((b, 2))
    for start in range(0, b, chunk):
        size = min(b, start + chunk) - start
        counts = _counts(rng.integers(0, n_q, size=(size, n_q), dtype=np.int32), n_q)
        questions = np.repeat(np.tile(np.arange(n_q, dtype=np.int32), size),
                              counts.ravel().astype(np.int64)).reshape(size, n_q)
        means[start : start + size] = draws.system_means(questions, rng)[:, 0]
        drawn = _single_system_mean_squares(counts, question_means - grand, within, n_r, df)
        variances[start : start + size] = np.maximum(_single_system_estimates(drawn, n_r), 0.0)
    tail = (1.0 - confidence) / 2.0 * 100.0
    bounds = [tail, 100.0 - tail]
    mean_low, mean_high = np.percentile(means, bounds)
    components_low, components_high = np.percentile(variances, bounds, axis=0)
    reliability_low, reliability_high = np.percentile(_question_reliability(variances, n_r), bounds)
    return SingleSystemNoise(mean_squares, df, estimates, n_q, n_r, float(mean_low), float(mean_high),
                             components_low, components_high, float(reliability_low), float(reliability_high))


def _single_system_mean_squares(counts: np.ndarray, question_means: np.ndarray, within: np.ndarray, n_r: int,
                                df: np.ndarray) -> np.ndarray:
    """(size, 2) mean squares of the question resamples that draw each question `counts` (size, n_q) times."""
    n_q = counts.shape[1]
    grand = counts @ question_means / n_q
    squares = np.column_stack([n_r * (counts @ question_means**2 - n_q * grand**2), counts @ within])
    return squares / df


def _single_system_estimates(mean_squares: np.ndarray, n_r: int) -> np.ndarray:
    ms = np.asarray(mean_squares, dtype=np.float64)
    return np.stack([(ms[..., 0] - ms[..., 1]) / n_r, ms[..., 1]], axis=-1)


def _question_reliability(variances: np.ndarray, n_repeats: int) -> np.ndarray:
    """var_q / (var_q + var_e / n_repeats) over the last axis of (..., 2) truncated components; 1 where the
    judge has no noise."""
    variances = np.asarray(variances, dtype=np.float64)
    return repeat_mean_reliability(variances[..., 0], variances[..., 1], n_repeats)
