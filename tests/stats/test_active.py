"""Active labeling kernels (stats/active.py): the IPW PPI++ estimate is unbiased over the draws (every draw
of 3 items enumerated by hand), the design's probabilities sum to the budget above the floor, the uniform
design is stats/ppi.py's PPI++, the fixed-n and anytime intervals cover at the smallest accepted size, and
the anytime intervals look only at the labels before each item."""
from itertools import product

import numpy as np
import pytest
from scipy.stats import norm

from stats.active import (
    DIFFERENCE_SCALE,
    METHODS,
    MIN_ACTIVE_LABELS,
    _effective_labels,
    _predictable_z,
    active_confidence_sequence,
    active_ppi_batch,
    active_ppi_difference,
    active_ppi_mean,
    decide_pairs,
    draw_labeled,
    sampling_probabilities,
)
from stats.errors import StatsInputError
from stats.ppi import IntervalRule, ppi_mean, ppi_paired_difference

LABELS = np.array([1.0, 0.0, 0.5])
JUDGED = np.array([0.8, 0.2, 0.9])
PROBABILITIES = np.array([0.5, 0.25, 1.0])
T_RULE = IntervalRule("t", 2, use_scale=False)  # stats.ppi's t interval, lam as passed


def test_the_estimate_is_unbiased_over_every_draw_of_three_items():
    # g = 0.5 f + 0.1 = [0.5, 0.2, 0.55]; the residuals y - g = [0.5, -0.2, -0.05] weighted by 1 / pi:
    # [1.0, -0.8, -0.05]. Item 3 (pi = 1) is always drawn: the draws of items 1, 2 have probabilities
    # 0.5 x 0.75, 0.5 x 0.25, ... and the estimate is mean(g) + (sum of the drawn weighted residuals) / 3.
    # E = mean(g) + (0.5 x 1.0 + 0.25 x -0.8 + 1 x -0.05) / 3 = 1.25 / 3 + 0.25 / 3 = 0.5 = mean(y)
    draws = np.array([pattern for pattern in product([False, True], repeat=3) if pattern[2]])
    chance = np.prod(np.where(draws, PROBABILITIES, 1.0 - PROBABILITIES), axis=1)
    labels = np.where(draws, LABELS, np.nan)
    batch = active_ppi_batch(labels, np.tile(JUDGED, (len(draws), 1)), PROBABILITIES, lam=0.5, offset=0.1)
    assert chance.sum() == pytest.approx(1.0)
    assert batch.estimate[draws[:, 0] & ~draws[:, 1]] == pytest.approx([(1.25 + 1.0 - 0.05) / 3])
    assert float(chance @ batch.estimate) == pytest.approx(LABELS.mean())
    assert np.isnan(batch.low).all()  # 3 labels at most: no interval below MIN_ACTIVE_LABELS


def test_probabilities_sum_to_the_budget_above_the_floor():
    uncertainty = np.random.default_rng(0).lognormal(0.0, 1.5, 400)
    design = sampling_probabilities(uncertainty, 60.0, 0.05)
    pi = design.probabilities
    assert pi.sum() == pytest.approx(60.0, rel=1e-9)
    assert pi.min() >= 0.05 and pi.max() <= 1.0 and (pi == 1.0).any() and (pi == 0.05).any()
    free = (pi > 0.05) & (pi < 1.0)  # proportional to the uncertainty between the clips
    assert np.ptp(pi[free] / uncertainty[free]) == pytest.approx(0.0, abs=1e-12)
    assert design.rule.to_json() == {"kind": "proportional to uncertainty", "budget": 60.0, "floor": 0.05,
                                     "lowest": 0.05, "n_items": 400}


def test_flat_or_zero_uncertainty_and_bad_budgets():
    assert sampling_probabilities(np.full(10, 0.3), 4, 0.1).probabilities == pytest.approx(np.full(10, 0.4))
    assert sampling_probabilities(np.full(10, 0.3), 4, 0.1).rule.kind == "uniform"
    sure = sampling_probabilities(np.array([0.0, 0.0, 1.0, 2.0]), 3.0, 0.1).probabilities
    assert sure == pytest.approx([0.5, 0.5, 1.0, 1.0])  # the sure items share what the unsure cannot take
    for budget, floor in ((0.5, 0.1), (11, 0.1), (4, 0.0), (4, 0.5)):
        with pytest.raises(StatsInputError):
            sampling_probabilities(np.arange(10.0), budget, floor)
    with pytest.raises(StatsInputError):
        sampling_probabilities(np.array([1.0, -1.0]), 1.0, 0.1)


def _world(rng, n_items=400, datasets=1):
    """Labels on [0, 1] and a judge whose error spread (what it reports) varies by item."""
    y = np.clip(rng.normal(0.6, 0.2, (datasets, n_items)), 0.0, 1.0)
    spread = 0.15 * rng.lognormal(0.0, 0.8, (datasets, n_items))
    f = np.clip(y + 0.1 + spread * rng.standard_normal((datasets, n_items)), 0.0, 1.0)
    return y, f, spread


def _clipped_normal_mean(mean: float, sd: float) -> float:
    """E[clip(X, 0, 1)], X ~ N(mean, sd^2): the population mean of _world's labels."""
    low, high = (0.0 - mean) / sd, (1.0 - mean) / sd
    inside = mean * (norm.cdf(high) - norm.cdf(low)) + sd * (norm.pdf(low) - norm.pdf(high))
    return float(inside + norm.sf(high))


def test_the_uniform_design_is_ppi_plus_plus():
    rng = np.random.default_rng(1)
    y, f, _ = (values[0] for values in _world(rng))
    drawn = np.zeros(400, bool)
    drawn[rng.choice(400, 60, replace=False)] = True
    pi = np.full(400, 60 / 400)
    ours = active_ppi_mean(np.where(drawn, y, np.nan), f, pi)
    # the same estimate as PPI++ whose lam weighs the unlabeled mean only: lam x N_u / N
    theirs = ppi_mean(y[drawn], f[drawn], f[~drawn], lam=ours.lam * 340 / 400, rule=T_RULE)
    assert ours.lam > 0.3 and ours.n_labeled == 60
    assert ours.estimate == pytest.approx(theirs.estimate, abs=1e-12)
    assert ours.se == pytest.approx(theirs.se, rel=0.02)
    assert ours.ci == pytest.approx(theirs.ci, abs=0.003)
    b = np.clip(y - 0.05 + 0.1 * rng.standard_normal(400), 0.0, 1.0)
    pair = active_ppi_difference(np.where(drawn, y, np.nan), np.where(drawn, b, np.nan), f, f - 0.05, pi)
    on_differences = ppi_mean(y[drawn] - b[drawn], np.full(60, 0.05), np.full(340, 0.05),
                              lam=pair.lam * 340 / 400, rule=T_RULE)
    tuned = ppi_paired_difference(y[drawn], b[drawn], f[drawn], f[drawn] - 0.05, f[~drawn], f[~drawn] - 0.05,
                                  rule=T_RULE)
    assert pair.estimate == pytest.approx(on_differences.estimate, abs=1e-12)
    assert pair.estimate == pytest.approx(tuned.estimate, abs=1e-12)  # a constant judge difference: lam 0


def test_below_the_smallest_size_one_line_error():
    y, f, _ = (values[0] for values in _world(np.random.default_rng(2), n_items=100))
    labels = np.where(np.arange(100) < MIN_ACTIVE_LABELS - 1, y, np.nan)
    with pytest.raises(StatsInputError, match=f"^{MIN_ACTIVE_LABELS - 1} labels: .* at least "
                                              f"{MIN_ACTIVE_LABELS}$"):
        active_ppi_mean(labels, f, np.full(100, 0.3))
    with pytest.raises(StatsInputError, match="same questions"):
        active_ppi_difference(labels, np.full(100, 0.5), f, f, np.full(100, 0.3))


@pytest.mark.parametrize("floor_share", [0.5, 0.25])
def test_fixed_n_coverage_at_the_smallest_size(floor_share):
    # the floor at half and at a quarter of the uniform rate; about half the draws reach 50 labels
    rng = np.random.default_rng(3)
    y, f, spread = _world(rng, n_items=300, datasets=600)
    truth = _clipped_normal_mean(0.6, 0.2)
    budget = MIN_ACTIVE_LABELS + 5
    pi = np.stack([sampling_probabilities(row, budget, floor_share * budget / 300).probabilities
                   for row in spread])
    drawn = draw_labeled(pi, rng)
    batch = active_ppi_batch(np.where(drawn, y, np.nan), f, pi)
    claimed = batch.n_labeled >= MIN_ACTIVE_LABELS
    covered = (batch.low <= truth) & (truth <= batch.high)
    assert claimed.mean() > 0.6 and (np.isnan(batch.low) == ~claimed).all()
    assert covered[claimed].mean() >= 0.93


@pytest.mark.parametrize("method", METHODS)
def test_anytime_coverage_at_every_item(method):
    rng = np.random.default_rng(4)
    y, f, spread = _world(rng, n_items=200, datasets=300)
    truth = _clipped_normal_mean(0.6, 0.2)
    pi = np.stack([sampling_probabilities(row, 60, 0.1).probabilities for row in spread])
    drawn = draw_labeled(pi, rng)
    sequence = active_confidence_sequence(np.where(drawn, y, np.nan).T, f.T, pi.T, floor=pi.min(axis=1),
                                          alpha=0.1, family_size=2, method=method)
    assert sequence.alpha == 0.05 and sequence.lower.shape == (200, 300)
    assert ((sequence.lower <= truth) & (truth <= sequence.upper)).all(axis=0).mean() >= 0.93
    # betting pays for the range the floor allows (Z within [-9, 10] here): valid, but wide
    assert np.median(sequence.upper[-1] - sequence.lower[-1]) < {"betting": 0.8, "asymptotic": 0.25}[method]


def test_the_anytime_intervals_use_only_earlier_labels():
    rng = np.random.default_rng(5)
    y, f, _ = (values[0] for values in _world(rng, n_items=120))
    pi = np.full(120, 0.5)
    labels = np.where(rng.random(120) < pi, y, np.nan)
    changed = labels.copy()
    changed[80:] = np.where(np.isnan(labels[80:]), np.nan, 1.0 - np.nan_to_num(labels[80:]))
    for method in METHODS:
        first, second = (active_confidence_sequence(values[:, None], f[:, None], pi, floor=0.5, method=method)
                         for values in (labels, changed))
        assert first.lower[:80] == pytest.approx(second.lower[:80])
        assert first.upper[:80] == pytest.approx(second.upper[:80])
        assert int(first.labels_seen[-1, 0]) == int((~np.isnan(labels)).sum())


def test_the_weighted_observations_stay_within_the_range_the_floor_sets():
    rng = np.random.default_rng(6)
    differences = rng.choice([-1.0, 0.0, 1.0], (3, 500))
    judged = rng.uniform(-1.0, 1.0, (3, 500))
    pi = rng.uniform(0.2, 1.0, (3, 500))
    z = _predictable_z(np.where(rng.random((3, 500)) < pi, differences, np.nan), judged, pi,
                       *DIFFERENCE_SCALE)
    bound = 2.0 / 0.2 - 1.0  # [hi - w / floor, lo + w / floor] with w = 2
    assert np.abs(z).max() <= bound + 1e-12


def test_the_t_quantile_takes_kish_effective_labels():
    # weights 1 / pi of the labeled = [2, 4, 1]: (2 + 4 + 1)^2 / (4 + 16 + 1) = 49 / 21; equal weights: n
    labeled = np.array([[True, True, True, False]])
    pi = np.array([[0.5, 0.25, 1.0, 0.5]])
    assert _effective_labels(pi, labeled) == pytest.approx([49 / 21])
    assert _effective_labels(np.full((1, 4), 0.2), labeled) == pytest.approx([3.0])


def test_decisions():
    decisions = decide_pairs([0.01, -0.04, -0.2, -0.01], [0.2, 0.04, 0.1, 0.3], margin=0.05)
    assert decisions.tolist() == ["different", "equivalent", "open", "open"]
    with pytest.raises(StatsInputError):
        decide_pairs([0.0], [0.1], margin=0.0)


def test_anytime_inputs_are_checked():
    labels, judged, pi = np.array([[0.5], [np.nan]]), np.array([[0.4], [0.6]]), np.array([0.5, 0.5])
    cases = ((0.6, "betting", labels), (0.5, "bayes", labels), (0.5, "betting", labels + 1))
    for floor, method, values in cases:  # a floor above a probability, no such method, labels off the scale
        with pytest.raises(StatsInputError):
            active_confidence_sequence(values, judged, pi, floor=floor, method=method)
