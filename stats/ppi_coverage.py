"""Coverage of the PPI++ intervals (stats/ppi.py) at few labels, by simulation: what sets the label floor
MIN_LABELS and the interval rule (benchmarks/bench_ppi_coverage.py prints the table, tests/stats/test_ppi.py
holds the floor; docs/human-labels.md#few-labels-the-interval-and-the-floor).

The design (issue 45's): 4 systems A-D, 400 questions. A latent quality per answer, normal with a part
shared by the question (sd 0.8) and a part of the answer's own (sd 0.7) around the systems' common mean
mark 3.4; the human mark is it rounded onto the 1-5 scale, so every pair's true difference is 0. The judge
reads the latent quality compressed onto [0, 1] (0.1 + 0.8 of the scale) with noise (sd 0.08), plus 0.10
for A and B: the judge alone separates A and B from C and D. The first n questions are labeled for every
system (the questions are exchangeable, so that is a uniform sample; `ccrs label` labels every system of a
question). The truth is each system's expected human mark on [0, 1], computed exactly from the normal
distribution, not estimated. Other designs (marks crowded at the top of the scale, a 0/1 metric) are the
same model with other means, spreads and scales.

Per label count: the share of 95% intervals holding the truth, per system and per pair; the family-wise
error of the Holm decisions, the share of data sets with any pair of true difference 0 declared different.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import stats

from stats.multiple import holm_adjust
from stats.ppi import SMALL_SAMPLE, IntervalRule, ppi_mean_batch

UNIT_SCALE = (0.0, 1.0)


@dataclass(frozen=True)
class CoverageDesign:
    questions: int = 400
    mark_means: tuple[float, ...] = (3.4, 3.4, 3.4, 3.4)   # each system's mean latent mark
    judge_bias: tuple[float, ...] = (0.10, 0.10, 0.0, 0.0)  # added to the judge's score, on [0, 1]
    question_sd: float = 0.8                                 # latent quality shared by a question's answers
    answer_sd: float = 0.7                                   # each answer's own
    judge_noise: float = 0.08
    marks: tuple[int, int] = (1, 5)                          # the human scale (integer marks)

    @property
    def systems(self) -> int:
        return len(self.mark_means)


@dataclass(frozen=True)
class CoverageFigures:
    n_labels: int
    datasets: int
    mean_coverage: np.ndarray   # per system
    pair_coverage: np.ndarray   # per pair, in combinations order (A-B, A-C, ..., C-D)
    fwer: float                 # any pair of true difference 0 declared different (Holm, alpha)
    constant_share: float       # share of the systems' label sets that were all one value
    mean_width: float           # of the systems' intervals, on [0, 1]


def true_means(design: CoverageDesign) -> np.ndarray:
    """Each system's expected human mark mapped onto [0, 1]: the latent normal's mass on each mark."""
    low, high = design.marks
    sd = np.hypot(design.question_sd, design.answer_sd)
    marks = np.arange(low, high + 1)
    upper = np.append(marks[:-1] + 0.5, np.inf)
    lower = np.insert(marks[1:] - 0.5, 0, -np.inf)
    means = np.asarray(design.mark_means)[:, None]
    mass = stats.norm.cdf((upper - means) / sd) - stats.norm.cdf((lower - means) / sd)
    return (mass @ marks - low) / (high - low)


def simulate(design: CoverageDesign, datasets: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(human labels on [0, 1], judge scores), each (datasets, questions, systems)."""
    shape = (datasets, design.questions, design.systems)
    latent = (np.asarray(design.mark_means) + rng.normal(0.0, design.question_sd, shape[:2] + (1,))
              + rng.normal(0.0, design.answer_sd, shape))
    low, high = design.marks
    labels = (np.clip(np.round(latent), low, high) - low) / (high - low)
    judged = (0.1 + 0.8 * (latent - low) / (high - low) + np.asarray(design.judge_bias)
              + rng.normal(0.0, design.judge_noise, shape))
    return labels, np.clip(judged, 0.0, 1.0)


def coverage(design: CoverageDesign, n_labels: int, datasets: int, rng: np.random.Generator,
             rule: IntervalRule = SMALL_SAMPLE, alpha: float = 0.05) -> CoverageFigures:
    """The figures of `datasets` simulated data sets with the first n_labels questions labeled."""
    labels, judged = simulate(design, datasets, rng)
    truth = true_means(design)
    means = [_estimate(labels[..., s], judged[..., s], n_labels, rule, alpha, UNIT_SCALE)
             for s in range(design.systems)]
    pairs = list(combinations(range(design.systems), 2))
    differences = [_estimate(labels[..., a] - labels[..., b], judged[..., a] - judged[..., b], n_labels,
                             rule, alpha, (-1.0, 1.0)) for a, b in pairs]
    adjusted = np.array([holm_adjust(row) for row in np.column_stack([d.p_value for d in differences])])
    null_pairs = [index for index, (a, b) in enumerate(pairs) if truth[a] == truth[b]]
    return CoverageFigures(
        n_labels, datasets,
        np.array([_covered(estimate, truth[s]) for s, estimate in enumerate(means)]),
        np.array([_covered(estimate, truth[a] - truth[b]) for estimate, (a, b) in zip(differences, pairs)]),
        float((adjusted[:, null_pairs] < alpha).any(axis=1).mean()),
        float(np.mean([estimate.constant.mean() for estimate in means])),
        float(np.mean([np.mean(estimate.high - estimate.low) for estimate in means])))


def _estimate(labels: np.ndarray, judged: np.ndarray, n: int, rule: IntervalRule, alpha: float,
              bounds: tuple[float, float]):
    return ppi_mean_batch(labels[:, :n], judged[:, :n], judged[:, n:], alpha, rule=rule, bounds=bounds)


def _covered(estimate, truth: float) -> float:
    return float(((estimate.low <= truth) & (truth <= estimate.high)).mean())
