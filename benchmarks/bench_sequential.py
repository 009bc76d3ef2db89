"""Sequential judging at the CCRS paper's scale (docs/sequential.md): 4,719 questions x 6 systems x 5
metrics of simulated judge scores, replayed in the seeded random order with a look every 100 questions.

Systems as the paper's: A-F = three readers (Mistral, Llama-8B, Llama-3.2) x two retrievers (BM25, E5).
The readers differ by large amounts (0.10 on a [0, 1] metric between neighbours), the retrievers of one
reader almost not at all (0.005, inside the 0.02 margin): each question's difficulty is shared by the
systems, each answer gets judge noise (sd 0.15), scores on the judge's 0.05 steps. Prints, from one run:
- where the rule stops and the judge calls it does not send, over several simulated data sets;
- the family-wise error under no difference: the share of R runs with ANY "different" decision at ANY
  look of the whole run (no early stop), on data whose six systems have exactly equal means over the
  4,719 questions (the guarantee's null); and, for information, the share of runs stopped early with a
  "different" decision when the systems are equal in expectation only (their means over the 4,719 differ
  by chance, which the intervals, built for those 4,719, may find);
- the kernel's time: a whole replay, and `decide` from scratch at growing n (what a judge stage pays at a
  look).

    .venv/bin/python benchmarks/bench_sequential.py            # paper scale, R = 20
    .venv/bin/python benchmarks/bench_sequential.py --quick    # 600 questions, R = 5
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.sequential import decide, replay  # noqa: E402

SYSTEMS = tuple("ABCDEF")
METRICS = ("CC", "QR", "ID", "AC", "IR")
READER_EFFECTS = np.array([0.10, 0.10, 0.0, 0.0, -0.10, -0.10])
RETRIEVER_EFFECTS = np.array([0.0, 0.005, 0.0, 0.005, 0.0, 0.005])
NOISE, LOOK_EVERY, MARGIN, ALPHA = 0.15, 100, 0.02, 0.05


def judge_scores(rng: np.random.Generator, n: int, effects: np.ndarray) -> dict[str, np.ndarray]:
    """{metric: (n, 6)} simulated judge scores: shared question difficulty + system effect + judge noise."""
    scores = {}
    for _ in METRICS:
        difficulty = rng.beta(4, 2, size=(n, 1)) - 0.05
        values = difficulty + effects + rng.normal(0.0, NOISE, (n, len(SYSTEMS)))
        scores[_] = np.clip(np.round(values * 20) / 20, 0.0, 1.0)
    return dict(zip(METRICS, scores.values()))


def exact_null_scores(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Scores whose six systems have exactly equal means over the n questions: blocks of six questions
    holding the six cyclic shifts of one question's scores; the n mod 6 questions left tie every system."""
    k = len(SYSTEMS)
    scores = {}
    for metric, base in judge_scores(rng, n // k, np.zeros(k)).items():
        blocks = np.stack([np.roll(base, shift, axis=1) for shift in range(k)], axis=1).reshape(-1, k)
        tied = np.repeat(rng.uniform(0.0, 1.0, (n % k, 1)), k, axis=1)
        scores[metric] = np.vstack([blocks, tied])
    return scores


def query_ids(n: int) -> list[str]:
    return [f"q{i:05d}" for i in range(n)]


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def savings(n: int, repetitions: int, rng: np.random.Generator, margin: float = MARGIN,
            finite_population: bool = True) -> None:
    stops, seconds = [], []
    for repetition in range(repetitions):
        scores = judge_scores(rng, n, READER_EFFECTS + RETRIEVER_EFFECTS)
        result, elapsed = timed(replay, scores, SYSTEMS, query_ids(n), look_every=LOOK_EVERY, margin=margin,
                                alpha=ALPHA, seed=repetition, finite_population=finite_population)
        stops.append(result.stopped_at)
        seconds.append(elapsed)
        if repetition == 0 and margin == MARGIN and finite_population:
            counts = {name: getattr(result.looks[-1], name) for name in ("different", "equivalent", "open")}
            not_sent, total = result.judge_calls()
            print(f"paper-like effects, data set 0: stopped after {result.stopped_at} of {n} questions, "
                  f"{counts}; {not_sent:,} judge calls of {total:,} not sent "
                  f"({not_sent / total:.1%}); {len(result.looks)} looks")
            same_reader = [d.decision for d in result.decisions
                           if SYSTEMS.index(d.a) // 2 == SYSTEMS.index(d.b) // 2]
            print(f"  same-reader pairs (0.005 apart): {same_reader.count('equivalent')} equivalent, "
                  f"{same_reader.count('different')} different, {same_reader.count('open')} open of "
                  f"{len(same_reader)}")
    saved = [(n - stop) / n for stop in stops]
    target = "the N questions" if finite_population else "the population"
    print(f"margin {margin}, means over {target}, {repetitions} data sets: stop after {min(stops)}-"
          f"{max(stops)} questions (mean {np.mean(stops):.0f}), judge calls saved {np.mean(saved):.1%} on "
          f"average ({min(saved):.1%}-{max(saved):.1%}); replay {np.mean(seconds):.2f} s per data set")


def null_error(n: int, repetitions: int, rng: np.random.Generator) -> None:
    exact_errors, chance_errors, chance_stops, chance_decisions, population_errors = 0, 0, [], [], 0
    for repetition in range(repetitions):
        result = replay(exact_null_scores(rng, n), SYSTEMS, query_ids(n), look_every=LOOK_EVERY,
                        margin=MARGIN, alpha=ALPHA, seed=repetition, min_questions=n, finite_population=True)
        exact_errors += any(look.different for look in result.looks)
        result = replay(judge_scores(rng, n, np.zeros(len(SYSTEMS))), SYSTEMS, query_ids(n),
                        look_every=LOOK_EVERY, margin=MARGIN, alpha=ALPHA, seed=repetition,
                        finite_population=True)
        chance_errors += any(look.different for look in result.looks)
        chance_stops.append(result.stopped_at)
        chance_decisions += [d for d in result.decisions if d.decision == "different"]
        result = replay(judge_scores(rng, n, np.zeros(len(SYSTEMS))), SYSTEMS, query_ids(n),
                        look_every=LOOK_EVERY, margin=MARGIN, alpha=ALPHA, seed=repetition, min_questions=n,
                        finite_population=False)
        population_errors += any(look.different for look in result.looks)
    print(f"no difference, exactly equal means over the {n} questions, whole runs (every look): any "
          f"'different' in {exact_errors} of {repetitions} runs, family-wise rate "
          f"{exact_errors / repetitions:.3f} (alpha {ALPHA}, family of {len(METRICS) * 15})")
    print(f"equal in expectation only, stopping early: any 'different' in {chance_errors} of {repetitions} "
          f"runs; stop after {min(chance_stops)}-{max(chance_stops)} questions (mean "
          f"{np.mean(chance_stops):.0f}); {len(chance_decisions)} 'different' pairs in all, "
          f"{sum(inside(d.interval) for d in chance_decisions)} of them with the whole interval inside "
          f"+-{MARGIN}")
    print(f"equal in expectation, means over the population (finite_population=False), whole runs: any "
          f"'different' in {population_errors} of {repetitions} runs")


def inside(interval: tuple[float, float]) -> bool:
    return -MARGIN <= interval[0] and interval[1] <= MARGIN


def kernel_times(n: int, rng: np.random.Generator) -> None:
    scores = judge_scores(rng, n, READER_EFFECTS + RETRIEVER_EFFECTS)
    parts = []
    for rows in sorted({n // 4, n // 2, n}):
        _, elapsed = timed(decide, {metric: matrix[:rows] for metric, matrix in scores.items()}, SYSTEMS, n,
                           ALPHA, MARGIN)
        parts.append(f"n = {rows}: {elapsed:.2f} s")
    print(f"decide from scratch ({len(METRICS)} metrics x 15 pairs, grid of 2,001 candidate means): "
          + ", ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=4719)
    parser.add_argument("--repetitions", type=int, default=20, help="simulated data sets per figure")
    parser.add_argument("--quick", action="store_true", help="600 questions, 5 repetitions")
    args = parser.parse_args()
    if args.quick:
        args.questions, args.repetitions = 600, 5
    n = args.questions
    print(f"{n} questions x {len(SYSTEMS)} systems x {len(METRICS)} metrics, look every {LOOK_EVERY}, "
          f"margin {MARGIN}, alpha {ALPHA}; readers 0.10 apart, retrievers 0.005, judge noise sd {NOISE}")
    rng = np.random.default_rng(0)
    savings(n, args.repetitions, rng)
    savings(n, args.repetitions, rng, margin=0.05)
    savings(n, args.repetitions, rng, finite_population=False)
    savings(n, args.repetitions, rng, margin=0.05, finite_population=False)
    null_error(n, args.repetitions, rng)
    kernel_times(n, rng)


if __name__ == "__main__":
    main()
