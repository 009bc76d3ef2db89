"""PPI++ kernel: hand-computed estimates, standard errors and power-tuned lam on 4 labels and 4 unlabeled
scores (the published z interval, rule=PUBLISHED); the default interval's t quantile and lam 0 below
TUNE_LAM_FROM labels; labels all one value (the exact bound inside the scale, Wilson's interval at its end)
and 0/1 labels (the score interval, against statsmodels' Wilson); the judge's bias t-interval; the pairwise
matrix; coverage by simulation against a judge biased toward one system, and at the label floor."""
import time

import numpy as np
import pytest
from scipy import stats

from stats.errors import StatsInputError
from stats.multiple import holm_adjust
from statsmodels.stats.proportion import proportion_confint

from stats.ppi import (
    MIN_LABELS,
    PUBLISHED,
    TUNE_LAM_FROM,
    IntervalRule,
    judge_bias,
    ppi_mean,
    ppi_mean_batch,
    ppi_paired_difference,
    ppi_pairwise,
)
from stats.ppi_coverage import CoverageDesign, coverage

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
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=0.5, rule=PUBLISHED)
    se = np.sqrt(7 / 192)
    assert result.estimate == pytest.approx(0.675)
    assert result.se == pytest.approx(se)
    assert result.ci == pytest.approx((0.675 - Z95 * se, 0.675 + Z95 * se))
    assert (result.lam, result.n_labeled, result.n_unlabeled, result.confidence) == (0.5, 4, 4, 0.95)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(0.675 / se))
    at_the_null = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=0.5, null=0.675, rule=PUBLISHED)
    assert at_the_null.p_value == pytest.approx(1.0)
    default = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=0.5)  # the t(3) quantile, the same se
    t3 = stats.t.ppf(0.975, 3)
    assert (default.estimate, default.se, default.interval) == (result.estimate, result.se, "t")
    assert default.ci == pytest.approx((0.675 - t3 * se, 0.675 + t3 * se))
    assert default.p_value == pytest.approx(2 * stats.t.sf(0.675 / se, 3))


def test_lam_zero_is_the_classical_mean_and_z_interval():
    # mean 0.75; Var([1, 0, 1, 1], ddof=1) = 0.75 / 3 = 0.25, se = 0.5 / sqrt(4) = 0.25
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, alpha=0.1, lam=0.0, null=0.5, rule=PUBLISHED)
    assert (result.estimate, result.se) == pytest.approx((0.75, 0.25))
    assert result.ci == pytest.approx(stats.norm.interval(0.9, loc=0.75, scale=0.25))
    assert result.p_value == pytest.approx(2 * stats.norm.sf(1.0))  # z = (0.75 - 0.5) / 0.25
    no_unlabeled = ppi_mean(LABELS, JUDGED_LABELED, [], lam=0.7, rule=PUBLISHED)  # N = 0: lam forced to 0
    assert (no_unlabeled.lam, no_unlabeled.estimate, no_unlabeled.se) == pytest.approx((0.0, 0.75, 0.25))


def test_power_tuned_lam_by_hand():
    # Cov(Y, f) over the labeled set, ddof=0: (Y - 0.75) = [0.25, -0.75, 0.25, 0.25],
    #   (f - 0.65) = [0.15, -0.45, -0.05, 0.35], products sum 0.45, / 4 = 0.1125
    # Var(f) over all 8 judge scores, ddof=1: mean 0.575, squared deviations sum 0.595, / 7 = 0.085
    # lam = 0.1125 / ((1 + 4/4) * 0.085) = 45 / 68
    result = ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, rule=PUBLISHED)  # lam tuned from 2 labels
    assert result.lam == pytest.approx(45 / 68)
    assert result.estimate == pytest.approx(0.75 + 45 / 68 * (0.5 - 0.65))
    assert result.se == pytest.approx(ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, lam=45 / 68).se)


def test_power_tuned_lam_is_clipped_to_zero_and_one():
    anti_judge = ppi_mean(LABELS, 1.0 - JUDGED_LABELED, JUDGED_UNLABELED, rule=PUBLISHED)  # Cov < 0
    assert anti_judge.lam == 0.0 and anti_judge.estimate == pytest.approx(0.75)
    # Y = 4 f: Cov = 4 * 0.25 = 1; Var(f) over eight 0/1 scores = 2/7; lam = 1 / (2 * 2/7) = 1.75 -> 1
    f = np.array([0.0, 1.0, 0.0, 1.0])
    assert ppi_mean(4 * f, f, f, rule=PUBLISHED).lam == 1.0
    constant_judge = ppi_mean(LABELS, np.full(4, 0.5), np.full(4, 0.5), rule=PUBLISHED)
    assert constant_judge.lam == 0.0  # a constant judge tells nothing


def test_lam_is_zero_below_tune_lam_from_labels_by_default():
    """Tuning lam on the same few labels the interval is computed from makes it too narrow
    (benchmarks/bench_ppi_coverage.py): below TUNE_LAM_FROM labels the default takes the labels' mean."""
    rng = np.random.default_rng(7)
    judged = rng.random(TUNE_LAM_FROM + 100)
    labels = judged + rng.normal(0, 0.05, judged.size)
    n = TUNE_LAM_FROM - 1
    below = ppi_mean(labels[:n], judged[:n], judged[n:])
    assert below.lam == 0.0 and below.estimate == pytest.approx(labels[:n].mean())
    at = ppi_mean(labels[:n + 1], judged[:n + 1], judged[n + 1:])
    assert at.lam == ppi_mean(labels[:n + 1], judged[:n + 1], judged[n + 1:], rule=PUBLISHED).lam > 0.5


def test_labels_all_one_value_inside_the_scale_get_the_exact_bound():
    # 10 labels of 0.5 on [0, 1]: the share of other labels is at most s = 1 - 0.05^(1/10) = 0.2589, so the
    # mean lies in [0.5 - 0.5 s, 0.5 + 0.5 s]; against 0.25, r = 0.25 / 0.5 and p = (1 - r)^10 = 0.5^10
    result = ppi_mean(np.full(10, 0.5), np.linspace(0, 1, 10), np.linspace(0, 1, 50), null=0.25,
                      bounds=(0, 1))
    share = 1 - 0.05 ** (1 / 10)
    assert (result.estimate, result.constant, result.interval, result.lam) == (0.5, True, "constant", 0.0)
    assert result.ci == pytest.approx((0.5 - 0.5 * share, 0.5 + 0.5 * share))
    assert result.se == pytest.approx(0.5 * share / stats.t.ppf(0.975, 9))
    assert result.p_value == pytest.approx(0.5**10)


def test_labels_all_at_the_end_of_the_scale_get_wilsons_interval():
    # 15 labels of 1 (all 5s on a 1-5 scale): Wilson's interval, [n / (n + q^2), 1], q = t(14) at 97.5%
    result = ppi_mean(np.ones(15), np.linspace(0, 1, 15), np.linspace(0, 1, 50), null=0.5, bounds=(0, 1))
    q = stats.t.ppf(0.975, 14)
    assert result.constant and result.interval == "score" and result.ci[1] == 1.0
    assert result.ci[0] == pytest.approx(15 / (15 + q**2), abs=1e-9)
    assert result.se > 0 and 0 < result.p_value < 0.05
    z_rule = IntervalRule("z", TUNE_LAM_FROM)
    as_statsmodels = ppi_mean(np.ones(15), np.zeros(15), np.zeros(50), bounds=(0, 1), rule=z_rule)
    assert as_statsmodels.ci == pytest.approx(proportion_confint(15, 15, 0.05, "wilson"), abs=1e-9)


def test_zero_one_labels_get_the_score_interval():
    """lam 0 (below TUNE_LAM_FROM labels): 0/1 labels' variance at m is kappa m (1 - m) with kappa =
    s^2 / (p (1 - p)) = n / (n - 1): Wilson's interval for the proportion p with n - 1 trials."""
    labels = np.array([1.0] * 9 + [0.0] * 3)
    z_rule = IntervalRule("z", TUNE_LAM_FROM)
    result = ppi_mean(labels, np.linspace(0, 1, 12), np.linspace(0, 1, 40), bounds=(0, 1), rule=z_rule)
    expected = proportion_confint(0.75 * 11, 11, 0.05, "wilson")
    assert result.interval == "score" and not result.constant and result.estimate == 0.75
    assert result.ci == pytest.approx(expected, abs=1e-9)
    t_interval = ppi_mean(labels, np.linspace(0, 1, 12), np.linspace(0, 1, 40))  # no scale given: t
    assert t_interval.interval == "t" and result.ci[0] < t_interval.ci[0]  # Wilson leans toward the middle


def test_a_constant_label_difference_is_no_exact_zero():
    """15 questions where a's label is always 0.1 above b's: no se 0, no p 0; the p-value is the exact
    chance of 15 equal differences, (1 - r)^15 with r = 0.1 / (0.1 - (-1)), not significant."""
    labels_b = np.linspace(0.0, 0.8, 15)
    judged = np.linspace(0.2, 0.9, 15)
    result = ppi_paired_difference(labels_b + 0.1, labels_b, judged, judged[::-1], judged, judged[::-1],
                                   bounds=(0, 1))
    assert result.constant and result.interval == "constant" and result.se > 0
    assert result.ci[0] < 0.0 < result.ci[1]
    assert result.p_value == pytest.approx((1 - 0.1 / 1.1) ** 15) and result.p_value > 0.05
    strong = ppi_paired_difference(np.ones(15), np.zeros(15), judged, judged, judged, judged, bounds=(0, 1))
    assert strong.interval == "score" and 0 < strong.p_value < 0.01 and strong.ci[1] == 1.0


def test_the_published_rule_keeps_the_point_interval_of_all_equal_labels():
    """Why the scale is needed: PPI++ as published (ppi_py too) gives 15 equal labels a 0-width interval."""
    result = ppi_mean(np.ones(15), np.linspace(0, 1, 15), np.linspace(0, 1, 50), bounds=(0, 1),
                      rule=PUBLISHED)
    assert result.ci == (1.0, 1.0) and result.se == 0.0 and result.p_value == 0.0


def test_the_batch_is_ppi_mean_row_by_row():
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 5, (6, 40)) / 4
    labels[0] = 0.5  # all one value
    labels[1] = rng.integers(0, 2, 40)  # 0/1
    judged = rng.random((6, 40))
    unlabeled = rng.random((6, 100))
    batch = ppi_mean_batch(labels, judged, unlabeled, null=0.3, bounds=(0, 1))
    for row in range(6):
        single = ppi_mean(labels[row], judged[row], unlabeled[row], null=0.3, bounds=(0, 1))
        assert (single.estimate, single.se, single.lam, single.p_value) == pytest.approx(
            (batch.estimate[row], batch.se[row], batch.lam[row], batch.p_value[row]))
        assert single.ci == pytest.approx((batch.low[row], batch.high[row]))


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


def test_the_floor_holds_its_coverage():
    """At MIN_LABELS labels per system, issue 45's design (stats/ppi_coverage.py: 4 systems, 400 questions,
    1-5 marks, the judge +0.10 toward two systems) and a 0/1 metric of good systems: the 95% intervals of the
    means cover in at least 93% of 1,000 simulated data sets, the Holm decisions err (any pair of equal
    systems declared different) in at most 6%. The full table: benchmarks/bench_ppi_coverage.py."""
    start = time.perf_counter()
    likert = coverage(CoverageDesign(), MIN_LABELS, 1000, np.random.default_rng(4510))
    zero_one = coverage(CoverageDesign(mark_means=(1.04,) * 4, question_sd=0.3, answer_sd=0.3, marks=(0, 1)),
                        MIN_LABELS, 1000, np.random.default_rng(4511))
    print(f"\nat {MIN_LABELS} labels: means {likert.mean_coverage.round(3)}, pairs "
          f"{likert.pair_coverage.round(3)}, FWER {likert.fwer:.3f}; 0/1: means "
          f"{zero_one.mean_coverage.round(3)}, FWER {zero_one.fwer:.3f} "
          f"({time.perf_counter() - start:.1f} s)")
    for figures in (likert, zero_one):
        assert figures.mean_coverage.min() >= 0.93 and figures.pair_coverage.min() >= 0.93
        assert figures.fwer <= 0.06


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
    (lambda: ppi_mean(np.ones(10), np.ones(10), np.ones(5)), "all 1: an honest interval needs their scale"),
    (lambda: ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, bounds=(0.5, 1)), "outside their scale"),
    (lambda: ppi_mean(LABELS, JUDGED_LABELED, JUDGED_UNLABELED, bounds=(1, 0)), "low < high"),
    (lambda: ppi_mean_batch(np.ones((2, 3)), np.ones((3, 3)), np.ones((2, 4))), "as many data sets"),
])
def test_bad_input_is_a_one_line_error(call, message):
    with pytest.raises(StatsInputError, match=message) as error:
        call()
    assert "\n" not in str(error.value)
