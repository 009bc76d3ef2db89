import numpy as np
import pytest
from scipy import stats as scipy_stats

from stats.bootstrap import bootstrap_mean_ci, bootstrap_means
from stats.errors import StatsInputError


def test_weighted_counts_equal_explicit_resampling():
    scores = np.random.default_rng(0).random((40, 3))
    means = bootstrap_means(scores, 50, np.random.default_rng(1))
    rows = np.random.default_rng(1).integers(0, 40, size=(50, 40), dtype=np.int32)
    np.testing.assert_allclose(means, scores[rows].mean(axis=1), rtol=1e-12)


def test_percentile_ci_agrees_with_scipy_within_monte_carlo_error():
    x = np.random.default_rng(2).beta(2, 5, size=300)
    ours = bootstrap_mean_ci(x, 10000, np.random.default_rng(3))
    theirs = scipy_stats.bootstrap(
        (x,), np.mean, method="percentile", n_resamples=10000, random_state=np.random.default_rng(4)
    ).confidence_interval
    standard_error = x.std(ddof=1) / np.sqrt(len(x))
    # Percentile endpoints from 10,000 resamples vary by about 0.03 standard errors; allow 0.15.
    assert abs(ours.low[0] - theirs.low) < 0.15 * standard_error
    assert abs(ours.high[0] - theirs.high) < 0.15 * standard_error
    assert ours.means[0] == pytest.approx(x.mean())


def test_columns_share_resamples_and_seed_is_reproducible():
    scores = np.random.default_rng(5).random((60, 4))
    first = bootstrap_mean_ci(scores, 500, np.random.default_rng(6))
    second = bootstrap_mean_ci(scores, 500, np.random.default_rng(6))
    assert first.low.tobytes() == second.low.tobytes() and first.high.tobytes() == second.high.tobytes()
    assert (first.low <= first.means).all() and (first.means <= first.high).all()


@pytest.mark.parametrize(
    ("scores", "b", "confidence"),
    [
        (np.zeros((0, 2)), 10, 0.95),
        (np.array([[np.nan]]), 10, 0.95),
        (np.zeros((3, 1)), 0, 0.95),
        (np.zeros((3, 1)), 10, 1.0),
    ],
)
def test_bad_input_rejected(scores, b, confidence):
    with pytest.raises(StatsInputError):
        bootstrap_mean_ci(scores, b, np.random.default_rng(0), confidence)
