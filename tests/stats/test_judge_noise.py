import numpy as np
import pandas as pd
import pytest

from stats.errors import StatsInputError
from stats.judge_noise import (
    COMPONENTS,
    reliability,
    two_level_bootstrap,
    variance_components,
    verdict_stability,
)

# 2 questions x 2 systems x 2 repeats built from known effects: grand mean 0.5, systems +-0.1, questions
# +-0.2, system x question +-0.05 (+ on the diagonal), each cell's two repeats at its mean +-0.02.
# Cell means [[0.85, 0.55], [0.35, 0.25]]. Sums of squares (df):
#   system    2*2 * (0.1^2 + 0.1^2)       = 0.08   (1)  -> MS 0.08
#   question  2*2 * (0.2^2 + 0.2^2)       = 0.32   (1)  -> MS 0.32
#   s x q     2 * 4 * 0.05^2              = 0.02   (1)  -> MS 0.02
#   residual  8 * 0.02^2                  = 0.0032 (4)  -> MS 0.0008
# Components: residual 0.0008; s x q (0.02 - 0.0008) / 2 = 0.0096; question (0.32 - 0.02) / 4 = 0.075;
# system (0.08 - 0.02) / 4 = 0.015. rho = 0.0096 / (0.0096 + 0.0008 / 2) = 0.96 = 1 - 0.0008 / 0.02.
HAND_CELLS = np.array([[0.85, 0.55], [0.35, 0.25]])
HAND = HAND_CELLS[:, :, None] + np.array([0.02, -0.02])


def simulate(rng, n_questions, n_repeats, question, interaction, residual, effects):
    """Normal scores with the given variance components; effects are the systems' true means."""
    effects = np.asarray(effects, dtype=np.float64)
    k = len(effects)
    return (effects[None, :, None] + rng.normal(0, np.sqrt(question), (n_questions, 1, 1))
            + rng.normal(0, np.sqrt(interaction), (n_questions, k, 1))
            + rng.normal(0, np.sqrt(residual), (n_questions, k, n_repeats)))


def test_components_and_reliability_of_a_hand_computed_design():
    components = variance_components(HAND)
    assert components.mean_squares == pytest.approx([0.08, 0.32, 0.02, 0.0008])
    assert components.df.tolist() == [1, 1, 1, 4]
    assert components.variances == pytest.approx([0.015, 0.075, 0.0096, 0.0008])
    assert components.truncated == ()
    assert components.reliability() == pytest.approx(0.96)
    assert components.reliability(1) == pytest.approx(0.0096 / (0.0096 + 0.0008))
    assert components.residual_share == pytest.approx(0.0008 / (0.015 + 0.075 + 0.0096 + 0.0008))
    assert components.residual_variance_of_means(2) == pytest.approx(0.0096 + 0.0004)


def test_mean_squares_match_the_statsmodels_anova_table():
    smf = pytest.importorskip("statsmodels.formula.api")
    anova_lm = pytest.importorskip("statsmodels.stats.anova").anova_lm
    y = np.random.default_rng(3).uniform(size=(6, 3, 3))
    cells = [(q, s, r) for q in range(6) for s in range(3) for r in range(3)]
    frame = pd.DataFrame([(f"q{q}", f"s{s}", y[q, s, r]) for q, s, r in cells],
                         columns=["question", "system", "score"])
    table = anova_lm(smf.ols("score ~ C(system) + C(question) + C(system):C(question)", data=frame).fit())
    components = variance_components(y)
    expected = table["mean_sq"].to_numpy()  # system, question, interaction, residual
    assert components.mean_squares == pytest.approx(expected)
    assert components.df.tolist() == table["df"].astype(int).tolist()


def test_a_negative_estimate_is_truncated_and_named():
    # the interaction mean square (0) is below the residual one: no real system x question effect
    y = np.array([[0.5, 0.7], [0.3, 0.5]])[:, :, None] + np.array([0.1, -0.1])
    components = variance_components(y)
    assert components.estimates[COMPONENTS.index("system_x_question")] < 0
    assert components.truncated == ("system_x_question",)
    assert components.variances[COMPONENTS.index("system_x_question")] == 0.0
    assert components.reliability() == 0.0


def test_a_judge_without_noise_is_perfectly_reliable():
    components = variance_components(np.repeat(np.random.default_rng(0).uniform(size=(5, 3, 1)), 2, axis=2))
    assert components.variances[COMPONENTS.index("residual")] == 0.0
    assert components.reliability() == 1.0
    assert reliability(np.zeros(4), 3) == 1.0


def test_components_are_unbiased_on_a_large_simulated_design():
    truth = {"question": 0.02, "system_x_question": 0.004, "residual": 0.01}
    y = simulate(np.random.default_rng(5), 2000, 3, truth["question"], truth["system_x_question"],
                 truth["residual"], [0.4, 0.5, 0.6])
    variances = dict(zip(COMPONENTS, variance_components(y).variances))
    for name, value in truth.items():
        assert variances[name] == pytest.approx(value, rel=0.1)
    assert variances["system"] == pytest.approx(0.01, rel=0.1)  # sample variance of 0.4, 0.5, 0.6


def test_two_level_bootstrap_covers_the_true_means_and_reliability_about_95_percent():
    """Coverage of the percentile CIs over 300 simulated data sets, judge noise as large as the question
    spread: the two-level scheme adds the judge noise once (a plain two-level resample adds it twice
    and over-covers)."""
    rng = np.random.default_rng(11)
    effects = np.array([0.5, 0.55, 0.6])
    interaction, residual, n_repeats = 0.004, 0.02, 2
    true_reliability = interaction / (interaction + residual / n_repeats)
    covered_means, covered_reliability, data_sets = 0.0, 0, 300
    for _ in range(data_sets):
        y = simulate(rng, 60, n_repeats, 0.02, interaction, residual, effects)
        result = two_level_bootstrap(y, 400, rng)
        covered_means += ((result.means_low <= effects) & (effects <= result.means_high)).mean()
        covered_reliability += result.reliability_low <= true_reliability <= result.reliability_high
    assert 0.92 <= covered_means / data_sets <= 0.975
    assert 0.88 <= covered_reliability / data_sets <= 0.98


def test_bootstrap_is_a_function_of_the_seed_and_brackets_the_estimates():
    y = simulate(np.random.default_rng(2), 25, 3, 0.02, 0.004, 0.01, [0.4, 0.5, 0.6])
    first = two_level_bootstrap(y, 300, np.random.default_rng(9))
    again = two_level_bootstrap(y, 300, np.random.default_rng(9))
    assert np.array_equal(first.means_low, again.means_low)
    assert first.reliability_high == again.reliability_high
    means = y.mean(axis=(0, 2))
    assert (first.means_low <= means).all() and (means <= first.means_high).all()
    components = variance_components(y)
    assert first.reliability_low <= components.reliability() <= first.reliability_high
    assert (first.components_low <= first.components_high).all()


def test_a_pair_that_one_repeat_alone_does_not_separate_is_flaky():
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.5, size=(30, 1)) + np.array([0.0, 0.3, 0.3]) + rng.normal(0, 0.01, (30, 3))
    first, second = base.copy(), base.copy()
    first[:, 2] += 0.2  # repeat 0 sees C above B; repeat 1 sees them tied; averaged: C 0.1 above B
    y = np.stack([first, second], axis=2)
    averaged = np.full((3, 3), 1.0)
    averaged[0, 1] = averaged[1, 0] = averaged[0, 2] = averaged[2, 0] = averaged[1, 2] = averaged[2, 1] = 0.0
    stability = verdict_stability(y, averaged, 500, rng, 0.05)
    assert stability.per_repeat_significant[:, 1, 2].tolist() == [True, False]
    assert stability.flaky[1, 2] and not stability.flaky[0, 1] and not stability.flaky[0, 2]
    assert stability.stable_share == pytest.approx(2 / 3)


def test_bad_designs_are_clear_errors():
    with pytest.raises(StatsInputError, match="n_repeats >= 2"):
        variance_components(np.zeros((3, 2, 1)))
    with pytest.raises(StatsInputError, match="complete cells"):
        variance_components(np.array([[[0.1, np.nan], [0.2, 0.3]], [[0.1, 0.2], [0.2, 0.3]]]))
    with pytest.raises(StatsInputError, match="resamples"):
        two_level_bootstrap(HAND, 0, np.random.default_rng(0))
    with pytest.raises(StatsInputError, match="averaged p-values"):
        verdict_stability(HAND, np.ones((3, 3)), 10, np.random.default_rng(0), 0.05)


def test_one_system_components_and_reliability_of_a_hand_computed_design():
    """Repeats within questions: question means 0.25, 0.5, 0.8, 0.5 (grand 0.5125); MS_question =
    2 x 0.151875 / 3 = 0.10125, MS_residual = 0.045 / 4 = 0.01125; var_q = (0.10125 - 0.01125) / 2 = 0.045;
    rho = 0.045 / (0.045 + 0.01125 / 2) = 8/9, one judgment 0.8, judge noise 20%."""
    from stats.judge_noise import single_system_noise

    scores = np.array([[0.2, 0.3], [0.5, 0.5], [0.9, 0.7], [0.4, 0.6]])
    noise = single_system_noise(scores, 2000, np.random.default_rng(0))
    np.testing.assert_allclose(noise.mean_squares, [0.10125, 0.01125])
    np.testing.assert_allclose(noise.variances, [0.045, 0.01125])
    assert list(noise.df) == [3, 4] and noise.truncated == ()
    assert noise.reliability() == pytest.approx(8 / 9) and noise.reliability(1) == pytest.approx(0.8)
    assert noise.residual_share == pytest.approx(0.2)
    assert noise.mean_low < scores.mean() < noise.mean_high
    assert noise.reliability_low <= noise.reliability() <= noise.reliability_high
    again = single_system_noise(scores, 2000, np.random.default_rng(0))  # a function of the seed
    assert (again.mean_low, again.mean_high, again.reliability_low) == (
        noise.mean_low, noise.mean_high, noise.reliability_low)
    with pytest.raises(StatsInputError, match="n_repeats >= 2"):
        single_system_noise(scores[:, :1], 10, np.random.default_rng(0))
