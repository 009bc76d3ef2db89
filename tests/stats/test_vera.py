import numpy as np
import pytest

from stats.errors import StatsInputError
from stats.vera import bootstrap_metric, bootstrap_samples, convergence, summarize_means, topicality


def test_bootstrap_metric_matches_theory():
    values = np.random.default_rng(1).uniform(size=200)
    r = bootstrap_metric(values, 4000, np.random.default_rng(0))
    assert r.n == 200 and r.b == 4000 and r.observed_mean == pytest.approx(values.mean())
    assert r.mean == pytest.approx(values.mean(), abs=0.005)
    assert r.se == pytest.approx(values.std(ddof=0) / np.sqrt(200), rel=0.08)
    # variance of the bootstrap means (section 3.3), not the variance within a resample
    assert r.variance == pytest.approx(r.se ** 2) == pytest.approx(values.var(ddof=0) / 200, rel=0.16)
    assert r.low < values.mean() < r.high


def test_variance_is_that_of_the_bootstrap_means_by_hand():
    # values {0, 1}; three resamples of size 2 with means 0, 0.5, 1: M = 0.5,
    # sigma^2 = ((0 - 0.5)^2 + 0 + (1 - 0.5)^2) / (3 - 1) = 0.25 (the within-resample variances average 1/6)
    r = summarize_means(np.array([0.0, 1.0]), np.array([0.0, 0.5, 1.0]), n=2, confidence=0.5)
    assert (r.mean, r.observed_mean, r.variance, r.se, r.b) == (0.5, 0.5, 0.25, 0.5, 3)
    assert (r.low, r.high) == (0.25, 0.75)
    # the same definition on a seeded draw: rng.integers picks the rows, here replayed by hand
    values = np.array([0.2, 0.4, 1.0])
    picks = np.random.default_rng(5).integers(0, 3, size=(4, 2))
    means = values[picks].mean(axis=1)
    r = bootstrap_metric(values, 4, np.random.default_rng(5), n=2)
    assert r.variance == pytest.approx(((means - means.mean()) ** 2).sum() / 3)


def test_sample_size_n_sets_the_standard_error():
    values = np.random.default_rng(2).uniform(size=100)
    small = bootstrap_metric(values, 3000, np.random.default_rng(0), n=25)
    large = bootstrap_metric(values, 3000, np.random.default_rng(0), n=400)
    assert small.n == 25 and large.n == 400
    assert small.se / large.se == pytest.approx(4.0, rel=0.12)  # SE ~ 1/sqrt(n)


def test_seeded_and_reproducible():
    v = [0.1, 0.5, 0.9, 0.4]
    a = bootstrap_samples(v, 50, np.random.default_rng(7), n=10)
    b = bootstrap_samples(v, 50, np.random.default_rng(7), n=10)
    assert np.array_equal(a, b)


def test_convergence_report():
    values = np.random.default_rng(3).uniform(size=60)
    rep = convergence(values, [50, 100, 500, 1000, 2000, 5000], np.random.default_rng(0), n=50, tol=0.05)
    assert rep.b_values == (50, 100, 500, 1000, 2000, 5000) and rep.relative_change[0] is None
    assert rep.se[-1] == pytest.approx(values.std() / np.sqrt(50), rel=0.1)
    assert rep.converged_at is not None and rep.converged_at <= 5000
    assert all(w > 0 for w in rep.ci_width)


def test_topicality_verdicts():
    rng = np.random.default_rng(4)
    pos, neg = rng.normal(0.7, 0.1, 40).clip(0, 1), rng.normal(0.3, 0.1, 40).clip(0, 1)
    r = topicality(pos, neg, 1000, np.random.default_rng(0), n=30)
    assert r.separated and r.diff_low > 0 and r.verdict.startswith("on-topic") and r.p_not_greater == 0.0
    same = topicality(pos, pos[::-1], 1000, np.random.default_rng(0))
    assert not same.separated and same.verdict.startswith("not separated")


def test_bad_inputs():
    with pytest.raises(StatsInputError):
        bootstrap_metric([], 10, np.random.default_rng(0))
    with pytest.raises(StatsInputError):
        bootstrap_metric([0.1, float("nan")], 10, np.random.default_rng(0))
