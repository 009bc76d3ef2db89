"""PPI++ kernel: hand-computed estimates, standard errors and power-tuned lam on 4 labels and 4 unlabeled
scores; lam = 0 as the classical z-interval; the judge's bias t-interval; the pairwise matrix; coverage
by simulation against a judge biased toward one system."""
import time

import numpy as np
import pytest
from scipy import stats

from stats.errors import StatsInputError
from stats.multiple import holm_adjust
from stats.ppi import MIN_LABELS, judge_bias, ppi_mean, ppi_paired_difference, ppi_pairwise

LABELS = np.array([1.0, 0.0, 1.0, 1.0])
JUDGED_LABELED = np.array([0.8, 0.2, 0.6, 1.0])
JUDGED_UNLABELED = np.array([0.4, 0.6, 0.8, 0.2])
Z95 = stats.norm.ppf(0.975)


def test_estimate_and_se_with_lam_given_by_hand():
    # lam = 0.5: mean(judged_unlabeled) = 0.5
    # labels - 0.5 * judged_labeled = [0.6, -0.1, 0.7, 0.5], mean 0.425
    # estimate = 0.5 * 0.5 + 0.425 = 0.675
    # Var(rectified, ddof=1): deviations [0.175, -0.525, 0.275, 0.075], squares sum 0.3875, / 3
    # Var(judged_unlabeled, ddof=1): deviations [-0.1, 0.1, 0.3, -0.3], squares sum 0.2, / 3
    # se^2 = (0.3875 / 3) / 4 + 0.5^2 * (0.2 / 3) / 4 = 0.4375 / 12 = 7 / 192
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=0.5)
    se = np.sqrt(7 / 192)
    assert result.estimate == pytest.approx(0.675)
    assert result.se == pytest.approx(se)
    assert result.ci == pytest.approx((0.675 - Z95 * se, 0.675 + Z95 * se))
    assert (result.lam, result.n_labeled, result.n_unlabeled, result.confidence) == (0.5, 4, 4, 0.95)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(0.675 / se))
    at_the_null = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=0.5, null=0.675)
    assert at_the_null.p_value == pytest.approx(1.0)


def test_lam_zero_is_the_classical_mean_and_z_interval():
    # mean 0.75; Var([1, 0, 1, 1], ddof=1) = 0.75 / 3 = 0.25, se = 0.5 / sqrt(4) = 0.25
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, alpha=0.1, lam=0.0, null=0.5)
    assert (result.estimate, result.se) == pytest.approx((0.75, 0.25))
    assert result.ci == pytest.approx(stats.norm.interval(0.9, loc=0.75, scale=0.25))
    assert result.p_value == pytest.approx(2 * stats.norm.sf(1.0))  # z = (0.75 - 0.5) / 0.25
    no_unlabeled = ppi_mean(LABELS, JUDGED_LABELED, [], lam=0.7)  # N = 0: lam forced to 0
    assert (no_unlabeled.lam, no_unlabeled.estimate, no_unlabeled.se) == pytest.approx((0.0, 0.75, 0.25))


def test_power_tuned_lam_by_hand():
    # Cov(Y, f) over the labeled set, ddof=0: (Y - 0.75) = [0.25, -0.75, 0.25, 0.25],
    #   (f - 0.65) = [0.15, -0.45, -0.05, 0.35], products sum 0.45, / 4 = 0.1125
    # Var(f) over all 8 judge scores, ddof=1: mean 0.575, squared deviations sum 0.595, / 7 = 0.085
    # lam = 0.1125 / ((1 + 4/4) * 0.085) = 45 / 68
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED)
    assert result.lam == pytest.approx(45 / 68)
    assert result.estimate == pytest.approx(0.75 + 45 / 68 * (0.5 - 0.65))
    assert result.se == pytest.approx(ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=45 / 68).se)


def test_power_tuned_lam_is_clipped_to_zero_and_one():
    anti_judge = ppi_mean(LABELS, 1.0 - JUDGED_LABELED, JUDGED_UNLABELED)  # Cov < 0
    assert anti_judge.lam == 0.0 and anti_judge.estimate == pytest.approx(0.75)
    # Y = 4 f: Cov = 4 * 0.25 = 1; Var(f) over eight 0/1 scores = 2/7; lam = 1 / (2 * 2/7) = 1.75 -> 1
    f = np.array([0.0, 1.0, 0.0, 1.0])
    assert ppi_mean(4 * f, f, f).lam == 1.0
    assert ppi_mean(LABELS, np.full(4, 0.5), np.full(4, 0.5)).lam == 0.0  # a constant judge tells nothing


def test_paired_difference_is_the_ppi_mean_of_the_differences():
    labels_b = np.array([0.0, 0.0, 1.0, 0.0])
    judged_b_labeled = np.array([0.3, 0.1, 0.7, 0.2])
    judged_b_unlabeled = np.array([0.5, 0.1, 0.3, 0.3])
    result = ppi_paired_difference(LABELS, labels_b, JUDGED_LABELED, judged_b_labeled, JUDGED_UNLABELED,
                                   judged_b_unlabeled)
    assert result == ppi_mean(LABELS - labels_b, JUDGED_LABELED - judged_b_labeled,
                              JUDGED_UNLABELED - judged_b_unlabeled)
    assert result.null == 0.0


def test_judge_bias_t_interval_by_hand():
    # human - judge = [0.2, -0.2, 0.4, 0.0]: mean 0.1, Var(ddof=1) = 0.2 / 3, se = sqrt(1 / 60)
    result = judge_bias(LABELS, JUDGED_LABELED)
    half = stats.t.ppf(0.975, 3) * np.sqrt(1 / 60)  # 3.182 * 0.1291
    assert (result.mean, result.se, result.n) == pytest.approx((0.1, np.sqrt(1 / 60), 4))
    assert result.ci == pytest.approx((0.1 - half, 0.1 + half))


def _matrix_fixture():
    rng = np.random.default_rng(5)
    judged = rng.random((40, 3))
    labels = np.clip(judged + rng.normal(0, 0.1, (40, 3)), 0, 1)
    labels[20:, 0] = np.nan  # A: 20 labels
    labels[12:, 1] = np.nan  # B: 12 labels
    labels[MIN_LABELS - 1:, 2] = np.nan  # C: 9 labels, too few
    return labels, judged


def test_pairwise_splits_labeled_from_unlabeled_and_holm_adjusts_the_pairs():
    labels, judged = _matrix_fixture()
    result = ppi_pairwise(labels, judged, ["A", "B", "C"])
    assert result.too_few_labels == ("C",) and set(result.means) == {"A", "B"}
    assert result.means["A"] == ppi_mean(labels[:20, 0], judged[:20, 0], judged[20:, 0])
    # C is labeled on 9 questions, so both its pairs lack labels too; A-B is labeled together on 12
    assert result.pairs_too_few_labels == (("A", "C"), ("B", "C"))
    (pair,) = result.pairs
    difference = judged[:, 0] - judged[:, 1]
    assert pair.difference == ppi_mean(labels[:12, 0] - labels[:12, 1], difference[:12], difference[12:])
    assert pair.p_adjusted == pair.difference.p_value  # a family of one


def test_pairwise_holm_across_three_pairs():
    rng = np.random.default_rng(9)
    judged = rng.random((60, 3)) + np.array([0.0, 0.1, 0.3])
    labels = np.where(np.arange(60)[:, None] < 30, judged + rng.normal(0, 0.1, (60, 3)), np.nan)
    result = ppi_pairwise(labels, judged, ["A", "B", "C"], alpha=0.05)
    raw = [pair.difference.p_value for pair in result.pairs]
    assert [(pair.system_a, pair.system_b) for pair in result.pairs] == [("A", "B"), ("A", "C"), ("B", "C")]
    assert [pair.p_adjusted for pair in result.pairs] == pytest.approx(holm_adjust(raw))
    assert [pair.significant for pair in result.pairs] == [pair.p_adjusted < 0.05 for pair in result.pairs]


def test_coverage_against_a_judge_biased_toward_one_system():
    """Truth: mean human score 0.50 (A), 0.55 (B), difference -0.05. The judge compresses the scale
    (0.6 * human + 0.25) and adds 0.15 to B: judge-only means are 0.55 and 0.73, difference -0.18."""
    rng = np.random.default_rng(20231102)
    datasets, questions, n_labels = 500, 2000, 200
    true_means = np.array([0.50, 0.55])
    human = (rng.uniform(0.2, 0.8, (datasets, questions, 1)) + true_means - 0.5
             + rng.normal(0, 0.1, (datasets, questions, 2)))
    judged = 0.6 * human + 0.25 + np.array([0.0, 0.15]) + rng.normal(0, 0.08, (datasets, questions, 2))
    labeled = np.argsort(rng.random((datasets, questions)), axis=1) < n_labels  # 200 uniform questions
    labels = np.where(labeled[..., None], human, np.nan)

    start = time.perf_counter()
    covered = np.zeros((datasets, 3), dtype=bool)  # A, B, A - B
    ppi_se = np.zeros(datasets)  # of A - B
    truths = (true_means[0], true_means[1], true_means[0] - true_means[1])
    for d in range(datasets):
        result = ppi_pairwise(labels[d], judged[d], ("A", "B"))
        intervals = (result.means["A"].ci, result.means["B"].ci, result.pairs[0].difference.ci)
        covered[d] = [low <= truth <= high for (low, high), truth in zip(intervals, truths)]
        ppi_se[d] = result.pairs[0].difference.se
    elapsed = time.perf_counter() - start

    judge_difference = judged[..., 0] - judged[..., 1]
    judge_se = judge_difference.std(axis=1, ddof=1) / np.sqrt(questions)
    judge_only_covered = np.abs(judge_difference.mean(axis=1) - truths[2]) <= Z95 * judge_se
    label_difference = np.where(labeled, labels[..., 0] - labels[..., 1], np.nan)
    labels_only_se = np.nanstd(label_difference, axis=1, ddof=1) / np.sqrt(n_labels)
    ppi_coverage = covered.mean(axis=0)
    print(f"\nPPI++ 95% coverage A {ppi_coverage[0]:.3f}, B {ppi_coverage[1]:.3f}, "
          f"A - B {ppi_coverage[2]:.3f}; judge-only A - B {judge_only_covered.mean():.3f}; "
          f"A - B se PPI++ / labels only {np.mean(ppi_se / labels_only_se):.2f}; "
          f"{datasets} datasets in {elapsed:.2f} s")
    assert (ppi_coverage >= 0.93).all()
    assert judge_only_covered.mean() < 0.5
    assert np.mean(ppi_se / labels_only_se) < 1.0  # what the judge buys: a narrower interval


@pytest.mark.parametrize("call,message", [
    (lambda: ppi_mean([1.0, 0.0, 1.0], [0.5, 0.5], [0.5]), "equal length"),
    (lambda: ppi_mean([1.0, np.nan], [0.5, 0.5], [0.5]), "NaN or infinite"),
    (lambda: ppi_mean([1.0, 0.0], [0.5, 0.5], [np.inf]), "NaN or infinite"),
    (lambda: ppi_mean([1.0], [0.5], [0.5, 0.4]), "at least 2 labels"),
    (lambda: ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, alpha=1.0), "alpha"),
    (lambda: ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, alpha=0.0), "alpha"),
    (lambda: ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=np.nan), "lam"),
    (lambda: ppi_mean(np.ones((2, 2)), np.ones((2, 2)), [0.5]), "1-D"),
    (lambda: ppi_paired_difference(LABELS, LABELS[:3], JUDGED_LABELED, JUDGED_LABELED, [], []),
     "equal length"),
    (lambda: judge_bias([1.0], [0.5]), "at least 2 labels"),
    (lambda: judge_bias(LABELS, JUDGED_LABELED, alpha=-0.1), "alpha"),
    (lambda: ppi_pairwise(np.ones((5, 2)), np.ones((5, 3)), ["A", "B"]), "one shape"),
    (lambda: ppi_pairwise(np.ones((5, 2)), np.ones((5, 2)), ["A", "A"]), "once"),
    (lambda: ppi_pairwise(np.ones((5, 2)), np.full((5, 2), np.nan), ["A", "B"]), "finite"),
    (lambda: ppi_pairwise(np.full((5, 2), np.inf), np.ones((5, 2)), ["A", "B"]), "infinite"),
])
def test_bad_input_is_a_one_line_error(call, message):
    with pytest.raises(StatsInputError, match=message) as error:
        call()
    assert "\n" not in str(error.value)
