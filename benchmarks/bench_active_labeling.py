"""Active against uniform labeling (stats/active.py; docs/human-labels.md, "Active labeling (estimators)"):
the labels each needs to reach the same decisions, and the coverage of the fixed-n and anytime intervals.

Simulated data. 4 systems, QUESTIONS questions; each answer has a latent quality on the 1-5 marks' scale
(the question's difficulty, shared by its answers, plus the system's level, LEVELS, plus the answer's own
deviation) and an uncertainty sd, log-normal (SPREAD_LOG_SD: mostly the question's, so a judge sure of most
questions and unsure of some) times a global factor that sets the pooled judge-human correlation (0.3, 0.6,
0.9, found by bisection and printed as measured). Two simulated judges (--judge), both calibrated, both
+0.10 toward system A (JUDGE_BIAS), both reporting a score (the mean of their expected-mark distribution)
and a spread (its sd) that tracks their error:
- marks (the default): the answer's human mark is uncertain: annotators would give mark m with the chance
  that N(latent, sd^2), rounded onto 1-5, gives m, and the human label is one draw of it; the judge's
  expected-mark distribution is that distribution (its score the mean, its spread the sd). Where an answer
  is ambiguous the spread can exceed the marks' own spread over the answers (up to 2 marks: "1 or 5").
- reading: the human mark is the rounded latent; the judge reads it with Gaussian noise of that sd and
  reports the mark's posterior mean and sd (shrunk toward the pooled marks). Its spread never exceeds the
  marks' own spread, which bounds what any design saves: at most about rho^2 of the labels (below).
A question is labeled for every system at once; its uncertainty is the root of the sum of its answers'
squared spreads (the sd of its residuals, summed over the pairs, up to a factor).

Designs, at the same budget B (expected labels): uniform, pi = B / Q; active, pi proportional to the
uncertainty, floored at FLOOR_SHARES x B / Q (stats.active.sampling_probabilities). Decisions, for the 6 pairs
(Bonferroni, alpha 0.05): "different" or "equivalent" within MARGIN; the decisions the truth sets are A-B
equivalent, the other five different.

Figures per correlation, D data sets each:
- labels needed, fixed-n: the smallest budget (on the BUDGETS grid, interpolated on log budget) at which
  the fixed-n intervals reach the truth's decisions in at least POWER of the data sets; active / uniform
  (common random draws for the designs); "> 1000": not within the QUESTIONS questions;
- labels for the same width: the budget at which the active design's pair intervals are, in mean squared
  width, as narrow as uniform's at BUDGETS[WIDTH_AT] labels (defined where no decision settles, and not
  bound by the smallest size MIN_ACTIVE_LABELS);
- labels needed, anytime: the questions in a random order, drawn as their turn comes with the pi of
  ANYTIME_BUDGET, stopping at the first question where no pair is open, for each anytime method
  (stats.active.METHODS; betting for the uniform design and the first floor only: it is the slow one);
  mean labels at the stop and the share of stops with the truth's decisions;
- coverage: of the 95% fixed-n intervals of the 4 means and 6 differences at a budget of
  MIN_ACTIVE_LABELS (over the data sets whose draw reached it: about half) and at the budget each design
  needs, over COVERAGE_DATASETS fresh data sets per cell (the lowest of 180 readings from 300 data sets
  each falls below 0.93 for exact 95% intervals: sd 0.013 each), and of the anytime intervals of the 6
  differences at every question at once (each at 0.05 / 6); the lowest and the mean over the
  quantities. Truth: the population means, by Monte Carlo (marks: the expected mark of each drawn answer).
- (mean u)^2 / mean u^2: the labels ratio that pi proportional to u would reach without a floor, were u^2
  the residual variance (Neyman allocation; Zrnic and Candes' optimal rule): what the judge allows.

    .venv/bin/python benchmarks/bench_active_labeling.py    # D = 300, 1500 per coverage cell: 4-6 min
    .venv/bin/python benchmarks/bench_active_labeling.py --judge reading --datasets 100 --correlations 0.6
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy.special import ndtr

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
LEVELS = np.array([0.0, 0.0, 0.6, 1.2])  # the systems' latent levels (marks), A..D
JUDGE_BIAS = np.array([0.10, 0.0, 0.0, 0.0])  # on [0, 1]
QUESTION_SD, ANSWER_SD, CENTER = 0.7, 0.7, 3.0
SPREAD_LOG_SD = (2.5, 0.3)  # how much the judge's mark spread varies between questions, and between a
#                             question's answers (a hard question makes the judge unsure of all of them)
MARKS = np.arange(1.0, 6.0)
JUDGES = ("marks", "reading")  # the simulated judges (module docstring); the first is the default
CORRELATIONS = (0.3, 0.6, 0.9)
BUDGETS = (50, 65, 80, 100, 130, 170, 220, 290, 380, 500, 650, 800, 1000)
ANYTIME_BUDGET = 600  # expected labels had every question been reached: pi of the anytime runs
FLOOR_SHARES = (0.5, 0.25)  # the active design's floor, a share of the uniform rate B / Q
MARGIN = 0.10
ALPHA = 0.05
POWER = 0.8
PAIRS = tuple(combinations(range(len(LEVELS)), 2))
TRUTH_DRAWS = 200_000
WIDTH_AT = BUDGETS.index(290)  # labels for the width of uniform's intervals at this budget
COVERAGE_DATASETS = 1500  # data sets per coverage cell (at least --datasets)


@dataclass(frozen=True)
class DataSets:
    labels: np.ndarray  # (D, Q, S) human marks on [0, 1]
    judged: np.ndarray  # (D, Q, S)
    uncertainty: np.ndarray  # (D, Q)


def latent_quality(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """(..., Q, S) the answers' latent quality on the marks' scale: question + system level + answer."""
    question = rng.normal(0.0, QUESTION_SD, shape[:-1] + (1,))
    return CENTER + LEVELS + question + rng.normal(0.0, ANSWER_SD, shape)


def spread_sd(rng: np.random.Generator, shape: tuple[int, ...], spread_scale: float) -> np.ndarray:
    """(..., Q, S) the sd of the judge's uncertainty per answer: log-normal, mostly the question's."""
    between, within = SPREAD_LOG_SD
    log_spread = (rng.normal(0.0, between, shape[:-1] + (1,)) + rng.normal(0.0, within, shape)
                  - (between**2 + within**2) / 2.0)
    return spread_scale * np.exp(log_spread)


def mark_distribution(latent: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(..., 5) the chance of each mark 1-5: N(latent, sd^2) rounded onto the marks (ends open)."""
    edges = np.concatenate([[-np.inf], MARKS[:-1] + 0.5, [np.inf]])
    return np.diff(ndtr((edges - latent[..., None]) / np.maximum(sd, 1e-12)[..., None]), axis=-1)


def simulate(rng: np.random.Generator, datasets: int, spread_scale: float,
             judge: str = JUDGES[0]) -> DataSets:
    shape = (datasets, QUESTIONS, LEVELS.size)
    latent, sd = latent_quality(rng, shape), spread_sd(rng, shape, spread_scale)
    if judge == "marks":  # the annotators' mark distribution; the judge reports its mean and sd
        chances = mark_distribution(latent, sd)
        marks = 1.0 + (chances.cumsum(axis=-1)[..., :-1] < rng.random(shape)[..., None]).sum(axis=-1)
        mean = chances @ MARKS
        spread = np.sqrt(np.maximum(chances @ MARKS**2 - mean**2, 0.0)) / 4.0
        score, labels = (mean - 1.0) / 4.0, (marks - 1.0) / 4.0
    else:  # reading: a calibrated posterior of the rounded latent from a noisy reading of it
        labels = (np.clip(np.round(latent), 1, 5) - 1.0) / 4.0
        noise = sd / 4.0
        reading = labels + noise * rng.standard_normal(shape)
        shrink = MARK_VARIANCE / (MARK_VARIANCE + noise**2)
        score = MARK_MEAN + shrink * (reading - MARK_MEAN)
        spread = np.sqrt(shrink) * noise
    judged = np.clip(score + JUDGE_BIAS, 0.0, 1.0)
    return DataSets(labels, judged, np.sqrt((spread**2).sum(axis=2)))


MARK_MEAN, MARK_VARIANCE = 0.588, 0.0687  # of the rounded latent marks on [0, 1], pooled over the systems
#                                          (what the reading judge shrinks its reading toward)


def spread_for(correlation: float, judge: str, rng: np.random.Generator) -> float:
    """The spread factor whose pooled judge-human correlation is `correlation` (bisection on its log)."""
    low, high = np.log(1e-3), np.log(1e3)
    for _ in range(30):
        middle = (low + high) / 2.0
        data = simulate(rng, 8, float(np.exp(middle)), judge)
        pooled = np.corrcoef(data.labels.ravel(), data.judged.ravel())[0, 1]
        low, high = (middle, high) if pooled > correlation else (low, middle)
    return float(np.exp((low + high) / 2.0))


def truth(rng: np.random.Generator, judge: str, spread_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The population means of the systems' human marks and of the pairs' differences (Monte Carlo; for
    the marks judge the expected mark of each drawn answer)."""
    shape = (TRUTH_DRAWS, LEVELS.size)
    latent = latent_quality(rng, shape)
    if judge == "marks":
        marks = mark_distribution(latent, spread_sd(rng, shape, spread_scale)) @ MARKS
    else:
        marks = np.clip(np.round(latent), 1, 5)
    means = ((marks - 1.0) / 4.0).mean(axis=0)
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


def reached(data: DataSets, pi: np.ndarray, uniforms: np.ndarray, target: np.ndarray
            ) -> tuple[float, float]:
    """The share of data sets whose fixed-n decisions (Bonferroni over the pairs) are the truth's, and the
    mean squared width of the pairs' intervals; drawn with common random numbers (uniforms < pi: the same
    uniforms for every design and budget, so that the comparison is not blurred by independent draws)."""
    drawn = uniforms < pi
    *_, low, high = fixed_n(data, pi, drawn, ALPHA / len(PAIRS))
    right = float((decide_pairs(low, high, MARGIN) == target).all(axis=1).mean())
    return right, float(np.nanmean((high - low) ** 2))


def same_width(widths: list[float], target: float) -> float:
    """The budget whose mean squared width first falls to `target`, interpolated on log budget and log
    width; inf if never."""
    for index, width in enumerate(widths):
        if width <= target:
            if index == 0:
                return float(BUDGETS[0])
            before, step = np.log(widths[index - 1]), np.log(BUDGETS[index] / BUDGETS[index - 1])
            share = (before - np.log(target)) / (before - np.log(width))
            return float(BUDGETS[index - 1] * np.exp(step * share))
    return float("inf")


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
            differences: np.ndarray) -> np.ndarray:
    """(claimed data sets, 10) whether each 95% fixed-n interval of the 4 means and 6 differences covers,
    over the data sets whose draw gave at least MIN_ACTIVE_LABELS labels (the others get no interval)."""
    low_m, high_m, low_d, high_d = fixed_n(data, pi, draw_labeled(pi, rng), ALPHA)
    claimed = ~np.isnan(low_m[:, 0])
    return np.concatenate([(low_m <= means) & (means <= high_m),
                           (low_d <= differences) & (differences <= high_d)], axis=1)[claimed]


def coverage(rng: np.random.Generator, judge: str, scale: float, chunk: int, total: int, budgets: dict,
             means: np.ndarray, differences: np.ndarray) -> dict:
    """(lowest, mean, data sets) coverage per (budget name, design) over COVERAGE_DATASETS data sets
    (total, simulated in chunks of `chunk`): budgets maps a name to the budget of each design."""
    hits: dict = {}
    for _ in range(-(-max(total, chunk) // chunk)):
        data = simulate(rng, chunk, scale, judge)
        for name, per_design in budgets.items():
            for design, budget in per_design.items():
                cover = covered(data, probabilities(data, budget, design), rng, means, differences)
                hits.setdefault((name, design), []).append(cover)
    result = {}
    for key, parts in hits.items():
        cover = np.concatenate(parts)
        result[key] = (float(cover.mean(axis=0).min()), float(cover.mean()), len(cover))
    return result


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


def run_setting(correlation: float, judge: str, datasets: int, coverage_datasets: int, seed: int) -> dict:
    """Every figure of one correlation, keyed by (figure, design): design None is uniform, a number the
    active design's floor share; betting sequences for the uniform design and the first floor share."""
    rng = np.random.default_rng([seed, int(round(100 * correlation)), JUDGES.index(judge)])
    scale = spread_for(correlation, judge, rng)
    means, differences = truth(rng, judge, scale)
    data = simulate(rng, datasets, scale, judge)
    target = target_decisions(differences)
    uniforms = rng.random(data.uncertainty.shape)
    u = data.uncertainty
    row: dict = {"means": means, "datasets": datasets,
                 "correlation": np.corrcoef(data.labels.ravel(), data.judged.ravel())[0, 1],
                 "ideal": float(np.mean(u.mean(axis=1) ** 2 / (u**2).mean(axis=1)))}
    designs = (None, *FLOOR_SHARES)
    for design in designs:
        shares, widths = zip(*(reached(data, probabilities(data, budget, design), uniforms, target)
                               for budget in BUDGETS))
        row["need", design] = labels_needed(list(shares))
        row["widths", design] = list(widths)
    for design in designs:
        row["same width", design] = same_width(row["widths", design], row["widths", None][WIDTH_AT])
    for design in designs:
        for method in METHODS if design in designs[:2] else METHODS[1:]:
            row[method, design] = anytime(data, probabilities(data, ANYTIME_BUDGET, design), rng,
                                          differences, target, method)
    needs = {design: min(row["need", design], QUESTIONS) if np.isfinite(row["need", design])
             else QUESTIONS for design in designs}
    budgets = {"cover at min": dict.fromkeys(designs, MIN_ACTIVE_LABELS), "cover at need": needs}
    row.update(coverage(rng, judge, scale, datasets, coverage_datasets, budgets, means, differences))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=300, help="simulated data sets per correlation")
    parser.add_argument("--correlations", type=float, nargs="+", default=list(CORRELATIONS))
    parser.add_argument("--judge", choices=JUDGES, default=JUDGES[0])
    parser.add_argument("--coverage-datasets", type=int, default=COVERAGE_DATASETS,
                        help="simulated data sets per fixed-n coverage cell")
    parser.add_argument("--seed", type=int, default=49)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"judge: {args.judge}; {args.datasets} data sets per correlation "
          f"({max(args.coverage_datasets, args.datasets)} per fixed-n coverage cell), {QUESTIONS} questions, "
          f"4 systems; margin {MARGIN}; power {POWER}; anytime budget {ANYTIME_BUDGET}; active floors "
          f"{FLOOR_SHARES} x B / Q\n")
    rows = {correlation: run_setting(correlation, args.judge, args.datasets, args.coverage_datasets,
                                     args.seed) for correlation in args.correlations}
    for correlation, row in rows.items():
        print(f"correlation {correlation}: measured {row['correlation']:.2f}; true means "
              f"{np.round(row['means'], 3).tolist()}; (mean u)^2 / mean u^2 = {row['ideal']:.2f} (what pi "
              "proportional to the uncertainty u saves at most, no floor, were u^2 the residual variance)")
    print()
    _print_needs(rows)
    _print_coverage(rows)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


def _print_needs(rows: dict) -> None:
    print("Labels needed to reach the truth's decisions (A-B equivalent, the rest different), and for the "
          f"pairs' intervals as narrow as uniform's at {BUDGETS[WIDTH_AT]} labels (mean squared width); "
          "active / uniform in brackets; for the anytime stops, then the share of stops with the truth's "
          "decisions:\n")
    floors = [f"active, floor {share}" for share in FLOOR_SHARES]
    headers = (["fixed-n: uniform"] + [f"fixed-n: {floor}" for floor in floors]
               + [f"uniform's width at {BUDGETS[WIDTH_AT]}: {floor}" for floor in floors]
               + ["anytime (asymptotic): uniform"] + [f"anytime (asymptotic): {floor}" for floor in floors]
               + ["anytime (betting): uniform", f"anytime (betting): {floors[0]}"])
    print("| judge-human correlation | " + " | ".join(headers) + " |")
    print("| --- |" + " --- |" * len(headers))
    for correlation, row in rows.items():
        uniform = row["need", None]
        cells = [_labels(uniform)] + [_labels(row["need", share]) + (
            f" ({row['need', share] / uniform:.2f})" if np.isfinite(uniform + row["need", share]) else "")
            for share in FLOOR_SHARES]
        cells += [_labels(row["same width", share]) + f" ({row['same width', share] / BUDGETS[WIDTH_AT]:.2f})"
                  for share in FLOOR_SHARES]
        for method, shares in (("asymptotic", FLOOR_SHARES), ("betting", FLOOR_SHARES[:1])):
            base = row[method, None]
            cells.append(f"{base[0]:.0f}; {base[1]:.2f}")
            cells += [f"{row[method, share][0]:.0f} ({row[method, share][0] / base[0]:.2f}); "
                      f"{row[method, share][1]:.2f}" for share in shares]
        print(f"| {correlation} | " + " | ".join(cells) + " |")


def _labels(need: float) -> str:
    return f"{need:.0f}" if np.isfinite(need) else f"> {BUDGETS[-1]}"


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
    fixed = [row[at, design] for row in rows.values() for at in ("cover at min", "cover at need")
             for design in designs]
    anytime_lowest = min(row[key][2] for row in rows.values() for key in row if key[0] in METHODS)
    print(f"\nLowest coverage of any fixed-n interval in any cell: {min(cell[0] for cell in fixed):.3f} "
          f"(over {min(cell[2] for cell in fixed)} to {max(cell[2] for cell in fixed)} data sets a cell); "
          f"of any anytime interval: {anytime_lowest:.3f} "
          f"(over the {next(iter(rows.values()))['datasets']} data sets)")


if __name__ == "__main__":
    raise SystemExit(main())
