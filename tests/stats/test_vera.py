import numpy as np
import pytest

from stats.errors import StatsInputError
from stats.vera import (
    PAPER_SAMPLE_RATIO,
    SampleSize,
    bootstrap_metric,
    bootstrap_samples,
    compare_query_sets,
    convergence,
    summarize_means,
)


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
    full = bootstrap_metric(values, 3000, np.random.default_rng(0), n=100)
    assert small.n == 25 and full.n == 100 and small.sample_size_note is None
    assert small.se / full.se == pytest.approx(2.0, rel=0.12)  # SE ~ 1/sqrt(n)


def test_a_sample_size_above_the_observations_is_refused_in_one_line():
    values = np.linspace(0, 1, 20)
    for call in (lambda: bootstrap_metric(values, 100, np.random.default_rng(0), n=50),
                 lambda: convergence(values, [50, 100], np.random.default_rng(0), n=50),
                 lambda: compare_query_sets({"a": values, "b": values}, 100, np.random.default_rng(0), n=50)):
        with pytest.raises(StatsInputError, match=r"^bootstrap sample size n = 50 exceeds the 20 "
                                                  r"observations: .*give n <= 20$") as error:
            call()
        assert "\n" not in str(error.value)


def test_the_paper_ratio_draws_a_quarter_of_the_observations_and_says_so():
    rule = SampleSize(50, PAPER_SAMPLE_RATIO)
    assert (rule.for_observations(200), rule.for_observations(60), rule.for_observations(20)) == (50, 50, 5)
    assert rule.note(200) is None and rule.for_observations(2) == 1
    r = bootstrap_metric(np.linspace(0, 1, 20), 200, np.random.default_rng(0), n=rule)
    assert (r.n, r.n_observed) == (5, 20)
    assert r.sample_size_note == ("n = 50 asked but only 20 observations: drawn n = 5, the paper's ratio "
                                  "n/N = 0.25")
    both = compare_query_sets({"a": np.linspace(0, 1, 20), "b": np.linspace(0, 1, 200)}, 100,
                              np.random.default_rng(0), n=rule)
    assert (both.sets["a"].n, both.sets["b"].n) == (5, 50) and both.sets["b"].sample_size_note is None


def test_at_n_20_the_ratio_rule_keeps_the_standard_error_and_the_coverage_and_n_50_would_not():
    """400 data sets of N = 20 from Beta(2, 5) (true mean 2/7): the spread of their means is the standard
    error to cover. Drawing n = 50 from 20 (what the preset did before) gives about sqrt(20/50) of it; the
    paper's ratio (n = 5) gives about sqrt(20/5) = 2 times it, never too small, and its 95% intervals
    cover the true mean at least as often as they claim."""
    rng = np.random.default_rng(11)
    data = rng.beta(2, 5, size=(400, 20))
    true_se = data.mean(axis=1).std(ddof=1)
    ratio = SampleSize(50, PAPER_SAMPLE_RATIO)
    ratio_runs = [bootstrap_metric(row, 300, rng, n=ratio) for row in data]
    ratio_se = np.mean([r.se for r in ratio_runs])
    above_se = np.mean([bootstrap_samples(row, 300, rng, n=50).std(ddof=1) for row in data])
    covered = np.mean([r.low <= 2 / 7 <= r.high for r in ratio_runs])
    assert above_se / true_se == pytest.approx(np.sqrt(20 / 50), rel=0.15)  # 35-40% too narrow
    assert ratio_se / true_se > 1.0 and covered >= 0.95


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


def test_three_query_sets_in_their_declared_order():
    """Every resample mean of {0.6, 0.8, 1.0} is >= 0.6, of {0.4, 0.5} in [0.4, 0.5], of {0, 0.2} <= 0.2:
    each pair is separated, in the order given (on-topic > minority > unrelated, section 5.2)."""
    sets = {"on-topic": [0.8, 0.6, 1.0], "minority": [0.4, 0.5], "unrelated": [0.0, 0.2]}
    r = compare_query_sets(sets, 500, np.random.default_rng(0))
    assert list(r.sets) == ["on-topic", "minority", "unrelated"] and r.ranking == tuple(sets)
    assert r.expected_order_holds and r.expected_order_separated
    assert [(p.higher, p.lower) for p in r.pairs] == [("on-topic", "minority"), ("on-topic", "unrelated"),
                                                      ("minority", "unrelated")]
    assert all(p.separated and p.p_not_greater == 0.0 and p.verdict.startswith("separated") for p in r.pairs)
    on_minority = r.pairs[0]
    assert 0.1 <= on_minority.diff_low <= on_minority.diff_mean <= on_minority.diff_high <= 0.6
    # the pair differences are taken between the same resamples the set statistics summarise
    assert on_minority.diff_mean == pytest.approx(r.sets["on-topic"].mean - r.sets["minority"].mean)
    # the sets are drawn in the order given from the one stream
    rng = np.random.default_rng(0)
    first = bootstrap_samples(sets["on-topic"], 500, rng)
    assert r.sets["on-topic"].mean == pytest.approx(first.mean())
    assert r.sets["minority"].mean == pytest.approx(bootstrap_samples(sets["minority"], 500, rng).mean())


def test_an_order_that_breaks_or_does_not_separate_is_reported():
    rng = np.random.default_rng(4)
    high, low = rng.normal(0.7, 0.1, 40).clip(0, 1), rng.normal(0.3, 0.1, 40).clip(0, 1)
    r = compare_query_sets({"minority": low, "on-topic": high}, 1000, np.random.default_rng(0), n=30)
    (pair,) = r.pairs
    assert not r.expected_order_holds and not r.expected_order_separated and r.ranking == ("on-topic",
                                                                                           "minority")
    assert pair.diff_high < 0 and pair.verdict.startswith("inverted") and pair.p_not_greater == 1.0
    assert r.sets["on-topic"].n == 30 and r.sets["on-topic"].n_observed == 40
    same = compare_query_sets({"a": high, "b": high[::-1]}, 1000, np.random.default_rng(0))
    assert not same.pairs[0].separated and same.pairs[0].verdict.startswith("not separated")
    assert not same.expected_order_separated
    tied = compare_query_sets({"a": [0.0, 0.0], "b": [0.0, 0.0]}, 100, np.random.default_rng(0))
    assert not tied.expected_order_holds  # equal means are not "a > b"


def test_comparing_needs_two_sets_and_a_valid_confidence():
    with pytest.raises(StatsInputError, match="two sets"):
        compare_query_sets({"a": [1.0]}, 10, np.random.default_rng(0))
    with pytest.raises(StatsInputError, match="confidence"):
        compare_query_sets({"a": [1.0], "b": [0.0]}, 10, np.random.default_rng(0), confidence=1.0)
    with pytest.raises(StatsInputError, match="finite"):
        compare_query_sets({"a": [1.0], "b": [float("nan")]}, 10, np.random.default_rng(0))


def test_bad_inputs():
    with pytest.raises(StatsInputError):
        bootstrap_metric([], 10, np.random.default_rng(0))
    with pytest.raises(StatsInputError):
        bootstrap_metric([0.1, float("nan")], 10, np.random.default_rng(0))
