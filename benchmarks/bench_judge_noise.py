"""What repeated judgments cost the statistics (docs/judge-trust.md, "CPU figures").

Paper-scale synthetic scores (4,719 queries x 6 systems x 5 metrics, as benchmarks/bench_stats.py) judged
once and judged three times (independent judge noise per repeat). Prints, from one run: the wall time of
compute_all on each (the repeated one adds, per metric, the two-level bootstrap and the HSD of each repeat
alone), their ratio, the two-level bootstrap alone against the one-level bootstrap of the same averaged
scores, and the decision study of one metric (six systems: each number of questions it tries costs a
studentized range quantile).

    .venv/bin/python benchmarks/bench_judge_noise.py            # paper scale, B = 10,000
    .venv/bin/python benchmarks/bench_judge_noise.py --quick    # small smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_stats import METRICS, SYSTEMS  # noqa: E402
from stats.analysis import compute_all  # noqa: E402
from stats.bootstrap import bootstrap_mean_ci  # noqa: E402
from stats.decision_study import decision_study  # noqa: E402
from stats.judge_noise import two_level_bootstrap, variance_components  # noqa: E402


def repeated_scores(n_queries: int, n_repeats: int, seed: int = 0) -> pd.DataFrame:
    """Paper-like answers (query difficulty shared across systems, small system effects) judged n_repeats
    times each with independent judge noise (sd 0.1), on 0.05 steps."""
    rng = np.random.default_rng(seed)
    effects = np.array([0.08, 0.09, 0.0, 0.015, 0.005, 0.02])
    difficulty = rng.beta(4, 2, size=(n_queries, 1, len(METRICS), 1))
    answer = rng.normal(0.0, 0.1, size=(n_queries, len(SYSTEMS), len(METRICS), 1))
    judge = rng.normal(0.0, 0.1, size=(n_queries, len(SYSTEMS), len(METRICS), n_repeats))
    values = np.clip(np.round((difficulty + answer + judge + effects[None, :, None, None] - 0.05) * 20) / 20,
                     0.0, 1.0)
    q, s, m, r = np.indices(values.shape).reshape(4, -1)
    return pd.DataFrame({"query_id": np.char.add("q", q.astype(str)), "system": np.array(SYSTEMS)[s],
                         "metric": np.array(METRICS)[m], "score": values.ravel(), "repeat": r})


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="300 queries, B = 1,000")
    args = parser.parse_args()
    n_queries, b = (300, 1000) if args.quick else (4719, 10_000)
    scores = repeated_scores(n_queries, 3)
    once = scores[scores["repeat"] == 0].drop(columns=["repeat"])
    _, single = timed(compute_all, once, b=b, seed=0)
    result, repeated = timed(compute_all, scores, b=b, seed=0)
    print(f"{n_queries} queries x {len(SYSTEMS)} systems x {len(METRICS)} metrics, B = {b:,}")
    print(f"compute_all, judged once:          {single:7.2f} s")
    print(f"compute_all, judged three times:   {repeated:7.2f} s  ({repeated / single:.2f}x)")

    cube = scores[scores["metric"] == METRICS[0]].sort_values(["query_id", "system", "repeat"])
    y = cube["score"].to_numpy().reshape(n_queries, len(SYSTEMS), 3)
    _, two_level = timed(two_level_bootstrap, y, b, np.random.default_rng(0))
    _, one_level = timed(bootstrap_mean_ci, y.mean(axis=2), b, np.random.default_rng(0))
    print(f"two-level bootstrap, one metric:   {two_level:7.2f} s  ({two_level / one_level:.1f}x the "
          f"one-level bootstrap of the averaged scores, {one_level:.2f} s)")
    components = variance_components(y)
    study, seconds = timed(decision_study, components, len(SYSTEMS), 0.02, 0.8, 0.05, 5, None, 2000)
    print(f"decision study, one metric (1-5 repeats, at most 2,000 questions): {seconds:.2f} s; recommended "
          f"{study.recommended.n_questions} questions x {study.recommended.n_repeats} repeats")
    noise = result["per_metric"][METRICS[0]]["judge_noise"]
    print(f"{METRICS[0]}: reliability {noise['reliability']:.3f} {noise['reliability_ci95']}, "
          f"stable verdicts {noise['stable_share']:.2f}")


if __name__ == "__main__":
    main()
