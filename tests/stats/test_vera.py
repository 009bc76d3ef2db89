import numpy as np
import pytest

from stats.errors import StatsInputError
from stats.vera import bootstrap_metric, bootstrap_samples, convergence, topicality


def test_bootstrap_metric_matches_theory():
    values = np.random.default_rng(1).uniform(size=200)
    r = bootstrap_metric(values, 4000, np.random.default_rng(0))
    assert r.n == 200 and r.b == 4000 and r.observed_mean == pytest.approx(values.mean())
    assert r.mean == pytest.approx(values.mean(), abs=0.005)
    assert r.se == pytest.approx(values.std(ddof=0) / np.sqrt(200), rel=0.08)
    assert r.variance == pytest.approx(values.var(ddof=1), rel=0.02)
    assert r.low < values.mean() < r.high


def test_sample_size_n_sets_the_standard_error():
    values = np.random.default_rng(2).uniform(size=100)
    small = bootstrap_metric(values, 3000, np.random.default_rng(0), n=25)
    large = bootstrap_metric(values, 3000, np.random.default_rng(0), n=400)
    assert small.n == 25 and large.n == 400
    assert small.se / large.se == pytest.approx(4.0, rel=0.12)  # SE ~ 1/sqrt(n)


def test_seeded_and_reproducible():
    v = [0.1, 0.5, 0.9, 0.4]
    a = bootstrap_samples(v, 50, np.random.default_rng(7), n=10)[0]
    b = bootstrap_samples(v, 50, np.random.default_rng(7), n=10)[0]
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
