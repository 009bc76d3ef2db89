"""How many questions an evaluation needs: topic set size design (Sakai) for the randomized Tukey HSD.

A pilot's (n_questions, k_systems) score matrix of one metric is read as a two-way design without
replication (systems x questions); its residual variance sigma^2 is the noise a system difference has
to beat. For a true difference `delta` between two systems, the HSD compares the pair's t-statistic
with the studentized range critical value q(alpha; k, (n-1)(k-1)) / sqrt(2); the power is that of a
noncentral t with noncentrality delta / sqrt(2 sigma^2 / n). From it: the number of questions that
reaches a target power, and the minimum detectable difference (MDD) at a given number of questions.

Two requirements are planned:
- `best_worst`: the pooled residual variance, i.e. the best and the worst system differ by delta and the
  others lie between them (Sakai's minimum detectable range, least favourable configuration);
- `any_pair`: each pair's own variance of per-question differences (judged, as the HSD does, against
  the pooled 2 sigma^2), the noisiest pair, so that whichever pair differs by delta is detected with
  the target power.

Parametric formulas assume normal errors; the scores are bounded, tied and skewed, and the user runs the
randomized HSD, not the parametric one. `simulated_power` therefore draws data shaped like the pilot
(its residual rows resampled, a planted effect added) at a given n and runs the project's randomized HSD.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy import optimize, stats

from stats.errors import StatsInputError
from stats.hsd import randomized_tukey_hsd
from stats.multiple import is_significant

Requirement = Literal["best_worst", "any_pair"]
MAX_QUESTIONS = 1_000_000


@dataclass(frozen=True)
class VarianceEstimate:
    """Residual variance of a two-way design without replication, and each pair's difference variance."""

    residual_variance: float
    df: int  # (n - 1)(k - 1)
    n_questions: int
    n_systems: int
    pair_variances: np.ndarray  # (k, k): sample variance (ddof=1) of per-question differences a - b

    def difference_variance(self, requirement: Requirement) -> float:
        """Variance of one question's difference between two systems under the requirement."""
        if requirement == "best_worst":
            return 2.0 * self.residual_variance
        if requirement == "any_pair":
            return float(self.pair_variances.max())
        raise StatsInputError(f"unknown requirement {requirement!r}; use best_worst or any_pair")

    def worst_pair(self) -> tuple[int, int]:
        a, b = np.unravel_index(int(np.argmax(self.pair_variances)), self.pair_variances.shape)
        return int(a), int(b)


@dataclass(frozen=True)
class SimulatedPower:
    power: float  # share of replicates in which the HSD found the planted pair significant
    n_questions: int
    replicates: int
    b: int
    pair: tuple[int, int]


def residual_variance(scores: np.ndarray) -> VarianceEstimate:
    """sigma^2 = sum of squared residuals (x - question mean - system mean + grand mean) / ((n-1)(k-1))."""
    x = _complete_matrix(scores)
    n, k = x.shape
    residuals = two_way_residuals(x)
    df = (n - 1) * (k - 1)
    differences = x[:, :, None] - x[:, None, :]
    return VarianceEstimate(float((residuals**2).sum() / df), df, n, k, differences.var(axis=0, ddof=1))


def two_way_residuals(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()


@lru_cache(maxsize=4096)
def tukey_critical_t(alpha: float, k: int, df: int) -> float:
    """The pair t-statistic the HSD must exceed: q(1 - alpha; k, df) / sqrt(2) (t(1 - alpha/2) at k=2)."""
    if k == 2:
        return float(stats.t.ppf(1.0 - alpha / 2.0, df))
    return float(stats.studentized_range.ppf(1.0 - alpha, k, df) / np.sqrt(2.0))


def hsd_power(delta: float, n: int, difference_variance: float, k: int, alpha: float,
              pooled_variance: float | None = None) -> float:
    """Parametric power of the Tukey HSD to find a pair with true difference `delta` on n questions.

    The pair's mean difference has variance difference_variance / n; the HSD judges it against the
    pooled noise (2 sigma^2, `pooled_variance`, default: the pair's own), so a pair noisier than the
    pool faces a relatively lower bar: the threshold is scaled by sqrt(pooled / difference variance)."""
    _check_probability("alpha", alpha)
    if n < 2:
        raise StatsInputError(f"power needs at least 2 questions, got {n}")
    df = (n - 1) * (k - 1)
    critical = tukey_critical_t(alpha, k, df)
    if difference_variance <= 0.0:
        return 1.0 if delta != 0.0 else alpha
    pooled = difference_variance if pooled_variance is None else pooled_variance
    critical *= np.sqrt(pooled / difference_variance)
    return two_sided_t_power(critical, df, abs(delta) / np.sqrt(difference_variance / n))


def two_sided_t_power(critical: float, df: float, noncentrality: float) -> float:
    """P(|T| > critical) for T noncentral t with `df` degrees of freedom and `noncentrality`."""
    upper = stats.nct.sf(critical, df, noncentrality)
    lower = stats.nct.cdf(-critical, df, noncentrality)
    # scipy's noncentral t returns NaN far in its tails; there the tail is 0 (or the upper one is 1)
    upper = upper if np.isfinite(upper) else float(noncentrality > critical)
    lower = lower if np.isfinite(lower) else 0.0
    return float(min(1.0, upper + lower))


def questions_needed(delta: float, difference_variance: float, k: int, alpha: float, power: float,
                     pooled_variance: float | None = None) -> int:
    """The smallest n whose parametric HSD power for `delta` reaches `power` (doubling, then bisection)."""
    _check_target_power(power, alpha)
    if delta <= 0.0:
        raise StatsInputError(f"delta must be positive, got {delta}")

    def enough(m: int) -> bool:
        return hsd_power(delta, m, difference_variance, k, alpha, pooled_variance) >= power

    if enough(2):
        return 2
    high = 4
    while not enough(high):
        if high >= MAX_QUESTIONS:
            raise StatsInputError(f"more than {MAX_QUESTIONS} questions needed for delta={delta}")
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def minimum_detectable_difference(n: int, difference_variance: float, k: int, alpha: float, power: float,
                                  pooled_variance: float | None = None) -> float:
    """The difference the HSD finds with probability `power` on n questions (0 without noise)."""
    _check_target_power(power, alpha)
    if difference_variance <= 0.0:
        return 0.0

    def shortfall(d: float) -> float:
        return hsd_power(d, n, difference_variance, k, alpha, pooled_variance) - power

    high = np.sqrt(difference_variance / n)
    while shortfall(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10 * max(1.0, high)))


def paired_minimum_detectable_difference(differences: np.ndarray, alpha: float, power: float) -> float | None:
    """MDD of a two-sided paired test on these per-question differences (one cell of `ccrs compare`):
    the paired t-test's, i.e. the k = 2 case with the differences' own variance. None below 2 pairs."""
    differences = np.asarray(differences, dtype=np.float64)
    if differences.size < 2:
        return None
    return minimum_detectable_difference(differences.size, float(differences.var(ddof=1)), 2, alpha, power)


def planted_effects(k: int, delta: float, pair: tuple[int, int]) -> np.ndarray:
    """System effects of the least favourable configuration: the pair +-delta/2 apart, the rest at 0."""
    effects = np.zeros(k)
    effects[pair[0]], effects[pair[1]] = delta / 2.0, -delta / 2.0
    return effects


def simulated_power(scores: np.ndarray, n: int, delta: float, alpha: float, b: int, replicates: int,
                    rng: np.random.Generator, pair: tuple[int, int] | None = None) -> SimulatedPower:
    """Share of `replicates` pilot-shaped data sets of n questions in which the randomized HSD (B = b)
    finds the planted pair (default: systems 0 and k-1) significant at `alpha`.

    Each data set: n of the pilot's residual rows drawn with replacement (a question keeps its
    cross-system correlation), scaled by sqrt(n_pilot / (n_pilot - 1)) so that their difference variance
    is the pilot's unbiased estimate, plus the planted effects. Question effects are left out: a shift
    common to a question's systems changes no HSD statistic."""
    x = _complete_matrix(scores)
    n_pilot, k = x.shape
    if n < 2 or replicates < 1:
        raise StatsInputError(f"simulation needs n >= 2 and replicates >= 1, got n={n}, {replicates}")
    pair = (0, k - 1) if pair is None else pair
    residuals = two_way_residuals(x) * np.sqrt(n_pilot / (n_pilot - 1))
    effects = planted_effects(k, delta, pair)
    hits = 0
    for _ in range(replicates):
        sample = residuals[rng.integers(0, n_pilot, size=n)] + effects
        hits += is_significant(randomized_tukey_hsd(sample, b, rng).p_values[pair], alpha)
    return SimulatedPower(hits / replicates, n, replicates, b, pair)


def _complete_matrix(scores: np.ndarray) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise StatsInputError(f"a power plan needs an (n_questions >= 2, k_systems >= 2) matrix, "
                              f"got shape {x.shape}")
    if not np.isfinite(x).all():
        raise StatsInputError("a power plan needs complete data: the pilot matrix holds NaN or inf")
    return x


def _check_target_power(power: float, alpha: float) -> None:
    _check_probability("power", power)
    if power <= alpha:  # a zero difference is already found with probability alpha: nothing to plan
        raise StatsInputError(f"power ({power}) must exceed alpha ({alpha})")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise StatsInputError(f"{name} must lie strictly between 0 and 1, got {value}")
