"""Paired shift of a probe: hand-computed means and flags, the CI from the bootstrap kernel, scipy's
percentile bootstrap as the reference."""
import numpy as np
import pytest

from stats.bootstrap import bootstrap_mean_ci
from stats.errors import StatsInputError
from stats.shift import paired_shift

# probed - clean = [0.30, 0.10, 0.40, -0.20]: mean 0.15
PROBED = np.array([0.80, 0.60, 0.90, 0.30])
CLEAN = np.array([0.50, 0.50, 0.50, 0.50])


def test_mean_n_and_flags_by_hand():
    result = paired_shift(PROBED, CLEAN, tolerance=0.05, b=500, rng=np.random.default_rng(0))
    assert result.n == 4 and result.mean == pytest.approx(0.15)
    assert result.flagged  # 0.15 > 0.05
    assert not paired_shift(PROBED, CLEAN, 0.2, 500, np.random.default_rng(0)).flagged  # 0.15 < 0.2


def test_ci_is_the_bootstrap_kernels_ci_of_the_differences():
    result = paired_shift(PROBED, CLEAN, 0.05, 1000, np.random.default_rng(7))
    reference = bootstrap_mean_ci(PROBED - CLEAN, 1000, np.random.default_rng(7))
    assert (result.low, result.high) == (reference.low[0], reference.high[0])
    assert -0.2 <= result.low <= result.mean <= result.high <= 0.4  # within the smallest and largest diff


def test_constant_differences_give_a_point_ci_and_decide_ci_beyond_tolerance():
    down = paired_shift(np.full(5, 0.2), np.full(5, 0.5), 0.1, 200, np.random.default_rng(0))
    assert (down.mean, down.low, down.high) == pytest.approx((-0.3, -0.3, -0.3))
    assert down.flagged and down.ci_beyond_tolerance
    # a CI that straddles the tolerance: flagged by its mean, not beyond the tolerance as a whole
    wide = paired_shift(PROBED, CLEAN, 0.05, 2000, np.random.default_rng(0))
    assert wide.flagged and wide.low < 0.05 and not wide.ci_beyond_tolerance


def test_a_shift_of_exactly_the_tolerance_is_not_flagged():
    result = paired_shift(np.array([0.3, 0.4]), np.array([0.2, 0.3]), 0.1, 100, np.random.default_rng(0))
    assert result.mean == pytest.approx(0.1) and not result.flagged and not result.ci_beyond_tolerance


def test_matches_scipys_percentile_bootstrap():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    clean = rng.random(40)
    probed = np.clip(clean - 0.1 + 0.1 * rng.standard_normal(40), 0, 1)
    ours = paired_shift(probed, clean, 0.05, 20_000, np.random.default_rng(1))
    theirs = stats.bootstrap((probed - clean,), np.mean, n_resamples=20_000, method="percentile",
                             random_state=np.random.default_rng(2)).confidence_interval
    assert ours.low == pytest.approx(theirs.low, abs=0.005)
    assert ours.high == pytest.approx(theirs.high, abs=0.005)


@pytest.mark.parametrize("probed,clean", [(np.ones(3), np.ones(4)), (np.ones((2, 2)), np.ones((2, 2))),
                                          (np.array([]), np.array([])),
                                          (np.array([np.nan, 1.0]), np.array([0.0, 1.0]))])
def test_bad_input_is_a_clear_error(probed, clean):
    with pytest.raises(StatsInputError):
        paired_shift(probed, clean, 0.05, 100, np.random.default_rng(0))
