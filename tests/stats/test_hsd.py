import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from stats import hsd
from stats.errors import StatsInputError
from stats.hsd import one_sided_p_value, randomized_tukey_hsd


def exact_hsd_p_values(scores: np.ndarray) -> np.ndarray:
    """Exact randomization p-values by enumerating every within-query permutation (tiny inputs only)."""
    n, k = scores.shape
    sums = scores.sum(axis=0)
    observed = np.abs(sums[:, None] - sums[None, :])
    orderings = list(itertools.permutations(range(k)))
    reached = np.zeros((k, k))
    total = 0
    for choice in itertools.product(orderings, repeat=n):
        permuted = np.array([scores[i, list(order)] for i, order in enumerate(choice)]).sum(axis=0)
        reached += (permuted.max() - permuted.min()) >= observed - 1e-12
        total += 1
    return reached / total


def test_two_queries_two_systems_by_hand():
    # Four equally likely swaps give sum ranges 1.5, 0.5, 0.5, 1.5; the observed difference is 1.5.
    scores = np.array([[1.0, 0.0], [0.5, 0.0]])
    result = randomized_tukey_hsd(scores, 20000, np.random.default_rng(0))
    assert result.means.tolist() == [0.75, 0.0]
    assert result.diffs[0, 1] == 0.75 and result.diffs[1, 0] == -0.75
    assert abs(result.p_values[0, 1] - 0.5) < 0.015
    assert result.p_values[0, 1] == result.p_values[1, 0]
    assert result.p_values[0, 0] == 1.0


@pytest.mark.parametrize("force_shuffle", [False, True])
def test_matches_exact_enumeration(monkeypatch, force_shuffle):
    if force_shuffle:
        monkeypatch.setattr(hsd, "_MAX_SYSTEMS_FOR_TABLE", 1)
    scores = np.array([[0.9, 0.2, 0.4], [0.6, 0.1, 0.5], [0.8, 0.3, 0.3]])
    exact = exact_hsd_p_values(scores)
    result = randomized_tukey_hsd(scores, 20000, np.random.default_rng(1))
    # Monte Carlo standard error is at most 0.0036 at B=20000.
    np.testing.assert_allclose(result.p_values, exact, atol=0.015)


def test_identical_systems_have_p_one():
    scores = np.random.default_rng(2).random((20, 3))
    scores[:, 1] = scores[:, 0]
    result = randomized_tukey_hsd(scores, 200, np.random.default_rng(0))
    assert result.p_values[0, 1] == 1.0


def test_no_effect_gives_uniform_p_values_and_nominal_false_positive_rate():
    rng = np.random.default_rng(3)
    smallest_p = []
    for _ in range(300):
        scores = rng.random((25, 4)).round(1)
        result = randomized_tukey_hsd(scores, 400, rng)
        smallest_p.append(result.p_values[np.triu_indices(4, 1)].min())
    smallest_p = np.array(smallest_p)
    # The p-value of the largest observed difference is the randomization p of the range: uniform under H0,
    # so the family-wise false positive rate is alpha.
    assert scipy_stats.kstest(smallest_p, "uniform").pvalue > 0.001
    false_positive_rate = (smallest_p <= 0.05).mean()
    assert 0.015 <= false_positive_rate <= 0.095


def test_planted_effect_found_and_nothing_else():
    rng = np.random.default_rng(4)
    base = rng.random((400, 1))
    scores = np.clip(base + rng.normal(0, 0.1, (400, 5)), 0, 1)
    scores[:, 3] = np.clip(scores[:, 3] + 0.15, 0, 1)
    result = randomized_tukey_hsd(scores, 2000, np.random.default_rng(5))
    for a, b in itertools.combinations(range(5), 2):
        planted = 3 in (a, b)
        assert (result.p_values[a, b] <= 0.05) == planted, (a, b, result.p_values[a, b])


def test_same_seed_same_output_bit_for_bit():
    scores = np.random.default_rng(6).random((50, 4))
    first = randomized_tukey_hsd(scores, 500, np.random.default_rng(7))
    second = randomized_tukey_hsd(scores, 500, np.random.default_rng(7))
    assert first.p_values.tobytes() == second.p_values.tobytes()
    assert first.means.tobytes() == second.means.tobytes()


def test_chunked_iterations_are_the_same_test(monkeypatch):
    scores = np.random.default_rng(8).random((30, 3))
    whole = randomized_tukey_hsd(scores, 3000, np.random.default_rng(9))
    monkeypatch.setattr(hsd, "_INDEX_BYTES_PER_CHUNK", 30 * 2 * 7)
    chunked = randomized_tukey_hsd(scores, 3000, np.random.default_rng(9))
    np.testing.assert_allclose(chunked.p_values, whole.p_values, atol=0.05)


@pytest.mark.parametrize(
    ("p", "diff", "direction", "expected"),
    [
        (0.04, 0.2, "greater", 0.02),
        (0.04, -0.2, "less", 0.02),
        (0.04, -0.2, "greater", 0.98),
        (0.04, 0.2, "less", 0.98),
        (0.7, 0.0, "greater", 0.5),
        (0.04, 0.2, "two-sided", 0.04),
    ],
)
def test_one_sided_rule(p, diff, direction, expected):
    assert one_sided_p_value(p, diff, direction) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scores", "b"),
    [(np.zeros((5, 1)), 10), (np.zeros((0, 3)), 10), (np.array([[0.1, np.nan]]), 10), (np.zeros((4, 2)), 0)],
)
def test_bad_input_is_rejected(scores, b):
    with pytest.raises(StatsInputError):
        randomized_tukey_hsd(scores, b, np.random.default_rng(0))


def test_many_metrics_share_permutations_and_each_is_exact():
    rng = np.random.default_rng(10)
    first = np.array([[0.9, 0.2, 0.4], [0.6, 0.1, 0.5], [0.8, 0.3, 0.3]])
    second = rng.random((3, 3)).round(1)
    results = hsd.randomized_tukey_hsd_many(
        np.stack([first, second], axis=2), 20000, np.random.default_rng(11)
    )
    for scores, result in zip((first, second), results):
        np.testing.assert_allclose(result.p_values, exact_hsd_p_values(scores), atol=0.015)
        np.testing.assert_allclose(result.means, scores.mean(axis=0))


def test_tied_queries_are_left_out_exactly():
    scores = np.array([[0.9, 0.2, 0.4], [0.6, 0.1, 0.5], [0.8, 0.3, 0.3], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    result = randomized_tukey_hsd(scores, 20000, np.random.default_rng(12))
    np.testing.assert_allclose(result.p_values, exact_hsd_p_values(scores[:3]), atol=0.015)
    np.testing.assert_allclose(result.means, scores.mean(axis=0))
    all_tied = randomized_tukey_hsd(np.full((4, 3), 0.5), 50, np.random.default_rng(0))
    assert (all_tied.p_values == 1.0).all()


def test_the_smallest_p_value_is_the_share_of_the_relabellings_of_every_query_alike():
    """(k!)^(1 - n): two systems separated on every one of 5 queries reach p = 2/32, never below 0.05, so
    they need 6 queries; three systems need 3."""
    assert hsd.smallest_p_value(5, 2) == 1 / 16 and hsd.smallest_p_value(2, 3) == 1 / 6
    assert [hsd.questions_to_separate(k, 0.05) for k in (2, 3, 4)] == [6, 3, 2]
    assert hsd.smallest_p_value(10, 1) == 1.0
    separated = np.column_stack([np.ones(5), np.zeros(5)])
    p = randomized_tukey_hsd(separated, 20_000, np.random.default_rng(0)).p_values[0, 1]
    assert p == pytest.approx(hsd.smallest_p_value(5, 2), abs=0.01)
