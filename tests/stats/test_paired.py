import numpy as np
import pytest
from scipy import stats as scipy_stats

from stats.paired import paired_randomization_test


def test_exact_small_case_all_sign_patterns():
    # diffs (1, 1): sign patterns give means {1, 0, 0, -1}; |mean| >= 1 in half of them.
    result = paired_randomization_test(np.array([1.0, 1.0]), np.array([0.0, 0.0]), 20_000,
                                       np.random.default_rng(0))
    assert result.n == 2 and result.mean_diff == 1.0
    assert result.p_value == pytest.approx(0.5, abs=0.015)


def test_agrees_with_scipy_permutation_test():
    rng = np.random.default_rng(7)
    base = rng.uniform(size=40)
    current = np.clip(base + rng.normal(0.05, 0.1, size=40), 0, 1)
    ours = paired_randomization_test(current, base, 20_000, np.random.default_rng(1)).p_value
    reference = scipy_stats.permutation_test(
        (current, base), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=20_000,
        random_state=2,
    ).pvalue
    assert ours == pytest.approx(reference, abs=0.01)


def test_same_seed_same_result_and_bad_shapes():
    a, b = np.linspace(0, 1, 10), np.linspace(0.1, 0.9, 10)
    first = paired_randomization_test(a, b, 1000, np.random.default_rng(3))
    assert first == paired_randomization_test(a, b, 1000, np.random.default_rng(3))
    with pytest.raises(ValueError):
        paired_randomization_test(a, b[:5], 10, np.random.default_rng(0))
    with pytest.raises(ValueError):
        paired_randomization_test(np.array([]), np.array([]), 10, np.random.default_rng(0))
