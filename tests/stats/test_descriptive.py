import numpy as np
import pytest
from scipy import stats as scipy_stats

from stats.descriptive import (
    bound_counts,
    correlation_matrix,
    fisher_z_mean,
    population_stats,
    tie_rate,
)
from stats.errors import StatsInputError


def test_tie_rate_by_hand():
    # counts 2 and 3: (2*1 + 3*2) / (5*4) = 0.4
    assert tie_rate(np.array([0.0, 0.0, 1.0, 1.0, 1.0])) == pytest.approx(0.4)
    assert tie_rate(np.array([0.1, 0.2, 0.3])) == 0.0
    assert tie_rate(np.array([0.5, 0.5])) == 1.0
    assert np.isnan(tie_rate(np.array([0.5])))


def test_tie_rate_equals_pair_enumeration():
    values = np.random.default_rng(0).integers(0, 5, 60) / 4
    i, j = np.triu_indices(len(values), 1)
    assert tie_rate(values) == pytest.approx((values[i] == values[j]).mean())


def test_bounds_by_hand():
    assert bound_counts(np.array([0.0, 0.0, 0.5, 1.0, np.nan])) == (2, 1)


def test_population_stats_against_numpy_and_scipy():
    values = np.array([0.2, 0.4, 0.4, 0.9, 1.0, 0.7])
    result = population_stats(values)
    assert result.mean == pytest.approx(values.mean())
    assert result.geo_mean == pytest.approx(scipy_stats.gmean(values))
    assert result.median == pytest.approx(0.55)
    q1, q3 = np.percentile(values, [25, 75])
    assert result.midhinge == pytest.approx((q1 + q3) / 2)
    assert result.variance == pytest.approx(values.var(ddof=1))
    assert result.skewness == pytest.approx(scipy_stats.skew(values))
    assert result.kurtosis == pytest.approx(scipy_stats.kurtosis(values))
    assert (result.min, result.max) == (0.2, 1.0)


def test_iqr_by_hand_with_linear_quartiles():
    # sorted 0, 0.2, 0.3, 1.0 (n = 4): Q1 at position 0.75 -> 0.15, Q3 at 2.25 -> 0.3 + 0.25 * 0.7 = 0.475
    values = np.array([1.0, 0.0, 0.3, 0.2])
    result = population_stats(values)
    assert result.iqr == pytest.approx(0.325)
    assert result.iqr == pytest.approx(scipy_stats.iqr(values))  # scipy's default: linear interpolation
    assert result.midhinge == pytest.approx((0.15 + 0.475) / 2)
    assert population_stats(np.array([0.5, 0.5, 0.5])).iqr == 0.0
    assert np.isnan(population_stats(np.array([])).iqr)


def test_population_stats_edge_cases():
    assert population_stats(np.array([0.0, 0.5])).geo_mean == 0.0
    constant = population_stats(np.array([0.3, 0.3, 0.3]))
    assert np.isnan(constant.skewness) and np.isnan(constant.kurtosis) and constant.variance == 0.0


@pytest.mark.parametrize(
    ("method", "reference"),
    [
        ("pearson", lambda x, y: scipy_stats.pearsonr(x, y).statistic),
        ("spearman", lambda x, y: scipy_stats.spearmanr(x, y).statistic),
        ("kendall", lambda x, y: scipy_stats.kendalltau(x, y).statistic),
    ],
)
def test_correlations_equal_scipy(method, reference):
    rng = np.random.default_rng(1)
    base = rng.random(200)
    data = np.column_stack([base, base + rng.random(200), rng.integers(0, 5, 200) / 4]).round(2)
    data[[3, 17], 1] = np.nan  # pairwise-complete rows
    result = correlation_matrix(data, method)
    for i in range(3):
        for j in range(3):
            both = np.isfinite(data[:, i]) & np.isfinite(data[:, j])
            expected = 1.0 if i == j else reference(data[both, i], data[both, j])
            assert result[i, j] == pytest.approx(expected, abs=1e-12)


def test_constant_column_gives_nan_correlation():
    data = np.column_stack([np.linspace(0, 1, 10), np.full(10, 0.5)])
    assert np.isnan(correlation_matrix(data, "pearson")[0, 1])
    with pytest.raises(StatsInputError):
        correlation_matrix(data, "distance")


def test_fisher_z_mean_by_hand():
    r = np.array([[[1.0, 0.2], [0.2, 1.0]], [[1.0, 0.6], [0.6, 1.0]], [[1.0, np.nan], [np.nan, 1.0]]])
    expected = np.tanh((np.arctanh(0.2) + np.arctanh(0.6)) / 2)
    result = fisher_z_mean(r)
    assert result[0, 1] == pytest.approx(expected) and result[1, 0] == pytest.approx(expected)
    assert result[0, 0] == 1.0


def test_fisher_z_mean_clips_perfect_correlation():
    r = np.array([[[1.0, 1.0], [1.0, 1.0]], [[1.0, 0.5], [0.5, 1.0]]])
    result = fisher_z_mean(r)
    assert np.isfinite(result).all() and 0.5 < result[0, 1] < 1.0
