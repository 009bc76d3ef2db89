import numpy as np
import pytest

from stats.decision_study import decision_study, design_power, simulated_design_power
from stats.errors import StatsInputError
from stats.judge_noise import VarianceComponents, variance_components
from stats.power import hsd_power, questions_needed
from tests.stats.test_judge_noise import simulate


def components(interaction: float, residual: float, n_repeats: int = 2) -> VarianceComponents:
    """Known components (system 0.01, question 0.02); the mean squares are not used by the study."""
    estimates = np.array([0.01, 0.02, interaction, residual])
    return VarianceComponents(np.zeros(4), np.ones(4, dtype=int), estimates,
                              30, 3, n_repeats)


def test_design_power_is_the_hsd_power_of_the_repeat_averaged_noise():
    noisy = components(0.002, 0.02)
    # var_sq + var_e / 4 = 0.002 + 0.005 = 0.007; the pair difference has twice that variance
    assert design_power(noisy, 80, 4, 0.05, 3, 0.05) == pytest.approx(hsd_power(0.05, 80, 0.014, 3, 0.05))
    assert design_power(noisy, 80, 4, 0.05, 3, 0.05) > design_power(noisy, 80, 1, 0.05, 3, 0.05)


# Two systems keep these tests fast: the HSD's critical value is then Student's t (for three or more,
# scipy's studentized range quantile takes about 0.5 s per number of questions tried).

def test_without_limits_one_repeat_is_cheapest_and_every_row_reaches_the_target():
    study = decision_study(components(0.002, 0.02), 2, 0.05, 0.8, 0.05, max_repeats=4)
    assert [d.n_repeats for d in study.designs] == [1, 2, 3, 4]
    assert all(d.power >= 0.8 and d.judge_calls == d.n_questions * 2 * d.n_repeats for d in study.designs)
    assert study.target_reached and study.recommended.n_repeats == 1
    questions = [d.n_questions for d in study.designs]
    assert questions == sorted(questions, reverse=True)  # more repeats, fewer questions, more calls
    for design in study.designs:  # each row is the smallest n that reaches the target (stats.power's)
        variance = 2 * components(0.002, 0.02).residual_variance_of_means(design.n_repeats)
        assert design.n_questions == questions_needed(0.05, variance, 2, 0.05, 0.8)


def test_a_question_cap_makes_repeats_pay():
    study = decision_study(components(0.002, 0.02), 2, 0.05, 0.8, 0.05, max_repeats=5, max_questions=120)
    capped = study.designs[0]
    assert (capped.n_questions, capped.n_repeats) == (120, 1) and capped.power < 0.8
    assert study.target_reached and study.recommended.n_repeats > 1
    assert study.recommended.n_questions <= 120 and study.recommended.power >= 0.8
    cheaper = [d for d in study.designs if d.power >= 0.8 and d.judge_calls < study.recommended.judge_calls]
    assert cheaper == []


def test_a_budget_too_small_for_the_target_recommends_the_most_power_it_buys():
    study = decision_study(components(0.002, 0.02), 2, 0.05, 0.8, 0.05, max_repeats=3, budget=200)
    assert not study.target_reached
    affordable = [d for d in study.designs if d.judge_calls <= 200]
    assert study.recommended == max(affordable, key=lambda d: d.power)
    assert {d.n_questions for d in affordable if d.n_repeats == 1} == {100}  # 200 // (2 x 1)


def test_the_recommended_design_reaches_its_target_power_in_simulation():
    """Three systems, a pilot with a noisy judge (var_e ten times var_sq) and 120 questions available:
    the study recommends repeats; the randomized HSD on pilot-shaped data at that design reaches the
    target within 0.05 (300 replicates: simulation sd about 0.023)."""
    rng = np.random.default_rng(0)
    pilot = simulate(rng, 60, 3, 0.02, 0.002, 0.02, [0.5, 0.5, 0.5])
    study = decision_study(variance_components(pilot), 3, 0.05, 0.8, 0.05, max_repeats=3, max_questions=120)
    design = study.recommended
    assert study.target_reached and design.n_repeats >= 2
    simulated = simulated_design_power(pilot, design.n_questions, design.n_repeats, 0.05, 0.05, 500, 300, rng)
    assert simulated == pytest.approx(0.8, abs=0.05)


def test_bad_limits_are_clear_errors():
    with pytest.raises(StatsInputError, match="max_repeats"):
        decision_study(components(0.002, 0.02), 3, 0.05, 0.8, 0.05, max_repeats=0)
    with pytest.raises(StatsInputError, match="budget"):
        decision_study(components(0.002, 0.02), 3, 0.05, 0.8, 0.05, budget=0)
    with pytest.raises(StatsInputError, match="n_questions >= 2"):
        simulated_design_power(np.zeros((4, 3, 2)), 1, 2, 0.05, 0.05, 10, 10, np.random.default_rng(0))
