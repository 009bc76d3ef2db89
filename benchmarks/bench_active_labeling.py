"""Active against uniform labeling (stats/active.py; docs/human-labels.md, "Active labeling (estimators)"):
the labels each needs to reach the same decisions, and the coverage of the fixed-n and anytime intervals.

Simulated data. 4 systems, QUESTIONS questions, human marks 1-5 mapped onto [0, 1] (a latent quality: the
question's difficulty, shared by its answers, plus the system's level plus the answer's own deviation,
rounded onto the scale); true mean differences 0 (A-B), about 0.08 and 0.16 (the others). The judge reads
each mark with noise whose sd varies widely from question to question (log-normal, SPREAD_LOG_SD: a judge
sure of most answers and unsure of some), and, calibrated, reports the mark's posterior mean (its score,
+0.10 toward A) and posterior sd (the spread of its expected-mark distribution): its spread tracks its
error. A global factor on the noise sets the pooled judge-human correlation (0.3, 0.6, 0.9). A question is
labeled for every system at once; its uncertainty is the root of the sum of its answers' squared spreads.

Designs, at the same budget B (expected labels): uniform, pi = B / Q; active, pi proportional to the
uncertainty, floored at FLOOR_SHARES x B / Q (stats.active.sampling_probabilities). Decisions, for the 6 pairs
(Bonferroni, alpha 0.05): "different" or "equivalent" within MARGIN; the decisions the truth sets are A-B
equivalent, the other five different.

Figures per correlation, D data sets each:
- labels needed, fixed-n: the smallest budget (on the BUDGETS grid, interpolated on log budget) at which
  the fixed-n intervals reach the truth's decisions in at least POWER of the data sets; active / uniform;
- labels needed, anytime: the questions in a random order, drawn as their turn comes with the pi of
  ANYTIME_BUDGET, stopping at the first question where no pair is open, for each anytime method
  (stats.active.METHODS; betting for the uniform design and the first floor only: it is the slow one);
  mean labels at the stop and the share of stops with the truth's decisions;
- coverage: of the 95% fixed-n intervals of the 4 means and 6 differences at a budget of
  MIN_ACTIVE_LABELS (over the data sets whose draw reached it) and at the budget each design needs,
  and of the anytime intervals of the 6 differences at every question at once (each at 0.05 / 6); the
  lowest and the mean over the quantities. Truth: the population means, by Monte Carlo.

    .venv/bin/python benchmarks/bench_active_labeling.py    # D = 300: 327 s wall, 93 s CPU, 2 shared cores
    .venv/bin/python benchmarks/bench_active_labeling.py --datasets 100 --correlations 0.6
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.active import (  # noqa: E402
    DIFFERENCE_SCALE,
    METHODS,
    MIN_ACTIVE_LABELS,
    active_confidence_sequence,
    active_ppi_batch,
    decide_pairs,
    draw_labeled,
    sampling_probabilities,
)

QUESTIONS = 1000
LEVELS = np.array([0.0, 0.0, 0.35, 0.7])  # the systems' latent levels (marks), A..D
JUDGE_BIAS = np.array([0.10, 0.0, 0.0, 0.0])  # on [0, 1]
QUESTION_SD, ANSWER_SD, CENTER = 0.7, 0.7, 3.2
SPREAD_LOG_SD = (2.5, 0.3)  # how much the judge's mark spread varies between questions, and between a
#                             question's answers (a hard question makes the judge unsure of all of them)
CORRELATIONS = (0.3, 0.6, 0.9)
BUDGETS = (50, 65, 80, 100, 130, 170, 220, 290, 380, 500, 650)
ANYTIME_BUDGET = 300  # expected labels had every question been reached: pi of the anytime runs
FLOOR_SHARES = (0.5, 0.25)  # the active design's floor, a share of the uniform rate B / Q
MARGIN = 0.06
ALPHA = 0.05
POWER = 0.8
PAIRS = tuple(combinations(range(len(LEVELS)), 2))
TRUTH_DRAWS = 400_000
MARK_MEAN, MARK_VARIANCE = 0.61, 0.064  # of the human marks, pooled over the systems (what a calibrated
#                                          judge shrinks its reading toward)


@dataclass(frozen=True)
class DataSets:
    labels: np.ndarray  # (D, Q, S) human marks on [0, 1]
    judged: np.ndarray  # (D, Q, S)
    uncertainty: np.ndarray  # (D, Q)


def human_marks(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """(..., Q, S) human marks on [0, 1]."""
    question = rng.normal(0.0, QUESTION_SD, shape[:-1] + (1,))
    latent = CENTER + LEVELS + question + rng.normal(0.0, ANSWER_SD, shape)
    return (np.clip(np.round(latent), 1, 5) - 1.0) / 4.0


def simulate(rng: np.random.Generator, datasets: int, spread_scale: float) -> DataSets:
    labels = human_marks(rng, (datasets, QUESTIONS, LEVELS.size))
    between, within = SPREAD_LOG_SD
    log_spread = (rng.normal(0.0, between, labels.shape[:-1] + (1,)) + rng.normal(0.0, within, labels.shape)
                  - (between**2 + within**2) / 2.0)
    noise = spread_scale * np.exp(log_spread)  # the sd of the judge's private reading of the mark
    reading = labels + noise * rng.standard_normal(labels.shape)
    shrink = MARK_VARIANCE / (MARK_VARIANCE + noise**2)  # a calibrated judge: the mark's posterior mean
    judged = np.clip(MARK_MEAN + shrink * (reading - MARK_MEAN) + JUDGE_BIAS, 0.0, 1.0)
    spread = np.sqrt(shrink) * noise  # and its posterior sd: the spread of its expected-mark distribution
    return DataSets(labels, judged, np.sqrt((spread**2).sum(axis=2)))


def spread_for(correlation: float, rng: np.random.Generator) -> float:
    """The spread factor whose pooled judge-human correlation is `correlation` (bisection)."""
    low, high = 0.0, 5.0
    for _ in range(40):
        middle = (low + high) / 2.0
        data = simulate(rng, 20, middle)
        pooled = np.corrcoef(data.labels.ravel(), data.judged.ravel())[0, 1]
        low, high = (middle, high) if pooled > correlation else (low, middle)
    return (low + high) / 2.0


def truth(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The population means of the systems and of the pairs' differences (Monte Carlo)."""
    means = human_marks(rng, (TRUTH_DRAWS, LEVELS.size)).mean(axis=0)
    return means, np.array([means[a] - means[b] for a, b in PAIRS])


def target_decisions(differences: np.ndarray) -> np.ndarray:
    return np.where(np.abs(differences) < 1e-3, "equivalent", "different")


def probabilities(data: DataSets, budget: float, floor_share: float | None) -> np.ndarray:
    """The uniform design (floor_share None) or the active one floored at floor_share x B / Q."""
    if floor_share is None:
        return np.full(data.uncertainty.shape, budget / QUESTIONS)
    floor = floor_share * budget / QUESTIONS
    return np.stack([sampling_probabilities(row, budget, floor).probabilities for row in data.uncertainty])


def pair_arrays(data: DataSets) -> tuple[np.ndarray, np.ndarray]:
    """(D, Q, pairs) per-question differences of the labels and of the judge's scores."""
    first, second = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    return (data.labels[..., first] - data.labels[..., second],
            data.judged[..., first] - data.judged[..., second])


def fixed_n(data: DataSets, pi: np.ndarray, drawn: np.ndarray, alpha: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(low, high) of the means (D, S) and of the differences (D, pairs) at `alpha` each."""
    def intervals(labels: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        columns = labels.shape[2]
        y = np.where(drawn[..., None], labels, np.nan).transpose(0, 2, 1).reshape(-1, QUESTIONS)
        f = judged.transpose(0, 2, 1).reshape(-1, QUESTIONS)
        batch = active_ppi_batch(y, f, np.repeat(pi, columns, axis=0), alpha)
        return batch.low.reshape(-1, columns), batch.high.reshape(-1, columns)

    return (*intervals(data.labels, data.judged), *intervals(*pair_arrays(data)))


def reached(data: DataSets, pi: np.ndarray, uniforms: np.ndarray, target: np.ndarray) -> float:
    """The share of data sets whose fixed-n decisions (Bonferroni over the pairs) are the truth's; drawn
    with common random numbers (uniforms < pi: the same uniforms for every design and budget, so that
    the comparison is not blurred by independent draws)."""
    drawn = uniforms < pi
    *_, low, high = fixed_n(data, pi, drawn, ALPHA / len(PAIRS))
    return float((decide_pairs(low, high, MARGIN) == target).all(axis=1).mean())


def labels_needed(shares: list[float]) -> float:
    """The budget where the share first reaches POWER, interpolated on log budget; inf if never."""
    for index, share in enumerate(shares):
        if share >= POWER:
            if index == 0:
                return float(BUDGETS[0])
            before, step = shares[index - 1], np.log(BUDGETS[index] / BUDGETS[index - 1])
            return float(BUDGETS[index - 1] * np.exp(step * (POWER - before) / (share - before)))
    return float("inf")


def covered(data: DataSets, pi: np.ndarray, rng: np.random.Generator, means: np.ndarray,
            differences: np.ndarray) -> tuple[float, float]:
    """(lowest, mean) coverage over the 4 means and 6 differences of the 95% fixed-n intervals, over the
    data sets whose draw gave at least MIN_ACTIVE_LABELS labels (the others get no interval)."""
    low_m, high_m, low_d, high_d = fixed_n(data, pi, draw_labeled(pi, rng), ALPHA)
    claimed = ~np.isnan(low_m[:, 0])
    cover = np.concatenate([(low_m <= means) & (means <= high_m),
                            (low_d <= differences) & (differences <= high_d)], axis=1)[claimed]
    return float(cover.mean(axis=0).min()), float(cover.mean())


def anytime(data: DataSets, pi: np.ndarray, rng: np.random.Generator, differences: np.ndarray,
            target: np.ndarray, method: str) -> tuple[float, float, float]:
    """(mean labels at the stop, share of stops with the truth's decisions, lowest time-uniform coverage)."""
    datasets = pi.shape[0]
    order = np.argsort(rng.random(pi.shape), axis=1)
    rows = np.arange(datasets)[:, None]
    pi = pi[rows, order]
    drawn = draw_labeled(pi, rng)
    labels, judged = (values[rows, order] for values in pair_arrays(data))
    columns = len(PAIRS)
    sequence = active_confidence_sequence(
        np.where(drawn[..., None], labels, np.nan).transpose(1, 0, 2).reshape(QUESTIONS, -1),
        judged.transpose(1, 0, 2).reshape(QUESTIONS, -1),
        np.repeat(pi.T, columns, axis=1), floor=np.repeat(pi.min(axis=1), columns), alpha=ALPHA,
        family_size=columns, scale=DIFFERENCE_SCALE, method=method)
    lower = sequence.lower.reshape(QUESTIONS, datasets, columns)
    upper = sequence.upper.reshape(QUESTIONS, datasets, columns)
    cover = ((lower <= differences) & (differences <= upper)).all(axis=0).mean(axis=0).min()
    decisions = decide_pairs(lower, upper, MARGIN)
    settled = (decisions != "open").all(axis=2)
    stop = np.where(settled.any(axis=0), settled.argmax(axis=0), QUESTIONS - 1)
    labels_at_stop = np.cumsum(drawn, axis=1)[np.arange(datasets), stop]
    right = (decisions[stop, np.arange(datasets)] == target).all(axis=1)
    return float(labels_at_stop.mean()), float(right.mean()), float(cover)


def run_setting(correlation: float, datasets: int, seed: int, means: np.ndarray,
                differences: np.ndarray) -> dict:
    """Every figure of one correlation, keyed by (figure, design): design None is uniform, a number the
    active design's floor share; betting sequences for the uniform design and the first floor share."""
    rng = np.random.default_rng([seed, int(round(100 * correlation))])
    data = simulate(rng, datasets, spread_for(correlation, rng))
    target = target_decisions(differences)
    uniforms = rng.random(data.uncertainty.shape)
    row: dict = {}
    designs = (None, *FLOOR_SHARES)
    for design in designs:
        shares = [reached(data, probabilities(data, budget, design), uniforms, target) for budget in BUDGETS]
        row["need", design] = labels_needed(shares)
    for design in designs:
        need = min(row["need", design], QUESTIONS) if np.isfinite(row["need", design]) else BUDGETS[-1]
        row["cover at min", design] = covered(data, probabilities(data, MIN_ACTIVE_LABELS, design), rng,
                                              means, differences)
        row["cover at need", design] = covered(data, probabilities(data, need, design), rng, means,
                                               differences)
        for method in METHODS if design in designs[:2] else METHODS[1:]:
            row[method, design] = anytime(data, probabilities(data, ANYTIME_BUDGET, design), rng,
                                          differences, target, method)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=300, help="simulated data sets per correlation")
    parser.add_argument("--correlations", type=float, nargs="+", default=list(CORRELATIONS))
    parser.add_argument("--seed", type=int, default=49)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    means, differences = truth(np.random.default_rng([args.seed, 0]))
    print(f"{args.datasets} data sets per correlation, {QUESTIONS} questions, 4 systems; true means "
          f"{np.round(means, 3).tolist()}; margin {MARGIN}; power {POWER}; anytime budget {ANYTIME_BUDGET}; "
          f"active floors {FLOOR_SHARES} x B / Q\n")
    rows = {correlation: run_setting(correlation, args.datasets, args.seed, means, differences)
            for correlation in args.correlations}
    _print_needs(rows)
    _print_coverage(rows)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


def _print_needs(rows: dict) -> None:
    print("Labels needed to reach the truth's decisions (A-B equivalent, the rest different); active / "
          "uniform in brackets; for the anytime stops, then the share of stops with the truth's decisions:\n")
    floors = [f"active, floor {share}" for share in FLOOR_SHARES]
    headers = (["fixed-n: uniform"] + [f"fixed-n: {floor}" for floor in floors]
               + ["anytime (asymptotic): uniform"] + [f"anytime (asymptotic): {floor}" for floor in floors]
               + ["anytime (betting): uniform", f"anytime (betting): {floors[0]}"])
    print("| judge-human correlation | " + " | ".join(headers) + " |")
    print("| --- |" + " --- |" * len(headers))
    for correlation, row in rows.items():
        uniform = row["need", None]
        cells = [f"{uniform:.0f}"] + [f"{row['need', share]:.0f} ({row['need', share] / uniform:.2f})"
                                      for share in FLOOR_SHARES]
        for method, shares in (("asymptotic", FLOOR_SHARES), ("betting", FLOOR_SHARES[:1])):
            base = row[method, None]
            cells.append(f"{base[0]:.0f}; {base[1]:.2f}")
            cells += [f"{row[method, share][0]:.0f} ({row[method, share][0] / base[0]:.2f}); "
                      f"{row[method, share][1]:.2f}" for share in shares]
        print(f"| {correlation} | " + " | ".join(cells) + " |")


def _print_coverage(rows: dict) -> None:
    print("\nCoverage, lowest / mean over the 4 means and 6 differences (fixed-n, 95%), or lowest over the 6 "
          "differences at every question at once (anytime, each at 0.05 / 6); uniform, then the active "
          f"floors {FLOOR_SHARES}:\n")
    print(f"| judge-human correlation | fixed-n at {MIN_ACTIVE_LABELS} labels | fixed-n at the labels "
          "needed | anytime (asymptotic) | anytime (betting) |")
    print("| --- | --- | --- | --- | --- |")
    designs = (None, *FLOOR_SHARES)
    for correlation, row in rows.items():
        cells = ["; ".join(f"{row[at, design][0]:.3f} / {row[at, design][1]:.3f}" for design in designs)
                 for at in ("cover at min", "cover at need")]
        cells.append("; ".join(f"{row['asymptotic', design][2]:.3f}" for design in designs))
        cells.append("; ".join(f"{row['betting', design][2]:.3f}" for design in designs[:2]))
        print(f"| {correlation} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
