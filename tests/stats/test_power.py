import numpy as np
import pandas as pd
import pytest

from stats.errors import StatsInputError
from stats.power import (
    hsd_power,
    minimum_detectable_difference,
    paired_minimum_detectable_difference,
    questions_needed,
    residual_variance,
    simulated_power,
)

# 3 questions x 3 systems. Question means 2, 3, 2; system means 1, 7/3, 11/3; grand mean 7/3.
# Residuals x - question mean - system mean + grand mean:
#   [ 1/3,  0, -1/3]
#   [ 1/3, -1,  2/3]
#   [-2/3,  1, -1/3]
# sum of squares 10/3 over (3 - 1)(3 - 1) = 4 degrees of freedom -> sigma^2 = 5/6.
HAND = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 5.0], [0.0, 3.0, 3.0]])


def test_residual_variance_of_a_hand_computed_design():
    estimate = residual_variance(HAND)
    assert estimate.residual_variance == pytest.approx(5 / 6)
    assert estimate.df == 4 and (estimate.n_questions, estimate.n_systems) == (3, 3)
    # differences A - C: -2, -3, -3 -> mean -8/3, sample variance (4/9 + 1/9 + 1/9) / 2 = 1/3
    assert estimate.pair_variances[0, 2] == pytest.approx(1 / 3)
    assert estimate.difference_variance("best_worst") == pytest.approx(5 / 3)


def test_residual_variance_matches_statsmodels_two_way_anova():
    smf = pytest.importorskip("statsmodels.formula.api")
    rng = np.random.default_rng(4)
    matrix = rng.uniform(size=(12, 4))
    frame = pd.DataFrame([(f"q{q}", f"s{s}", matrix[q, s]) for q in range(12) for s in range(4)],
                         columns=["question", "system", "score"])
    fit = smf.ols("score ~ C(question) + C(system)", data=frame).fit()
    assert residual_variance(matrix).residual_variance == pytest.approx(fit.mse_resid)
    assert residual_variance(matrix).df == fit.df_resid


def test_two_systems_power_is_the_paired_t_test_of_statsmodels():
    power_module = pytest.importorskip("statsmodels.stats.power")
    variance, delta = 0.04, 0.05
    effect = delta / np.sqrt(variance)
    assert hsd_power(delta, 40, variance, 2, 0.05) == pytest.approx(
        power_module.TTestPower().power(effect, 40, 0.05))
    needed = power_module.TTestPower().solve_power(effect, None, 0.05, 0.8)
    assert questions_needed(delta, variance, 2, 0.05, 0.8) == int(np.ceil(needed))


def test_questions_needed_is_the_smallest_n_and_mdd_inverts_power():
    n = questions_needed(0.1, 0.05, 6, 0.05, 0.8)
    assert hsd_power(0.1, n, 0.05, 6, 0.05) >= 0.8 > hsd_power(0.1, n - 1, 0.05, 6, 0.05)
    mdd = minimum_detectable_difference(n, 0.05, 6, 0.05, 0.8)
    assert hsd_power(mdd, n, 0.05, 6, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert mdd <= 0.1


def test_a_noisier_pair_than_the_pool_needs_more_questions_but_faces_a_lower_bar():
    pooled = 0.05
    alone = questions_needed(0.1, 0.08, 6, 0.05, 0.8)
    against_pool = questions_needed(0.1, 0.08, 6, 0.05, 0.8, pooled)
    assert questions_needed(0.1, pooled, 6, 0.05, 0.8) < against_pool < alone


def test_paired_mdd_of_a_compare_cell():
    differences = np.array([0.1, -0.05, 0.0, 0.2, 0.05, -0.1, 0.15, 0.0])
    mdd = paired_minimum_detectable_difference(differences, 0.05, 0.8)
    assert hsd_power(mdd, 8, differences.var(ddof=1), 2, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert paired_minimum_detectable_difference(np.array([0.1]), 0.05, 0.8) is None


def test_simulated_hsd_power_at_the_recommended_n_is_near_the_target():
    rng = np.random.default_rng(11)
    pilot = rng.normal(0.0, 0.1, size=(40, 4)) + rng.normal(0.5, 0.1, size=(40, 1))
    estimate = residual_variance(pilot)
    n = questions_needed(0.1, estimate.difference_variance("best_worst"), 4, 0.05, 0.8)
    result = simulated_power(pilot, n, 0.1, 0.05, 300, 150, np.random.default_rng(0))
    assert result.n_questions == n and result.replicates == 150 and result.pair == (0, 3)
    assert result.power == pytest.approx(0.8, abs=0.1)
    again = simulated_power(pilot, n, 0.1, 0.05, 300, 150, np.random.default_rng(0))
    assert again.power == result.power
    null = simulated_power(pilot, n, 0.0, 0.05, 300, 150, np.random.default_rng(1))
    assert null.power <= 0.1


def test_bad_input_is_a_clear_error():
    with pytest.raises(StatsInputError, match="complete data"):
        residual_variance(np.array([[0.1, np.nan], [0.2, 0.3]]))
    with pytest.raises(StatsInputError, match="n_questions >= 2"):
        residual_variance(np.array([[0.1, 0.2]]))
    with pytest.raises(StatsInputError, match="delta must be positive"):
        questions_needed(0.0, 0.05, 3, 0.05, 0.8)
    with pytest.raises(StatsInputError, match="power must lie"):
        questions_needed(0.1, 0.05, 3, 0.05, 1.0)


def test_a_target_power_at_or_below_alpha_is_a_clear_error():
    with pytest.raises(StatsInputError, match="must exceed alpha"):
        minimum_detectable_difference(20, 0.05, 3, 0.05, 0.04)
    with pytest.raises(StatsInputError, match="must exceed alpha"):
        questions_needed(0.1, 0.05, 3, 0.05, 0.05)
