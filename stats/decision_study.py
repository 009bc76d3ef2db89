"""Decision study: how many questions and how many judge repeats per answer reach a target HSD power.

The HSD on repeat-averaged scores judges every pair against the residual variance of the questions x
systems table of n_r-averaged scores, var_sq + var_e / n_r (stats/judge_noise.py). With it, the
parametric power of the HSD for a true difference `delta` between the best and the worst system is the
one of stats/power.py (topic set size design) with difference variance 2 (var_sq + var_e / n_r). For each
number of repeats: the questions needed for the target power; the cost of a design is its judge calls,
n_questions x n_systems x n_repeats per metric. The recommendation is the cheapest design that reaches the
target within the limits (a budget of judge calls, the questions available).

More repeats shrink only the judge's share of the noise, more questions shrink all of it, so in judge
calls alone one repeat is never dearer than more; repeats pay when questions are scarce (a fixed test
set) or a question costs more than its judgments.

`simulated_design_power` checks a design on pilot-shaped data: n questions drawn from the pilot, their
system x question effects shrunk to var_sq (times sqrt(rho), the judge's reliability), each cell
judged n_r times by drawing the pilot cell's own deviations from its mean (rescaled by
sqrt(n_r / (n_r - 1))), the planted effect added and the project's randomized HSD run on the averages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from stats.errors import StatsInputError
from stats.hsd import randomized_tukey_hsd
from stats.judge_noise import VarianceComponents, checked_design, variance_components
from stats.multiple import is_significant
from stats.power import hsd_power, planted_effects, questions_needed, tukey_critical_t, two_way_residuals

_LOCAL_STEPS = 8  # steps of the search from a scaled guess before falling back to doubling and bisection


@dataclass(frozen=True)
class Design:
    n_questions: int
    n_repeats: int
    power: float  # parametric power of the HSD for delta (best vs worst system)
    judge_calls: int  # n_questions x n_systems x n_repeats

    @property
    def as_dict(self) -> dict:
        return {"n_questions": self.n_questions, "n_repeats": self.n_repeats, "power": self.power,
                "judge_calls": self.judge_calls}


@dataclass(frozen=True)
class DecisionStudy:
    designs: tuple[Design, ...]  # by n_repeats, then n_questions
    recommended: Design | None  # None: no design of at least 2 questions fits the limits
    target_reached: bool  # whether `recommended` reaches the target power (else: the most power affordable)


def design_power(components: VarianceComponents, n_questions: int, n_repeats: int, delta: float,
                 n_systems: int, alpha: float) -> float:
    """Parametric HSD power for delta with n_questions questions judged n_repeats times each."""
    variance = 2.0 * components.residual_variance_of_means(n_repeats)
    return hsd_power(delta, n_questions, variance, n_systems, alpha)


def decision_study(components: VarianceComponents, n_systems: int, delta: float, power: float, alpha: float,
                   max_repeats: int = 5, budget: int | None = None,
                   max_questions: int | None = None) -> DecisionStudy:
    """Designs for 1..max_repeats repeats: per n_r, the questions that reach `power` (at most
    max_questions) and, under a budget of judge calls, the questions it affords; the cheapest design
    that reaches the target within budget and max_questions, else the most powerful one within them."""
    if max_repeats < 1:
        raise StatsInputError(f"max_repeats must be at least 1, got {max_repeats}")
    for name, limit in (("budget", budget), ("max_questions", max_questions)):
        if limit is not None and limit < 1:
            raise StatsInputError(f"{name} must be a positive integer, got {limit}")
    designs, previous = set(), None
    for n_repeats in range(1, max_repeats + 1):
        needed = _questions_needed(components, n_systems, n_repeats, delta, power, alpha, previous)
        previous = (needed, n_repeats) if needed is not None else None
        for n in _candidates(needed, n_systems, n_repeats, budget, max_questions):
            power_at = design_power(components, n, n_repeats, delta, n_systems, alpha)
            designs.add(Design(n, n_repeats, power_at, n * n_systems * n_repeats))
    ordered = tuple(sorted(designs, key=lambda d: (d.n_repeats, d.n_questions)))
    affordable = [d for d in ordered if budget is None or d.judge_calls <= budget]
    reaching = [d for d in affordable if d.power >= power]
    if reaching:
        return DecisionStudy(ordered, min(reaching, key=lambda d: (d.judge_calls, d.n_repeats)), True)
    if affordable:
        return DecisionStudy(ordered, max(affordable, key=lambda d: (d.power, -d.judge_calls)), False)
    return DecisionStudy(ordered, None, False)


def _questions_needed(components: VarianceComponents, n_systems: int, n_repeats: int, delta: float,
                      power: float, alpha: float, previous: tuple[int, int] | None) -> int | None:
    """The smallest n reaching `power` at n_repeats (None: beyond stats.power.MAX_QUESTIONS).

    Every power evaluation at a new n computes a studentized range quantile (scipy: about 0.5 s for
    three or more systems), so the search starts from a guess and steps: the previous n_repeats' answer
    scaled by the noise ratio (power depends on n / noise, up to the degrees of freedom), or for the
    first the normal approximation with the critical value at the pilot's degrees of freedom.
    stats.power's doubling and bisection (about 13 evaluations) is the fallback."""
    variance = 2.0 * components.residual_variance_of_means(n_repeats)
    if variance > 0.0:
        if previous is not None:
            n_before, repeats_before = previous
            guess = n_before * variance / (2.0 * components.residual_variance_of_means(repeats_before))
        else:
            pilot_df = (components.n_questions - 1) * (n_systems - 1)
            spread = tukey_critical_t(alpha, n_systems, pilot_df) + stats.norm.ppf(power)
            guess = variance * spread**2 / delta**2
        found = _step_to_smallest(max(2, int(np.ceil(guess))), variance, n_systems, delta, power, alpha)
        if found is not None:
            return found
    try:
        return questions_needed(delta, variance, n_systems, alpha, power)
    except StatsInputError:
        return None


def _step_to_smallest(n: int, variance: float, n_systems: int, delta: float, power: float,
                      alpha: float) -> int | None:
    """The smallest n reaching `power`, found within _LOCAL_STEPS steps of the start (else None)."""
    def enough(m: int) -> bool:
        return hsd_power(delta, m, variance, n_systems, alpha) >= power

    for _ in range(_LOCAL_STEPS):
        if not enough(n):
            n += 1
        elif n > 2 and enough(n - 1):
            n -= 1
        else:
            return n
    return None


def _candidates(needed: int | None, n_systems: int, n_repeats: int, budget: int | None,
                max_questions: int | None) -> list[int]:
    """The questions needed (capped by max_questions) and those the budget affords, at least 2."""
    cap = max_questions
    candidates = [] if needed is None and cap is None else [min(needed or cap, cap or needed)]
    if budget is not None:
        affordable = budget // (n_systems * n_repeats)
        candidates.append(min(affordable, cap) if cap else affordable)
    return [n for n in candidates if n >= 2]


def simulated_design_power(scores: np.ndarray, n_questions: int, n_repeats: int, delta: float, alpha: float,
                           b: int, replicates: int, rng: np.random.Generator,
                           pair: tuple[int, int] | None = None) -> float:
    """Share of `replicates` pilot-shaped data sets (n_questions questions, n_repeats judgments per cell)
    in which the randomized HSD (B = b) on the repeat-averaged scores finds the planted pair (default:
    systems 0 and k-1, +-delta/2) significant at alpha. `scores`: the pilot's complete
    (n_questions, n_systems, n_repeats >= 2) judgments."""
    y = checked_design(scores)
    n_pilot, k, pilot_repeats = y.shape
    if n_questions < 2 or n_repeats < 1 or replicates < 1:
        raise StatsInputError(f"simulation needs n_questions >= 2, n_repeats >= 1 and replicates >= 1, got "
                              f"{n_questions}, {n_repeats}, {replicates}")
    cells = y.mean(axis=2)
    rho = variance_components(y).reliability()
    interaction = two_way_residuals(cells) * np.sqrt(n_pilot / (n_pilot - 1) * rho)
    deviations = (y - cells[:, :, None]) * np.sqrt(pilot_repeats / (pilot_repeats - 1))
    effects = planted_effects(k, delta, (0, k - 1) if pair is None else pair)
    pair = (0, k - 1) if pair is None else pair
    hits = 0
    for _ in range(replicates):
        questions = rng.integers(0, n_pilot, size=n_questions)
        picks = rng.integers(0, pilot_repeats, size=(n_questions, k, n_repeats))
        noise = deviations[questions[:, None, None], np.arange(k)[None, :, None], picks].mean(axis=2)
        sample = interaction[questions] + effects + noise
        hits += is_significant(randomized_tukey_hsd(sample, b, rng).p_values[pair], alpha)
    return hits / replicates
