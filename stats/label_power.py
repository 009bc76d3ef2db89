"""How many human labels PPI++ needs (stats/ppi.py): per system for a CI half-width of its mean, per pair
of systems for a detectable paired difference, from the judge-human correlation of a pilot; checked by
simulating the PPI++ estimator itself (docs/planning.md, `ccrs plan labels`).

The model. n labeled answers out of n_total judged (N = n_total - n unlabeled), labels Y with sd sigma_y,
judge scores f with sd sigma_f and correlation rho. PPI++ with lam power-tuned and clipped to [0, 1] as
stats.ppi does has variance

    Var(lam) = (sigma_y^2 - 2 lam c + lam^2 sigma_f^2) / n + lam^2 sigma_f^2 / N,   c = rho sigma_y sigma_f,

minimized at lam = c / ((1 + n/N) sigma_f^2); unclipped, Var = sigma_y^2 (1 - rho^2 N / (n + N)) / n,
the labels-only variance sigma_y^2 / n at rho = 0. n_total None: the run's unlabeled answers far
outnumber the labels (N / (n + N) -> 1). A pair is planned on its per-question differences (labels of
both systems on the same questions), its z-test at alpha / n_pairs: Holm rejects every pair whose
p-value is below alpha / n_pairs (its first and strictest step), so the power computed there is a lower
bound on the pair's power under Holm. The normal approximation is the estimator's own; at least
MIN_LABELS labels are always asked for (below it `ccrs stats` claims no interval)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from stats.errors import StatsInputError
from stats.ppi import MIN_LABELS, ppi_mean, ppi_paired_difference

ASSUMED_RHOS = (0.0, 0.5, 0.7, 0.9)  # the table shown without labels; 0 is labels only
SIM_UNLABELED_PER_LABEL = 100  # n_total None: a simulated data set has this many unlabeled answers per label


@dataclass(frozen=True)
class PilotMoments:
    sigma_y: float      # sd of the human labels (ddof=1)
    sigma_f: float      # sd of the judge's scores on the same answers (ddof=1)
    rho: float          # their correlation (0 where either is constant)
    n_pilot: int        # labeled pilot answers behind the figures (0: assumed, not estimated)

    @property
    def covariance(self) -> float:
        return self.rho * self.sigma_y * self.sigma_f


@dataclass(frozen=True)
class LabelRequirement:
    n_labels: int | None        # labels needed (per system, or per pair: questions both are labeled on)
    labels_only: int | None     # the same target without the judge (rho = 0, the classical mean)
    reachable: bool             # False: even n_total labels miss the target (n_labels None)
    se: float                   # the PPI++ standard error at n_labels (at n_total where unreachable)
    lam: float                  # the power-tuned lam at that n
    achieved: float             # the half-width, or the power, at that n


@dataclass(frozen=True)
class SimulationCheck:
    replicates: int
    median_half_width: float    # of the simulated 1 - alpha intervals
    coverage: float             # share of intervals holding the simulated truth
    power: float | None         # share of p-values below alpha (a planted difference), None for a mean


def pilot_moments(labels, judged) -> PilotMoments:
    """sd of labels and judge scores and their correlation over the labeled pilot answers (>= MIN_LABELS)."""
    y, f = _pairs(labels, judged)
    if y.size < MIN_LABELS:
        raise StatsInputError(f"{y.size} labeled pilot answers: at least {MIN_LABELS} are needed to estimate "
                              f"the judge-human correlation")
    sigma_y, sigma_f = float(y.std(ddof=1)), float(f.std(ddof=1))
    rho = float(np.corrcoef(y, f)[0, 1]) if sigma_y > 0 and sigma_f > 0 else 0.0
    return PilotMoments(sigma_y, sigma_f, rho, int(y.size))


def assumed_moments(judged, rho: float) -> PilotMoments:
    """No labels: labels assumed on the judge's scale with its spread (sd of `judged`) and correlation rho."""
    if not -1.0 <= rho <= 1.0:
        raise StatsInputError(f"a correlation lies in [-1, 1], got {rho}")
    f = _finite(judged, "judged")
    if f.size < 2:
        raise StatsInputError(f"the judge's spread needs at least 2 scores, got {f.size}")
    sigma = float(f.std(ddof=1))
    return PilotMoments(sigma, sigma, float(rho), 0)


def tuned_lam(moments: PilotMoments, n: int, n_total: int | None) -> float:
    """PPI++'s lam at n labels, clipped to [0, 1] (stats.ppi.power_tuned_lam in the population)."""
    n_unlabeled = _unlabeled(n, n_total)
    if moments.sigma_f == 0.0 or n_unlabeled < 2:
        return 0.0  # no judge spread, or too few unlabeled answers: stats.ppi.ppi_mean takes lam 0
    ratio = n / n_unlabeled if np.isfinite(n_unlabeled) else 0.0
    return float(np.clip(moments.covariance / ((1.0 + ratio) * moments.sigma_f**2), 0.0, 1.0))


def ppi_se(moments: PilotMoments, n: int, n_total: int | None = None) -> float:
    """Standard error of the PPI++ mean at n labels of n_total answers (None: unlabeled >> n)."""
    lam = tuned_lam(moments, n, n_total)
    n_unlabeled = _unlabeled(n, n_total)
    rectified = moments.sigma_y**2 - 2.0 * lam * moments.covariance + lam**2 * moments.sigma_f**2
    imputed = lam**2 * moments.sigma_f**2 / n_unlabeled if lam else 0.0
    return float(np.sqrt(max(rectified, 0.0) / n + imputed))


def labels_for_width(moments: PilotMoments, width: float, alpha: float = 0.05,
                     n_total: int | None = None) -> LabelRequirement:
    """Fewest labels whose PPI++ 1 - alpha interval has half-width <= width."""
    _check_target(width, "the half-width", alpha, n_total)
    z = _z(alpha)

    def meets(m: PilotMoments, n: int) -> bool:
        return z * ppi_se(m, n, n_total) <= width

    return _requirement(moments, n_total, meets, lambda se: z * se)


def labels_for_difference(moments: PilotMoments, delta: float, power: float = 0.8, alpha: float = 0.05,
                          n_pairs: int = 1, n_total: int | None = None) -> LabelRequirement:
    """Fewest questions labeled for both systems whose PPI++ paired difference is found significant with
    `power` at alpha / n_pairs (two-sided) when the true difference is delta; `moments` of the per-question
    differences."""
    _check_target(delta, "the difference", alpha, n_total)
    if not 0.0 < power < 1.0:
        raise StatsInputError(f"the power lies strictly between 0 and 1, got {power}")
    if n_pairs < 1:
        raise StatsInputError(f"the family has at least 1 pair, got {n_pairs}")
    level = alpha / n_pairs

    def meets(m: PilotMoments, n: int) -> bool:
        return difference_power(delta, ppi_se(m, n, n_total), level) >= power

    return _requirement(moments, n_total, meets, lambda se: difference_power(delta, se, level))


def difference_power(delta: float, se: float, alpha: float) -> float:
    """Power of the two-sided z-test at alpha for a true difference delta with standard error se."""
    if se == 0.0:
        return 1.0
    z = _z(alpha)
    shift = delta / se
    return float(stats.norm.sf(z - shift) + stats.norm.cdf(-z - shift))


def simulate_width(sample: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]], truth: float,
                   n: int, n_total: int | None, alpha: float, replicates: int,
                   rng: np.random.Generator, bounds: tuple[float, float] | None = None) -> SimulationCheck:
    """`replicates` data sets of n labels and the rest unlabeled, drawn by `sample(rng, size) -> (labels,
    judged)`; stats.ppi.ppi_mean on each (`bounds`: the labels' scale, as ppi_mean takes it): the median
    half-width and the coverage of `truth`."""
    size = _simulated_size(n, n_total)
    halves, covered = np.empty(replicates), 0
    for index in range(replicates):
        y, f = sample(rng, size)
        estimate = ppi_mean(y[:n], f[:n], f[n:], alpha, bounds=bounds)
        halves[index] = (estimate.ci[1] - estimate.ci[0]) / 2.0
        covered += estimate.ci[0] <= truth <= estimate.ci[1]
    return SimulationCheck(replicates, float(np.median(halves)), covered / replicates, None)


def simulate_difference(sample: Callable[[np.random.Generator, int], tuple[np.ndarray, ...]], delta: float,
                        n: int, n_total: int | None, alpha: float, replicates: int,
                        rng: np.random.Generator, bounds: tuple[float, float] | None = None
                        ) -> SimulationCheck:
    """`sample(rng, size) -> (labels_a, labels_b, judged_a, judged_b)` with mean(labels_a - labels_b) =
    delta; stats.ppi.ppi_paired_difference on each data set (`bounds`: the scale of both systems' labels):
    the share significant at alpha (p < alpha, stats.multiple.is_significant), the median half-width and
    the coverage of delta."""
    size = _simulated_size(n, n_total)
    halves, covered, found = np.empty(replicates), 0, 0
    for index in range(replicates):
        y_a, y_b, f_a, f_b = sample(rng, size)
        estimate = ppi_paired_difference(y_a[:n], y_b[:n], f_a[:n], f_b[:n], f_a[n:], f_b[n:], alpha,
                                         bounds=bounds)
        halves[index] = (estimate.ci[1] - estimate.ci[0]) / 2.0
        covered += estimate.ci[0] <= delta <= estimate.ci[1]
        found += estimate.p_value < alpha
    return SimulationCheck(replicates, float(np.median(halves)), covered / replicates, found / replicates)


def resampler(*columns) -> Callable[[np.random.Generator, int], tuple[np.ndarray, ...]]:
    """Draws rows of the pilot's labeled answers (columns of equal length) with replacement."""
    arrays = [_finite(column, "pilot column") for column in columns]

    def sample(rng: np.random.Generator, size: int) -> tuple[np.ndarray, ...]:
        rows = rng.integers(0, arrays[0].size, size)
        return tuple(array[rows] for array in arrays)

    return sample


def gaussian_sampler(moments: PilotMoments, shift: float = 0.0
                     ) -> Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]:
    """(labels, judged) bivariate normal with the moments' sds and correlation; labels' mean `shift`."""
    rho = moments.rho

    def sample(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        first, second = rng.standard_normal((2, size))
        labels = shift + moments.sigma_y * first
        judged = moments.sigma_f * (rho * first + np.sqrt(1.0 - rho**2) * second)
        return labels, judged

    return sample


def _requirement(moments: PilotMoments, n_total: int | None, meets: Callable[[PilotMoments, int], bool],
                 achieved: Callable[[float], float]) -> LabelRequirement:
    n = _fewest(moments, n_total, meets)
    without_judge = PilotMoments(moments.sigma_y, moments.sigma_f, 0.0, moments.n_pilot)
    labels_only = _fewest(without_judge, n_total, meets)
    at = n if n is not None else n_total
    se = ppi_se(moments, at, n_total)
    return LabelRequirement(n, labels_only, n is not None, se, tuned_lam(moments, at, n_total), achieved(se))


def _fewest(moments: PilotMoments, n_total: int | None,
            meets: Callable[[PilotMoments, int], bool]) -> int | None:
    """Smallest n >= MIN_LABELS (<= n_total) that meets the target; the standard error falls with n."""
    if meets(moments, MIN_LABELS):
        return MIN_LABELS
    low, high = MIN_LABELS, 2 * MIN_LABELS  # low fails the target
    while True:
        high = min(high, n_total) if n_total is not None else high
        if meets(moments, high):
            break
        if n_total is not None and high >= n_total:
            return None
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if meets(moments, middle) else (middle, high)
    return high


def _simulated_size(n: int, n_total: int | None) -> int:
    return n_total if n_total is not None else n * (1 + SIM_UNLABELED_PER_LABEL)


def _unlabeled(n: int, n_total: int | None) -> float:
    return float("inf") if n_total is None else float(n_total - n)


def _check_target(target: float, what: str, alpha: float, n_total: int | None) -> None:
    if not (np.isfinite(target) and target > 0.0):
        raise StatsInputError(f"{what} to plan for must be > 0, got {target}")
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    if n_total is not None and n_total < MIN_LABELS:
        raise StatsInputError(f"a run of {n_total} questions cannot hold the {MIN_LABELS} labels PPI++ needs")


def _z(alpha: float) -> float:
    return float(stats.norm.ppf(1.0 - alpha / 2.0))


def _pairs(labels, judged) -> tuple[np.ndarray, np.ndarray]:
    y, f = _finite(labels, "labels"), _finite(judged, "judged")
    if y.size != f.size:
        raise StatsInputError(f"labels and judged must have equal length, got {y.size} and {f.size}")
    return y, f


def _finite(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or not np.isfinite(array).all():
        raise StatsInputError(f"{name} must be a 1-D array of finite numbers")
    return array
