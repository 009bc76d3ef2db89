import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from stats import unpaired
from stats.errors import StatsInputError
from stats.hsd import HSDResult
from stats.letters import compact_letter_display
from stats.multiple import holm_adjust, is_significant
from stats.unpaired import (
    smallest_unpaired_p_value,
    unpaired_minimum_detectable_difference,
    unpaired_randomization_test,
    unpaired_randomization_tests,
    welch_power,
    welch_standard_error,
)
from stats.unpaired_hsd import unpaired_tukey_hsd


def scipy_p_value(a, b, alternative, n_resamples, seed=0):
    """scipy's permutation test of the same statistic; two-sided as |mean(a) - mean(b)| >= |observed|
    (scipy's own two-sided doubles the smaller one-sided p, another rule)."""
    if alternative == "two-sided":
        def statistic(x, y, axis):
            return np.abs(np.mean(x, axis=axis) - np.mean(y, axis=axis))
        alternative = "greater"
    else:
        def statistic(x, y, axis):
            return np.mean(x, axis=axis) - np.mean(y, axis=axis)
    return scipy_stats.permutation_test((a, b), statistic, permutation_type="independent", vectorized=True,
                                        n_resamples=n_resamples, alternative=alternative,
                                        random_state=seed).pvalue


# --- the two-sample test

@pytest.mark.parametrize(("alternative", "expected"),
                         [("two-sided", 2 / 6), ("less", 1 / 6), ("greater", 1.0)])
def test_two_against_two_by_hand(alternative, expected):
    # The 6 splits of 1, 2, 3, 4 into two pairs give mean(a) - mean(b) = -2, -1, 0, 0, 1, 2; observed -2.
    result = unpaired_randomization_test(np.array([1.0, 2.0]), np.array([3.0, 4.0]), 100,
                                         np.random.default_rng(0), alternative)
    assert (result.n_a, result.n_b, result.mean_diff) == (2, 2, -2.0)
    assert result.exact and result.permutations == 6
    assert result.p_value == pytest.approx(expected)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_exact_case_equals_scipy_enumeration(alternative):
    # C(9, 4) = 126 splits <= B: both enumerate them all; scores on a 0.05 grid, with ties.
    a = np.array([0.55, 0.7, 0.7, 0.9, 0.85])
    b = np.array([0.5, 0.7, 0.45, 0.6])
    ours = unpaired_randomization_test(a, b, 1000, np.random.default_rng(0), alternative)
    assert ours.exact and ours.permutations == 126
    assert ours.p_value == pytest.approx(scipy_p_value(a, b, alternative, 1000), rel=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_randomized_case_agrees_with_scipy_within_monte_carlo_error(alternative):
    rng = np.random.default_rng(7)
    a = np.clip(rng.normal(0.6, 0.2, size=30), 0, 1).round(2)
    b = np.clip(rng.normal(0.47, 0.2, size=25), 0, 1).round(2)
    ours = unpaired_randomization_test(a, b, 4000, np.random.default_rng(1), alternative)
    reference = scipy_p_value(a, b, alternative, 4000, seed=2)
    assert not ours.exact and 0.01 < reference < 0.5
    # each p's Monte Carlo standard error is sqrt(p (1 - p) / B) <= 0.008 here; 4 SE of the difference
    assert ours.p_value == pytest.approx(reference, abs=4 * np.sqrt(2 * reference * (1 - reference) / 4000))


def test_randomized_p_is_never_zero_and_same_seed_same_result(monkeypatch):
    a, b = np.linspace(1, 2, 12), np.linspace(0, 0.5, 12)
    first = unpaired_randomization_test(a, b, 500, np.random.default_rng(3))
    assert first.p_value == 1 / 501 and first.permutations == 500 and not first.exact
    assert first == unpaired_randomization_test(a, b, 500, np.random.default_rng(3))
    monkeypatch.setattr(unpaired, "_VALUES_PER_CHUNK", 24 * 7)  # 7 permutations a chunk
    noisy = np.random.default_rng(4).random(24)
    whole = unpaired_randomization_test(noisy[:12], noisy[12:], 500, np.random.default_rng(5))
    monkeypatch.undo()
    assert whole == unpaired_randomization_test(noisy[:12], noisy[12:], 500, np.random.default_rng(5))


def test_cells_of_ragged_sizes_are_tested_in_order_with_holm_over_them():
    rng = np.random.default_rng(8)
    cells = [(rng.random(5), rng.random(9)), (rng.random(3) + 1.0, rng.random(40)),
             (rng.random(20), rng.random(2))]
    tests = unpaired_randomization_tests(cells, 300, np.random.default_rng(9))
    assert [(t.n_a, t.n_b) for t in tests.tests] == [(5, 9), (3, 40), (20, 2)]
    np.testing.assert_array_equal(tests.adjusted_p, holm_adjust([t.p_value for t in tests.tests]))
    again = unpaired_randomization_tests(cells, 300, np.random.default_rng(9))
    np.testing.assert_array_equal(again.adjusted_p, tests.adjusted_p)


def test_smallest_p_values_are_reached_by_separated_groups():
    assert smallest_unpaired_p_value(2, 2) == pytest.approx(1 / 3)
    assert smallest_unpaired_p_value(2, 2, "greater") == pytest.approx(1 / 6)
    assert smallest_unpaired_p_value(4, 4) == pytest.approx(2 / 70)  # 4 a group: the fewest below 0.05
    assert smallest_unpaired_p_value(3, 3) == pytest.approx(0.1)
    assert smallest_unpaired_p_value(2, 9) == pytest.approx(1 / 55)
    separated = unpaired_randomization_test(np.array([10.0, 11.0]), np.arange(9.0), 100,
                                            np.random.default_rng(0))
    assert separated.p_value == pytest.approx(smallest_unpaired_p_value(2, 9))


@pytest.mark.parametrize(("b_iterations", "sizes"), [(5, (2, 2)), (100, (2, 2)), (50, (2, 9)), (100, (2, 9))])
def test_type_one_error_at_the_smallest_sizes(b_iterations, sizes):
    """Under H0 (one normal distribution) the rejection rate at alpha = 0.05 stays within alpha plus three
    Monte Carlo standard errors, randomized (B below the number of splits) and exact; 2 is the smallest
    accepted group size (2 against 2 can never reject: its smallest p is 1/3)."""
    rng = np.random.default_rng(sum(sizes) * b_iterations)
    replicates = 1500
    rejections = sum(
        is_significant(unpaired_randomization_test(rng.normal(size=sizes[0]), rng.normal(size=sizes[1]),
                                                   b_iterations, rng).p_value, 0.05)
        for _ in range(replicates))
    assert rejections / replicates <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / replicates)


@pytest.mark.parametrize(
    ("a", "b", "b_iterations", "alternative"),
    [(np.array([1.0]), np.array([1.0, 2.0]), 10, "two-sided"),
     (np.array([1.0, np.nan]), np.array([1.0, 2.0]), 10, "two-sided"),
     (np.ones((2, 2)), np.array([1.0, 2.0]), 10, "two-sided"),
     (np.array([1.0, 2.0]), np.array([1.0, 2.0]), 0, "two-sided"),
     (np.array([1.0, 2.0]), np.array([1.0, 2.0]), 10, "bigger")],
)
def test_bad_input_is_a_one_line_error(a, b, b_iterations, alternative):
    with pytest.raises(StatsInputError) as error:
        unpaired_randomization_test(a, b, b_iterations, np.random.default_rng(0), alternative)
    assert "\n" not in str(error.value)


# --- the minimum detectable difference

def test_welch_standard_error_and_df_are_scipys():
    rng = np.random.default_rng(10)
    a, b = rng.normal(0.5, 0.1, size=12), rng.normal(0.4, 0.3, size=30)
    se, df = welch_standard_error(12, 30, a.std(ddof=1), b.std(ddof=1))
    reference = scipy_stats.ttest_ind(a, b, equal_var=False)
    assert (a.mean() - b.mean()) / se == pytest.approx(reference.statistic)
    assert df == pytest.approx(reference.df)


def test_mdd_with_equal_groups_is_statsmodels_two_sample_t_test():
    power_module = pytest.importorskip("statsmodels.stats.power")
    effect = power_module.TTestIndPower().solve_power(None, nobs1=25, alpha=0.05, power=0.8, ratio=1.0)
    assert unpaired_minimum_detectable_difference(25, 25, 0.2, 0.2, 0.05, 0.8) == pytest.approx(
        effect * 0.2, rel=1e-6)


def test_mdd_inverts_welch_power_and_tends_to_the_normal_formula():
    mdd = unpaired_minimum_detectable_difference(8, 30, 0.25, 0.1, 0.05 / 10, 0.8)
    assert welch_power(mdd, 8, 30, 0.25, 0.1, 0.05 / 10) == pytest.approx(0.8, abs=1e-6)
    assert mdd > unpaired_minimum_detectable_difference(8, 30, 0.25, 0.1, 0.05, 0.8)
    se, _ = welch_standard_error(100_000, 50_000, 0.2, 0.3)
    normal = (scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)) * se
    assert unpaired_minimum_detectable_difference(100_000, 50_000, 0.2, 0.3, 0.05, 0.8) == pytest.approx(
        normal, rel=1e-3)
    assert unpaired_minimum_detectable_difference(5, 5, 0.0, 0.0, 0.05, 0.8) == 0.0


@pytest.mark.parametrize(("args", "message"), [((1, 5, 0.1, 0.1, 0.05, 0.8), "at least 2"),
                                               ((5, 5, -0.1, 0.1, 0.05, 0.8), "finite and >= 0"),
                                               ((5, 5, 0.1, 0.1, 0.05, 0.05), "must exceed alpha"),
                                               ((5, 5, 0.1, 0.1, 0.0, 0.8), "alpha must lie")])
def test_mdd_bad_input_is_a_clear_error(args, message):
    with pytest.raises(StatsInputError, match=message):
        unpaired_minimum_detectable_difference(*args)


# --- the HSD of independent groups

def exact_unpaired_hsd_p_values(groups):
    """Exact p-values by enumerating every labelling of the pooled scores (tiny inputs only)."""
    pooled = np.concatenate(groups)
    bounds = np.cumsum([0] + [len(g) for g in groups])
    observed = np.abs(np.array([g.mean() for g in groups])[:, None] - np.array([g.mean() for g in groups]))
    reached, total = np.zeros(observed.shape), 0
    for order in itertools.permutations(pooled):
        means = [np.mean(order[start:stop]) for start, stop in zip(bounds[:-1], bounds[1:])]
        reached += max(means) - min(means) >= observed - 1e-12
        total += 1
    return reached / total


def test_hsd_of_two_pairs_by_hand_is_the_two_sided_test():
    # Two groups: the range is |mean(a) - mean(b)|, reached by 2 of the 6 splits of 1, 2, 3, 4.
    groups = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    result = unpaired_tukey_hsd(groups, 20_000, np.random.default_rng(0))
    assert isinstance(result, HSDResult)
    assert result.means.tolist() == [1.5, 3.5] and result.diffs[0, 1] == -2.0 and result.diffs[1, 0] == 2.0
    assert result.p_values[0, 1] == result.p_values[1, 0] == pytest.approx(1 / 3, abs=0.015)
    assert result.p_values[0, 0] == 1.0 and result.sizes.tolist() == [2, 2] and result.n_queries == 4


def test_hsd_matches_exact_enumeration_with_unequal_sizes():
    groups = [np.array([0.9, 0.8]), np.array([0.2, 0.4]), np.array([0.5, 0.3, 0.6])]
    result = unpaired_tukey_hsd(groups, 20_000, np.random.default_rng(1))
    # Monte Carlo standard error is at most 0.0036 at B = 20,000
    np.testing.assert_allclose(result.p_values, exact_unpaired_hsd_p_values(groups), atol=0.015)


def test_hsd_family_wise_error_at_the_smallest_group_size():
    """Four groups of 2 (the smallest accepted size; with three groups of 2 the smallest p is 6/90 and
    nothing can be significant): under H0 the share of data sets with any pair at p < 0.05 stays within
    alpha plus three Monte Carlo standard errors."""
    rng = np.random.default_rng(11)
    replicates = 600
    any_rejected = sum(
        is_significant(unpaired_tukey_hsd(list(rng.normal(size=(4, 2))), 200, rng).p_values.min(), 0.05)
        for _ in range(replicates))
    assert any_rejected / replicates <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / replicates)


def test_hsd_finds_a_planted_group_and_its_letters_read_like_the_paired_ones():
    rng = np.random.default_rng(12)
    groups = [rng.normal(0.5, 0.1, size=60), rng.normal(0.5, 0.1, size=45), rng.normal(0.65, 0.1, size=50)]
    result = unpaired_tukey_hsd(groups, 2000, np.random.default_rng(13))
    pairs = itertools.combinations(enumerate("ABC"), 2)
    significant = [(name_a, name_b) for (i, name_a), (j, name_b) in pairs
                   if is_significant(result.p_values[i, j], 0.05)]
    assert significant == [("A", "C"), ("B", "C")]
    means = dict(zip("ABC", result.means))
    assert compact_letter_display(means, significant) == {"A": "b", "B": "b", "C": "a"}


@pytest.mark.parametrize(("groups", "b"), [([np.array([1.0, 2.0])], 10),
                                           ([np.array([1.0, 2.0]), np.array([1.0])], 10),
                                           ([np.array([1.0, 2.0]), np.array([1.0, np.inf])], 10),
                                           ([np.array([1.0, 2.0]), np.array([1.0, 3.0])], 0)])
def test_hsd_bad_input_is_a_one_line_error(groups, b):
    with pytest.raises(StatsInputError) as error:
        unpaired_tukey_hsd(groups, b, np.random.default_rng(0))
    assert "\n" not in str(error.value)
