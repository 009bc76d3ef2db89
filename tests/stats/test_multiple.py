import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from stats.errors import StatsInputError
from stats.multiple import combine_p_values, holm_adjust, is_significant


def test_significance_is_strictly_below_alpha():
    # the CCRS paper's rule, "< 0.05"; a randomized p of 500 / 10,000 is exactly alpha and not significant
    assert is_significant(0.0499, 0.05) and is_significant(0.0, 0.05)
    assert not is_significant(500 / 10_000, 0.05) and not is_significant(0.05, 0.05)
    assert not is_significant(0.0501, 0.05)


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3 * 0.01, 2 * 0.02, 1 * 0.04 -> 0.03, 0.04, 0.04 (monotone)
    np.testing.assert_allclose(holm_adjust([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])


def test_holm_monotone_and_capped():
    np.testing.assert_allclose(holm_adjust([0.5, 0.3, 0.001]), [0.6, 0.6, 0.003])
    assert holm_adjust([0.9, 0.8]).tolist() == [1.0, 1.0]
    assert holm_adjust([]).size == 0


def test_holm_equals_statsmodels(monkeypatch):
    # multipletests' Holm branch runs gc.collect() on every call: over a whole session's heap (torch, Ray,
    # MLflow) that was 1.5-2 s a call, 45-60 s for this test in CI
    monkeypatch.setattr(gc, "collect", lambda *args: 0)  # it imports gc inside the function
    rng = np.random.default_rng(0)
    for size in [1, 2, 3, 5, 8, 13, 21, 30] * 4:
        p_values = rng.random(size) ** 3
        ties = rng.random(size) < 0.3
        p_values[ties] = rng.choice([0.0, 0.01, 0.05, 1.0], ties.sum())
        expected = multipletests(p_values, method="holm")[1]
        np.testing.assert_allclose(holm_adjust(p_values), expected, rtol=1e-12, atol=1e-15)


def test_combine_all_is_max_and_any_is_bonferroni_min():
    assert combine_p_values([0.01, 0.03, 0.002], "all", n_metrics=5) == 0.03
    assert combine_p_values([0.01, 0.03, 0.002], "any", n_metrics=5) == pytest.approx(0.01)
    assert combine_p_values([0.4, 0.3], "any", n_metrics=5) == 1.0


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("nan")]])
def test_p_values_outside_unit_interval_rejected(bad):
    with pytest.raises(StatsInputError):
        holm_adjust(bad)
    with pytest.raises(StatsInputError):
        combine_p_values(bad, "all", 1)


def test_unknown_combination_and_empty_rejected():
    with pytest.raises(StatsInputError):
        combine_p_values([0.1], "some", 1)
    with pytest.raises(StatsInputError):
        combine_p_values([], "all", 1)
