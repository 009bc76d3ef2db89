"""Active labeling: which answers a person labels, and the estimates valid under that choice (Zrnic and
Candes, "Active Statistical Inference", ICML 2024; docs/human-labels.md, "Active labeling (estimators)").

The design. Item i (a question: every system's answer of it is labeled together) is labeled with
probability pi_i, drawn xi_i ~ Bernoulli(pi_i) independently: proportional to the judge's uncertainty
u_i (e.g. the spread of its expected-mark distribution), rescaled so that the expected number of labels,
sum(pi), is the budget, and clipped to [floor, 1] with the mass the clipping moves handed to the others
(sampling_probabilities). The floor keeps every item drawable (without it an item the judge is sure of is
never labeled and the estimate cannot see the judge's error there) and bounds the weights 1 / pi, which is
what makes the anytime intervals possible at all (below). Where u_i is the sd of the residual y_i - g_i
given what the judge saw (a calibrated judge's expected-mark spread is), pi proportional to u minimises
the design variance sum(u^2 (1 / pi - 1)) for the budget, and the clipped rule minimises it within
[floor, 1] (Zrnic and Candes' optimal rule; Neyman allocation): the labels saved against uniform are then
at most about 1 - mean(u)^2 / mean(u^2), however the budget is spent.

The estimate. With the judge's scores f_i on all N items and a predictor g_i = lam * f_i + offset,

    Z_i = g_i + (xi_i / pi_i) (y_i - g_i),        estimate = mean(Z),

inverse-probability weighting of the labeled residuals: for a fixed (lam, offset) its expectation over the
draws is mean(y) exactly, whatever the judge's bias (the test enumerates the draws). lam is power-tuned as
PPI++ tunes it: (lam, offset) the least-squares fit of y on f over the labeled items weighted by
(1 - pi) / pi^2, which is the fit that minimises the design variance sum((y - g)^2 (1 - pi) / pi) / N^2
(estimated with the labels' inverse probabilities); lam is clipped to [0, 1] and is 0 below
stats.ppi.TUNE_LAM_FROM labels, as in stats/ppi.py. Under a uniform design (pi = n / N) the estimate is
PPI++'s, lam * mean(f) + mean over the labeled of (y - lam f), exactly: stats.ppi.ppi_mean with lam * N_u
/ N (N_u the unlabeled items). The standard error is sd(Z) / sqrt(N) x sqrt(n / (n - 1)), n the labels
(the paper's sd(Z) / sqrt(N), the variance of the mean human mark over the population of questions plus
the design's; the factor makes the uniform design's se PPI++'s, whose residual variance has ddof=1). The
interval is estimate +- t se with Kish's effective number of labels, (sum 1 / pi)^2 / sum 1 / pi^2, less
one as degrees of freedom (n under a uniform design; fewer the more the weights vary). Below MIN_ACTIVE_LABELS
labels no interval is claimed (StatsInputError). Measured by benchmarks/bench_active_labeling.py (its default
judge, 1,500 simulated data sets per cell, floors at a half and a quarter of the uniform rate, judge-human
correlations 0.3-0.9): every interval of the 4 means and 6 pair differences covered in at least 0.946 of the
data sets at 50 labels and 0.939 at the labels the decisions need, 0.946-0.971 on average, the uniform design
(PPI++) alike. Not everywhere: with its `reading` judge (nearly exact on most questions, uninformed on the
rest: heavy-tailed residuals) the coverage at 66-99 labels was 0.923-0.940 (means 0.935-0.946, uniform PPI++
0.931 at worst), about 0.4 point of it from lam tuned on the same labels (docs/human-labels.md; not corrected
yet). The old benchmark's 0.920 was the lowest of 180 readings from 300 data sets each (sd 0.013 a reading
at an exact 95%), not a bias. The t quantile with Kish's degrees of freedom is kept for small samples (at 50
labels: 0.946-0.971).

A pair of systems on the same questions: the same estimate on the per-question differences y_a - y_b,
predicted by f_a - f_b, one probability per question.

The anytime intervals. Labels arrive in the design's order: the items in a random order fixed before any
label, each drawn with its pi when its turn comes. The t-th item gives Z_t with g_t fitted on the labels
before it only (predictable), so E[Z_t | the past] is the population's mean human mark: the Z_t are a
sequence with a constant conditional mean, and a betting confidence sequence for that mean holds at every
look (stats/sequential.py, Waudby-Smith and Ramdas, in its `population` form). Its bounds come from the
floor: with labels and g on the scale [lo, hi] (width w) and pi >= floor, Z_t = g + (y - g) / pi lies in
[hi - w / floor, lo + w / floor]; Z is mapped linearly onto [-1, 1] and fed to
stats.sequential.confidence_sequence. The range grows as 1 / floor: a betting sequence on a wide range is
valid but slow to narrow (the bets that keep the capital positive are small), the price of a
nonasymptotic guarantee; the benchmark measures it. The other method, "asymptotic", is the asymptotic
confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas (Annals of Statistics 2024) on the
same Z_t: as wide as the spread of Z rather than its range, time-uniform as the number of items grows,
not at every size (measured; no interval before MIN_ACTIVE_LABELS labels). The family (pairs x metrics) is
Bonferroni, as in sequential judging: each sequence at alpha / family_size.

Decisions (decide_pairs, as stats/sequential.py's): "different" (the interval excludes 0), "equivalent"
(inside [-margin, margin]), otherwise "open".

Assumptions. The draws are independent Bernoulli(pi_i) with pi fixed before any label is seen (from the
judge's scores and uncertainty only); the order, for the anytime intervals, is random and fixed in
advance; labels and judge scores lie on the scale. What it does not claim: the fixed-n interval is a
large-sample one whose coverage was measured, not proven; no finite-population correction (conservative
for the N questions themselves); the anytime intervals are about the population mean, not the N
questions'.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from stats.errors import StatsInputError
from stats.ppi import TUNE_LAM_FROM, finite_array
from stats.sequential import DECISIONS, ZERO_TOLERANCE, confidence_sequence

MIN_ACTIVE_LABELS = 50  # fewer labels: no interval claimed (the smallest size whose coverage was measured)
UNIT_SCALE = (0.0, 1.0)  # labels and scores of a mean (`ccrs stats` maps every mark onto it)
DIFFERENCE_SCALE = (-1.0, 1.0)  # of a pair's per-question differences
METHODS = ("betting", "asymptotic")  # the anytime intervals: valid at every size / asymptotically
_BISECTIONS = 200

Scale = tuple[float, float]


@dataclass(frozen=True)
class SamplingRule:
    """How the probabilities were made: recorded with a run so that its labels can be weighted back."""

    kind: str                   # "proportional to uncertainty", or "uniform" where the uncertainty is flat
    budget: float               # expected labels, sum of the probabilities
    floor: float                # the floor asked for
    lowest: float               # the lowest probability given (>= floor)
    n_items: int

    def to_json(self) -> dict:
        return {"kind": self.kind, "budget": self.budget, "floor": self.floor, "lowest": self.lowest,
                "n_items": self.n_items}


@dataclass(frozen=True)
class SamplingDesign:
    probabilities: np.ndarray   # one per item, in [floor, 1], summing to the budget
    rule: SamplingRule


@dataclass(frozen=True)
class ActiveEstimate:
    estimate: float
    se: float
    ci: tuple[float, float]     # estimate +- t(n_labeled - 1) se
    confidence: float
    lam: float                  # the predictor's weight on the judge
    offset: float               # the predictor's intercept
    n_labeled: int
    n_items: int


@dataclass(frozen=True)
class ActiveBatch:
    """active_ppi_batch's results, one entry per data set (row); NaN intervals below MIN_ACTIVE_LABELS."""

    estimate: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    lam: np.ndarray
    offset: np.ndarray
    n_labeled: np.ndarray


@dataclass(frozen=True)
class ActiveSequence:
    """Anytime-valid intervals after each item of the design's order, per column."""

    lower: np.ndarray           # (items, columns)
    upper: np.ndarray
    labels_seen: np.ndarray     # (items,) or (items, columns): labels among the items so far
    alpha: float                # each column's level, alpha / family_size


def sampling_probabilities(uncertainty, budget: float, floor: float) -> SamplingDesign:
    """pi_i proportional to uncertainty_i, clipped to [floor, 1], summing to `budget` (expected labels).
    The scale is found by bisection; where even every uncertain item at 1 falls short of the budget, the
    items of zero uncertainty share the rest equally (above the floor)."""
    u = _finite(uncertainty, "uncertainty", 1)
    n = u.size
    _check_budget(budget, floor, n)
    if (u < 0.0).any():
        raise StatsInputError(f"uncertainty must be non-negative; {int((u < 0.0).sum())} values are not")
    if np.ptp(u) == 0.0:
        return _design(np.full(n, budget / n), "uniform", budget, floor)
    certain = u == 0.0
    reachable = np.count_nonzero(~certain) + floor * np.count_nonzero(certain)
    if reachable <= budget:
        probabilities = np.where(certain, (budget - np.count_nonzero(~certain)) / max(certain.sum(), 1), 1.0)
        return _design(probabilities, "proportional to uncertainty", budget, floor)
    low, high = 0.0, 1.0 / u[~certain].min()
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        if np.clip(middle * u, floor, 1.0).sum() < budget:
            low = middle
        else:
            high = middle
    return _design(np.clip(high * u, floor, 1.0), "proportional to uncertainty", budget, floor)


def draw_labeled(probabilities, rng: np.random.Generator) -> np.ndarray:
    """xi_i ~ Bernoulli(pi_i), independently: which items a person labels."""
    return rng.random(np.shape(probabilities)) < np.asarray(probabilities)


def active_ppi_batch(labels, judged, probabilities, alpha: float = 0.05, *, lam: float | None = None,
                     offset: float | None = None) -> ActiveBatch:
    """The IPW PPI++ estimate of every row's mean label. labels: (D, N), NaN where not drawn; judged:
    (D, N); probabilities: (D, N) or (N,). lam / offset None: fitted (module docstring)."""
    y, f, pi = _checked(labels, judged, probabilities)
    _check_alpha(alpha)
    labeled = ~np.isnan(y)
    n_labeled = labeled.sum(axis=1)
    lams, offsets = _fit_predictor(y, f, pi, labeled, n_labeled, lam, offset)
    g = lams[:, None] * f + offsets[:, None]
    z = g + np.where(labeled, (np.nan_to_num(y) - g) / pi, 0.0)
    estimate = z.mean(axis=1)
    # n / (n - 1): the residuals' variance from n labels, as PPI++'s ddof=1 (the uniform design's se is then
    # stats.ppi's); the population term takes it too, conservatively
    with np.errstate(divide="ignore", invalid="ignore"):
        se = z.std(axis=1, ddof=1) / np.sqrt(z.shape[1]) * np.sqrt(n_labeled / (n_labeled - 1.0))
    enough = n_labeled >= MIN_ACTIVE_LABELS
    half = stats.t.ppf(1.0 - alpha / 2.0, np.maximum(_effective_labels(pi, labeled) - 1.0, 1.0)) * se
    low, high = np.where(enough, estimate - half, np.nan), np.where(enough, estimate + half, np.nan)
    return ActiveBatch(estimate, se, low, high, lams, offsets, n_labeled)


def active_ppi_mean(labels, judged, probabilities, alpha: float = 0.05, *, lam: float | None = None,
                    offset: float | None = None) -> ActiveEstimate:
    """The IPW PPI++ estimate of the mean label of N items and its fixed-n interval. labels: (N,), NaN
    where the item was not drawn; judged: (N,) the judge's scores; probabilities: (N,) the design's."""
    arrays = [_finite_or_nan(values, name)[None, :] for values, name in (
        (labels, "labels"), (judged, "judged"), (probabilities, "probabilities"))]
    batch = active_ppi_batch(*arrays, alpha=alpha, lam=lam, offset=offset)
    n_labeled = int(batch.n_labeled[0])
    if n_labeled < MIN_ACTIVE_LABELS:
        raise StatsInputError(f"{n_labeled} labels: an active-design interval needs at least "
                              f"{MIN_ACTIVE_LABELS}")
    return ActiveEstimate(float(batch.estimate[0]), float(batch.se[0]), (float(batch.low[0]),
                          float(batch.high[0])), 1.0 - alpha, float(batch.lam[0]), float(batch.offset[0]),
                          n_labeled, arrays[0].shape[1])


def active_ppi_difference(labels_a, labels_b, judged_a, judged_b, probabilities, alpha: float = 0.05, *,
                          lam: float | None = None, offset: float | None = None) -> ActiveEstimate:
    """The IPW PPI++ estimate of the mean per-question difference a - b: each system's labels (NaN where
    the question was not drawn: a drawn question is labeled for both), one probability per question."""
    labels_a, labels_b = _finite_or_nan(labels_a, "labels_a"), _finite_or_nan(labels_b, "labels_b")
    if labels_a.shape != labels_b.shape or (np.isnan(labels_a) != np.isnan(labels_b)).any():
        raise StatsInputError("labels_a and labels_b must label the same questions: a drawn question is "
                              "labeled for both systems")
    judged_a, judged_b = _finite(judged_a, "judged_a", 1), _finite(judged_b, "judged_b", 1)
    if judged_a.shape != judged_b.shape:
        raise StatsInputError(f"judged_a and judged_b must have one length, got {judged_a.size} and "
                              f"{judged_b.size}")
    return active_ppi_mean(labels_a - labels_b, judged_a - judged_b, probabilities, alpha, lam=lam,
                           offset=offset)


def active_confidence_sequence(labels, judged, probabilities, *, floor, alpha: float = 0.05,
                               family_size: int = 1, scale: Scale = UNIT_SCALE,
                               method: str = "betting") -> ActiveSequence:
    """Anytime intervals of each column's population mean label, after each item.

    Rows: the items in the design's order. labels: (T, C), NaN where the item was not drawn; judged: (T, C);
    probabilities: (T,) or (T, C); floor: the design's lowest probability (scalar or one per column), fixed
    before labeling: it sets the range of Z. scale: the labels' (and the predictor's) range; a pair's
    differences: DIFFERENCE_SCALE. Each column is a sequence at alpha / family_size. method (METHODS):
    "betting", valid at every size (stats.sequential's betting sequence on Z mapped from its range);
    "asymptotic", the asymptotic confidence sequence of _asymptotic_sequence (no interval, the whole
    range, before MIN_ACTIVE_LABELS labels)."""
    y, f, pi = _checked(np.asarray(labels, dtype=np.float64).T, np.asarray(judged, dtype=np.float64).T,
                        np.asarray(probabilities, dtype=np.float64).T)
    _check_alpha(alpha)
    if not (isinstance(family_size, (int, np.integer)) and family_size >= 1):
        raise StatsInputError(f"family_size must be a positive integer, got {family_size!r}")
    if method not in METHODS:
        raise StatsInputError(f"method must be one of {METHODS}, got {method!r}")
    lo, hi = _checked_scale(scale, y)
    floors = np.broadcast_to(np.asarray(floor, dtype=np.float64), (y.shape[0],))
    if not ((floors > 0.0) & (floors <= 1.0)).all() or (pi < floors[:, None] - 1e-12).any():
        raise StatsInputError("floor must lie in (0, 1] and below every probability of its column")
    z = _predictable_z(y, f, pi, lo, hi)
    seen = np.cumsum(~np.isnan(y), axis=1)
    if method == "asymptotic":
        lower, upper = _asymptotic_sequence(z, alpha / family_size)
    else:
        lower, upper = _betting_sequence(z, floors, lo, hi, alpha / family_size)
    claimed = seen >= MIN_ACTIVE_LABELS if method == "asymptotic" else True  # before: no claim, the scale
    lower = np.where(claimed, np.clip(lower, lo, hi), lo)
    upper = np.where(claimed, np.clip(upper, lo, hi), hi)
    return ActiveSequence(lower.T, upper.T, seen.T, alpha / family_size)


def decide_pairs(lower, upper, margin: float) -> np.ndarray:
    """Per interval: "different" (excludes 0), "equivalent" (inside [-margin, margin]) or "open"."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if not (np.isfinite(margin) and margin > 0.0):
        raise StatsInputError(f"margin must be a positive number, got {margin!r}")
    different = (lower > ZERO_TOLERANCE) | (upper < -ZERO_TOLERANCE)
    equivalent = (lower >= -margin) & (upper <= margin)
    return np.where(different, DECISIONS[0], np.where(equivalent, DECISIONS[1], DECISIONS[2]))


def _effective_labels(pi: np.ndarray, labeled: np.ndarray) -> np.ndarray:
    """Kish's effective sample size of the labels' weights 1 / pi: n for equal weights, fewer the more they
    vary (a few heavy labels carry the estimate); the t quantile's degrees of freedom + 1."""
    weights = np.where(labeled, 1.0 / pi, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(weights.sum(axis=1) ** 2 / (weights**2).sum(axis=1))


def _fit_predictor(y, f, pi, labeled, n_labeled, lam, offset) -> tuple[np.ndarray, np.ndarray]:
    """(lam, offset) per row: given, or the (1 - pi) / pi^2-weighted least-squares fit on the labeled."""
    weights = np.where(labeled, (1.0 - pi) / pi**2, 0.0)
    total = weights.sum(axis=1)
    labels = np.nan_to_num(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        f_mean = (weights * f).sum(axis=1) / total
        y_mean = (weights * labels).sum(axis=1) / total
        covariance = (weights * (f - f_mean[:, None]) * (labels - y_mean[:, None])).sum(axis=1)
        variance = (weights * (f - f_mean[:, None]) ** 2).sum(axis=1)
        tuned = np.clip(np.nan_to_num(covariance / variance), 0.0, 1.0)
    if lam is not None:
        lams = np.full(y.shape[0], float(lam))
    else:
        lams = np.where((n_labeled >= TUNE_LAM_FROM) & (variance > 0.0), tuned, 0.0)
    if offset is not None:
        return lams, np.full(y.shape[0], float(offset))
    return lams, np.where(total > 0.0, np.nan_to_num(y_mean - lams * f_mean), 0.0)


def _predictable_z(y, f, pi, lo: float, hi: float) -> np.ndarray:
    """Z_t of every column (rows of y: columns; axis 1: time) with g_t fitted on the labels before t."""
    labeled = ~np.isnan(y)
    labels = np.nan_to_num(y)
    weights = np.where(labeled, (1.0 - pi) / pi**2, 0.0)

    def before(values: np.ndarray) -> np.ndarray:  # sums over the items before each t
        return np.cumsum(values, axis=1) - values

    total, count = before(weights), before(labeled.astype(np.float64))
    sum_f, sum_y = before(weights * f), before(weights * labels)
    sum_ff, sum_fy = before(weights * f * f), before(weights * f * labels)
    with np.errstate(divide="ignore", invalid="ignore"):
        f_mean, y_mean = sum_f / total, sum_y / total
        variance = sum_ff - total * f_mean**2
        lams = np.clip(np.nan_to_num((sum_fy - total * f_mean * y_mean) / variance), 0.0, 1.0)
        lams = np.where((count >= TUNE_LAM_FROM) & (variance > 1e-12 * total), lams, 0.0)
        offsets = np.where(total > 0.0, np.nan_to_num(y_mean - lams * f_mean), (lo + hi) / 2.0)
    g = np.clip(lams * f + offsets, lo, hi)
    return g + np.where(labeled, (labels - g) / pi, 0.0)


def _betting_sequence(z: np.ndarray, floors: np.ndarray, lo: float, hi: float,
                      alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """stats.sequential's betting sequence of each row of z, mapped onto [-1, 1] from the range the floor
    gives it: with labels and predictor on [lo, hi] and pi >= floor, z lies in [hi - w / floor,
    lo + w / floor], w = hi - lo."""
    bottom, top = hi - (hi - lo) / floors, lo + (hi - lo) / floors
    center, half = ((top + bottom) / 2.0)[:, None], ((top - bottom) / 2.0)[:, None]
    lower, upper = confidence_sequence(np.clip((z - center) / half, -1.0, 1.0).T, None, alpha)
    return center + half * lower.T, center + half * upper.T


def _asymptotic_sequence(z: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas
    ("Time-uniform central limit theory and asymptotic confidence sequences", Annals of Statistics 2024,
    their Theorem 2.2): mean_t +- sd_t sqrt(2 (t r^2 + 1) / (t^2 r^2) log(sqrt(t r^2 + 1) / alpha)), r
    tuned to be narrowest at t = the number of items (their recommended choice). Time-uniform coverage
    holds as t grows, not at every size: it was measured (benchmarks/bench_active_labeling.py)."""
    t = np.arange(1, z.shape[1] + 1, dtype=np.float64)
    mean = np.cumsum(z, axis=1) / t
    variance = np.maximum(np.cumsum(z**2, axis=1) / t - mean**2, 0.0)
    log_alpha = -2.0 * np.log(alpha)
    r2 = (log_alpha + np.log(log_alpha + 1.0)) / z.shape[1]
    half = np.sqrt(variance * 2.0 * (t * r2 + 1.0) / (t**2 * r2) * np.log(np.sqrt(t * r2 + 1.0) / alpha))
    return mean - half, mean + half


def _design(probabilities: np.ndarray, kind: str, budget: float, floor: float) -> SamplingDesign:
    rule = SamplingRule(kind, float(budget), float(floor), float(probabilities.min()), probabilities.size)
    return SamplingDesign(probabilities, rule)


def _checked(labels, judged, probabilities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = _finite_or_nan(labels, "labels", 2)
    f = _finite(judged, "judged", 2)
    if y.shape != f.shape:
        raise StatsInputError(f"labels and judged must have one shape, got {y.shape} and {f.shape}")
    pi = np.asarray(probabilities, dtype=np.float64)
    try:
        pi = np.broadcast_to(pi, y.shape)
    except ValueError:
        raise StatsInputError(f"probabilities of shape {pi.shape} do not match labels {y.shape}") from None
    if not ((pi > 0.0) & (pi <= 1.0)).all():
        raise StatsInputError("probabilities must lie in (0, 1]: an item that cannot be drawn has no weight")
    return y, f, pi


def _checked_scale(scale: Scale, y: np.ndarray) -> Scale:
    lo, hi = (float(value) for value in scale)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise StatsInputError(f"scale must be finite with low < high, got {scale}")
    if ((y < lo) | (y > hi)).any():
        raise StatsInputError(f"labels must lie on their scale [{lo:g}, {hi:g}]")
    return lo, hi


def _check_budget(budget: float, floor: float, n: int) -> None:
    if n < 1:
        raise StatsInputError("a design needs at least one item")
    if not (np.isfinite(floor) and 0.0 < floor <= 1.0):
        raise StatsInputError(f"floor must lie in (0, 1], got {floor!r}")
    if not (np.isfinite(budget) and floor * n <= budget <= n):
        raise StatsInputError(f"budget must lie between floor x items ({floor * n:g}) and the {n} items, "
                              f"got {budget!r}")


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha must lie strictly between 0 and 1, got {alpha}")


def _finite(values, name: str, ndim: int) -> np.ndarray:
    return finite_array(values, name, ndim, f"{ndim}-D")


def _finite_or_nan(values, name: str, ndim: int = 1) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise StatsInputError(f"{name} must be {ndim}-D, got shape {array.shape}")
    if np.isinf(array).any():
        raise StatsInputError(f"{name} holds infinite values (NaN marks an item not drawn)")
    return array
