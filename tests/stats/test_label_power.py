"""Labels needed for PPI++ (stats/label_power.py): the variance formula against its closed form and against
ppi_py's power analysis (Broska, Howes, van Loon 2024's effective sample size, ppi-python 0.2.3), the
fewest labels meeting a target, the Bonferroni level of a pair, bad input, and seeded simulations of the
PPI++ estimator at the recommended n."""
import warnings

import numpy as np
import pytest
from scipy import stats

from stats.errors import StatsInputError
from stats.label_power import (
    PilotMoments,
    assumed_moments,
    difference_power,
    gaussian_sampler,
    labels_for_difference,
    labels_for_width,
    pilot_moments,
    ppi_se,
    resampler,
    simulate_difference,
    simulate_width,
    tuned_lam,
)
from stats.ppi import MIN_LABELS

with warnings.catch_warnings():  # ppi_py.ppi calls warnings.simplefilter("ignore") when imported
    from ppi_py.ppi_power_analysis import ppi_power

Z95 = stats.norm.ppf(0.975)
MOMENTS = PilotMoments(sigma_y=0.3, sigma_f=0.3, rho=0.7, n_pilot=0)


@pytest.mark.parametrize("n_total", [None, 500, 2000])
def test_se_is_the_power_tuned_closed_form(n_total):
    # unclipped: Var = sigma_y^2 (1 - rho^2 N / (n + N)) / n with N = n_total - n (N / (n + N) -> 1: None)
    n = 120
    share = 1.0 if n_total is None else (n_total - n) / n_total
    assert ppi_se(MOMENTS, n, n_total) == pytest.approx(np.sqrt(0.09 * (1 - 0.49 * share) / n))
    assert tuned_lam(MOMENTS, n, n_total) == pytest.approx(0.7 * share)


def test_se_matches_ppi_py_effective_sample_size():
    # ppi_py: n labels of n + N answers are worth n (n + N) / (n + (1 - rho^2) N) labels alone
    for n, n_total in ((40, 100), (120, 500), (300, 5000)):
        effective = n * n_total / (n + (1 - 0.49) * (n_total - n))
        assert ppi_se(MOMENTS, n, n_total) == pytest.approx(0.3 / np.sqrt(effective))


@pytest.mark.parametrize("n_total", [300, 500, 2000])
def test_labels_for_a_width_agree_with_ppi_py_power_analysis(n_total):
    # ppi_py's cheapest (n, N) with n + N <= n_max reaching the labels-only se of n0 = (z sigma / W)^2
    # labels (its n rounded, ours the smallest integer that meets the width: one apart at most)
    width = 0.04
    n0 = (Z95 * 0.3 / width) ** 2
    reference = ppi_power(0.7, cost_X=0, cost_Y=1, cost_Yhat=1e-12, effective_n=n0, n_max=n_total)
    plan = labels_for_width(MOMENTS, width, 0.05, n_total)
    assert abs(plan.n_labels - reference["n"]) <= 1
    assert plan.labels_only == int(np.ceil(n0))
    assert plan.achieved <= width < Z95 * ppi_se(MOMENTS, plan.n_labels - 1, n_total)


def test_with_unlimited_unlabeled_answers_the_labels_shrink_by_one_minus_rho_squared():
    plan = labels_for_width(MOMENTS, 0.03, 0.05)
    n0 = (Z95 * 0.3 / 0.03) ** 2
    assert plan.n_labels == int(np.ceil(n0 * (1 - 0.49)))
    assert plan.labels_only == int(np.ceil(n0))
    assert plan.lam == pytest.approx(0.7) and plan.reachable


def test_lam_is_clipped_to_one_for_a_compressed_judge_as_stats_ppi_does():
    # the judge's sd is a third of the human's: Cov / Var(f) = rho * 3 > 1, clipped to 1 (original PPI)
    compressed = PilotMoments(sigma_y=0.3, sigma_f=0.1, rho=0.9, n_pilot=20)
    n = 100
    assert tuned_lam(compressed, n, None) == 1.0
    # Var(Y - f) / n with Var(Y - f) = 0.09 - 2 * 0.9 * 0.03 + 0.01
    assert ppi_se(compressed, n, None) == pytest.approx(np.sqrt((0.09 - 0.054 + 0.01) / n))


def test_labels_for_a_difference_hold_power_at_the_bonferroni_level():
    plan = labels_for_difference(MOMENTS, delta=0.05, power=0.8, alpha=0.05, n_pairs=15)
    level = 0.05 / 15
    assert plan.achieved >= 0.8 > difference_power(0.05, ppi_se(MOMENTS, plan.n_labels - 1), level)
    # the textbook size (z_{1 - level/2} + z_power)^2 sigma^2 (1 - rho^2) / delta^2, the far tail ignored
    textbook = (stats.norm.ppf(1 - level / 2) + stats.norm.ppf(0.8)) ** 2 * 0.09 * 0.51 / 0.05**2
    assert plan.n_labels == int(np.ceil(textbook))
    one_pair = labels_for_difference(MOMENTS, delta=0.05, power=0.8, alpha=0.05, n_pairs=1)
    assert one_pair.n_labels < plan.n_labels


def test_at_least_min_labels_and_none_where_the_run_is_too_small():
    easy = labels_for_width(MOMENTS, width=0.5)
    assert easy.n_labels == MIN_LABELS == easy.labels_only
    hard = labels_for_width(MOMENTS, width=0.01, n_total=200)
    assert hard.n_labels is None and hard.labels_only is None and not hard.reachable
    assert hard.se == pytest.approx(0.3 / np.sqrt(200))  # every question labeled: lam 0, labels only


def test_pilot_moments_and_assumed_moments():
    y = np.array([0, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1], dtype=float)
    f = np.linspace(0.1, 0.9, 12)
    moments = pilot_moments(y, f)
    assert moments.rho == pytest.approx(np.corrcoef(y, f)[0, 1])
    assert (moments.sigma_y, moments.sigma_f, moments.n_pilot) == pytest.approx(
        (y.std(ddof=1), f.std(ddof=1), 12))
    constant = pilot_moments(np.ones(12), f)
    assert constant.rho == 0.0 and constant.sigma_y == 0.0
    assumed = assumed_moments(f, 0.5)
    assert (assumed.sigma_y, assumed.sigma_f, assumed.rho, assumed.n_pilot) == pytest.approx(
        (f.std(ddof=1), f.std(ddof=1), 0.5, 0))


@pytest.mark.parametrize("call, message", [
    (lambda: pilot_moments(np.ones(9), np.ones(9)), "at least 10"),
    (lambda: labels_for_width(MOMENTS, 0.0), "must be > 0"),
    (lambda: labels_for_width(MOMENTS, 0.1, alpha=1.0), "alpha"),
    (lambda: labels_for_width(MOMENTS, 0.1, n_total=5), "cannot hold"),
    (lambda: labels_for_difference(MOMENTS, -0.1), "must be > 0"),
    (lambda: labels_for_difference(MOMENTS, 0.1, power=1.0), "power"),
    (lambda: assumed_moments(np.ones(5), 1.5), "correlation"),
])
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(StatsInputError, match=message):
        call()


def test_simulated_width_at_the_recommended_n_meets_the_target():
    plan = labels_for_width(MOMENTS, 0.04, 0.05, n_total=500)
    check = simulate_width(gaussian_sampler(MOMENTS), 0.0, plan.n_labels, 500, 0.05, 400,
                           np.random.default_rng(0))
    assert check.median_half_width == pytest.approx(0.04, rel=0.05)
    assert 0.92 <= check.coverage <= 0.98 and check.power is None


def test_simulated_power_at_the_recommended_n_meets_the_target():
    delta, level = 0.05, 0.05 / 3
    plan = labels_for_difference(MOMENTS, delta, 0.8, 0.05, n_pairs=3)

    def differences(rng, size):
        labels, judged = gaussian_sampler(MOMENTS, shift=delta)(rng, size)
        return labels, np.zeros(size), judged, np.zeros(size)

    check = simulate_difference(differences, delta, plan.n_labels, None, level, 400, np.random.default_rng(1))
    assert abs(check.power - 0.8) < 0.07
    again = simulate_difference(differences, delta, plan.n_labels, None, level, 400, np.random.default_rng(1))
    assert again == check  # seeded: same generator seed, same figures


def test_resampler_draws_whole_rows():
    sample = resampler(np.arange(5.0), np.arange(5.0) * 10)
    first, second = sample(np.random.default_rng(0), 50)
    assert np.array_equal(second, first * 10)
