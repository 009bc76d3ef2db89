"""Benchmark of the statistics reducer at the CCRS paper's scale (4,719 queries x 6 systems x 5 metrics).

Run it on an otherwise idle machine: the loops and the vectorized code are timed one after the other, so
load from other processes distorts the ratios. Prints, from one run: the wall time of load_scores + \
compute_all + write_outputs at B iterations/resamples,
the vectorized HSD and bootstrap times, and their speedups over straightforward per-iteration Python
loops of the same procedures (timed on fewer iterations and scaled per iteration).

    .venv/bin/python benchmarks/bench_stats.py            # paper scale, B = 10,000
    .venv/bin/python benchmarks/bench_stats.py --quick    # small smoke run
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.bootstrap import bootstrap_mean_ci
from stats.hsd import randomized_tukey_hsd
from stats.analysis import compute_all
from tasks.reduce import load_hypotheses
from pipelines.reporting.report import write_outputs
from tasks.reduce import load_scores

SYSTEMS = tuple("ABCDEF")
METRICS = ("CC", "QR", "ID", "AC", "IR")
PAPER_HYPOTHESES = Path(__file__).resolve().parents[1] / "configs" / "hypotheses" / "paper-h1-h3.yaml"


def synthetic_scores(n_queries: int, seed: int = 0) -> pd.DataFrame:
    """Paper-like scores: query difficulty shared across systems, small system effects, 0.05 steps."""
    rng = np.random.default_rng(seed)
    effects = np.array([0.08, 0.09, 0.0, 0.015, 0.005, 0.02])
    difficulty = rng.beta(4, 2, size=(n_queries, 1, len(METRICS)))
    noise = rng.normal(0.0, 0.15, size=(n_queries, len(SYSTEMS), len(METRICS)))
    values = np.clip(np.round((difficulty + noise + effects[None, :, None] - 0.05) * 20) / 20, 0.0, 1.0)
    q, s, m = np.indices(values.shape).reshape(3, -1)
    return pd.DataFrame(
        {
            "query_id": np.char.add("q", q.astype(str)),
            "system": np.array(SYSTEMS)[s],
            "metric": np.array(METRICS)[m],
            "score": values.ravel(),
        }
    )


def loop_hsd_per_query(scores: np.ndarray, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Sakai's procedure written plainly: every iteration shuffles every query's row in Python."""
    ranges = np.empty(iterations)
    for b in range(iterations):
        permuted = np.array([rng.permutation(row) for row in scores])
        means = permuted.mean(axis=0)
        ranges[b] = means.max() - means.min()
    return ranges


def loop_hsd_numpy_iteration(scores: np.ndarray, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """A per-iteration loop whose body is vectorized numpy (one rng.permuted call per iteration)."""
    ranges = np.empty(iterations)
    for b in range(iterations):
        means = rng.permuted(scores, axis=1).mean(axis=0)
        ranges[b] = means.max() - means.min()
    return ranges


def loop_bootstrap(scores: np.ndarray, iterations: int, rng: np.random.Generator) -> np.ndarray:
    n = len(scores)
    means = np.empty((iterations, scores.shape[1]))
    for b in range(iterations):
        means[b] = scores[rng.integers(0, n, n)].mean(axis=0)
    return means


def timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=4719)
    parser.add_argument("--b", type=int, default=10000)
    parser.add_argument("--loop-b", type=int, default=200, help="iterations timed for the numpy-body loops")
    parser.add_argument(
        "--loop-b-per-query", type=int, default=50, help="iterations timed for the per-query loop"
    )
    parser.add_argument("--quick", action="store_true", help="600 queries, B = 1000")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.b, args.loop_b, args.loop_b_per_query = 600, 1000, 50, 5
    scores = synthetic_scores(args.queries)
    hypotheses = load_hypotheses(PAPER_HYPOTHESES)
    b = args.b
    print(f"{args.queries} queries x {len(SYSTEMS)} systems x {len(METRICS)} metrics, B = {b}")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.parquet"
        scores.to_parquet(path)
        cpu, start = time.process_time(), time.perf_counter()
        loaded = load_scores(path)
        result = compute_all(loaded, hypotheses, b=b, seed=0)
        computed = time.perf_counter()
        written = write_outputs(result, loaded, Path(tmp) / "out")
        done, cpu = time.perf_counter(), time.process_time() - cpu
    print(
        f"end to end (load + compute_all + write_outputs, {len(written)} files): {done - start:.2f} s wall, "
        f"{cpu:.2f} s CPU [compute {computed - start:.2f} s, write {done - computed:.2f} s wall]"
    )

    matrices = [
        scores[scores.metric == metric].pivot(index="query_id", columns="system", values="score").to_numpy()
        for metric in METRICS
    ]
    rng = np.random.default_rng(1)
    scale = b * len(METRICS)
    hsd = sum(timed(randomized_tukey_hsd, matrix, b, rng) for matrix in matrices)
    boot = timed(bootstrap_mean_ci, np.hstack(matrices), b, rng)
    per_query_loop = timed(loop_hsd_per_query, matrices[0], args.loop_b_per_query, rng)
    per_query_loop *= scale / args.loop_b_per_query
    numpy_loop = timed(loop_hsd_numpy_iteration, matrices[0], args.loop_b, rng) * scale / args.loop_b
    boot_loop = sum(timed(loop_bootstrap, matrix, args.loop_b, rng) for matrix in matrices) * b / args.loop_b
    print("wall times; loops timed on fewer iterations and scaled per iteration")
    print(f"vectorized HSD, {len(METRICS)} metrics x {b} iterations: {hsd:.2f} s")
    print(
        f"  per-iteration loop shuffling each query in Python ({args.loop_b_per_query} iterations timed): "
        f"{per_query_loop:.1f} s -> speedup {per_query_loop / hsd:.0f}x"
    )
    print(
        f"  per-iteration loop with a numpy body, rng.permuted ({args.loop_b} iterations timed): "
        f"{numpy_loop:.1f} s -> speedup {numpy_loop / hsd:.1f}x"
    )
    print(
        f"vectorized bootstrap, {len(SYSTEMS)} systems x {len(METRICS)} metrics x {b} resamples: {boot:.2f} s"
    )
    print(
        f"  per-resample loop ({args.loop_b} resamples timed): {boot_loop:.1f} s "
        f"-> speedup {boot_loop / boot:.1f}x"
    )


if __name__ == "__main__":
    main()
