"""Integer vs expected judge scores (`judge.scoring`), side by side in one run on the same generations.

    flock /tmp/ccrs-llm.lock .venv/bin/python benchmarks/bench_scoring.py [--config configs/cpu-demo.yaml]
        [--limit N] [--run-dir DIR] [--b B] [--integer-from-argmax] [--subset 8]

Retrieval and generation come from the config (cached in the run directory, as in `ccrs run`); the CCRS
judge then scores the same generations twice, with `scoring: integer` and with `scoring: expected`
(judgment cache off), and the project's statistics (stats.analysis.compute_all: randomized Tukey HSD, the
tie rate of stats.descriptive) run on both score sets. Printed per metric and mode: the tie rate (mean
over systems: the probability that two queries got the same score), the discriminative power (share of
system pairs the HSD separates at alpha) with the significant pairs, and the queries used. Also: how often
the expected pass's argmax integer equals the integer pass's mark (they are the same greedy reply), how
many expected marks fell back to the integer (too little probability on allowed marks) and the requests
and seconds of each pass.
"""
from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODES = ("integer", "expected")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def endpoint(config, llm_base_url: str | None) -> Iterator[str]:
    """The endpoint given, else the config's Serve app on a free port (removed again); Ray shut down after."""
    import ray

    from infra.ray_runtime import ensure_ray
    from infra.serving import start_serve_app, stop_serve_app

    ensure_ray(config.ray.address, config.ray.num_cpus)
    serving = config.serving.model_copy(update={"port": _free_port()})
    try:
        yield llm_base_url or start_serve_app(serving)
    finally:
        if not llm_base_url:
            stop_serve_app(serving)
        ray.shutdown()


def load(args, limit: int | None):
    from pipelines.config import load_config
    from pipelines.pipeline import _resolve_paths

    overrides: dict = {"dataset.limit": limit} if limit else {}
    if args.run_dir:
        overrides["run_dir"] = f"{args.run_dir}/limit-{limit or 'config'}"
    if args.b:
        overrides["stats.b"] = args.b
    return _resolve_paths(load_config(args.config, overrides))


def prepare(config, base_url: str):
    """Samples: retrieval and generation through the pipeline's own stages (reused when already done)."""
    import pandas as pd

    from retrievers.config import RetrievalSpec
    from tasks.generate import run_generation
    from tasks.runtime.judge_session import load_samples
    from tasks.retrieval_stages import run_retrieval

    run_dir = config.resolved_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    retrieval = run_retrieval(run_dir, RetrievalSpec.of(config))
    generation = run_generation(run_dir, retrieval.queries_path, retrieval.retrieved_path, config.readers,
                                config.client, base_url, config.retrieval.top_k)
    queries = pd.read_parquet(retrieval.queries_path)
    samples, failed = load_samples(queries, pd.read_parquet(retrieval.retrieved_path),
                                   pd.read_parquet(generation.path), config.retrieval.top_k)
    return samples, failed, list(dict.fromkeys(queries["query_id"]))  # the dataset's question order


def integer_from_argmax(expected, ac_lambda: float):
    """The integer-mode scores from the expected pass's argmax marks (`llm_score`: the same greedy reply
    an integer-mode ask gets), for a cheaper run; AC combined with EM as the suite does."""
    from judges.ccrs import EM_COMBINED, combine_ac

    frame = expected.copy()
    ok = frame["llm_score"].notna()
    ac = frame["metric"].isin(EM_COMBINED)
    frame.loc[ok, "score"] = frame.loc[ok, "llm_score"].astype(float) / 100.0
    frame.loc[ok & ac, "score"] = [combine_ac(em, mark, ac_lambda) for em, mark in
                                   zip(frame.loc[ok & ac, "em"].fillna(0.0), frame.loc[ok & ac, "llm_score"])]
    frame["scoring"] = "integer"
    return frame


def judge_both(config, base_url: str, samples, from_argmax: bool = False) -> dict:
    """The CCRS suite over the same samples in both modes: {mode: (judgments frame, seconds, requests)}.
    `from_argmax`: one expected pass; the integer scores are its argmax marks (no second pass)."""
    from judges.suite import get_suite
    from tasks.judge import judgments_frame
    from tasks.runtime.judge_session import JudgeSession

    suite = get_suite("ccrs")
    out = {}
    for mode in (("expected",) if from_argmax else MODES):
        judge = config.judge.model_copy(update={"scoring": mode, "cache": False})
        started = time.perf_counter()
        judgments, stats = JudgeSession.of(suite, judge, config.client, base_url).judge_samples(samples, True)
        seconds = time.perf_counter() - started
        frame = judgments_frame(judgments, metric_order=suite.selected_metrics(judge))
        out[mode] = (frame, seconds, int(frame["attempts"].sum()))
        print(f"judged {len(frame)} ({mode}) in {seconds:.0f} s, {out[mode][2]} judge calls", flush=True)
    if from_argmax:
        frame = integer_from_argmax(out["expected"][0], config.judge.ccrs.ac_lambda)
        out["integer"] = (frame, float("nan"), int((frame["attempts"] > 0).sum()))
        print("integer scores: the expected pass's argmax marks (--integer-from-argmax)")
    return out


def statistics(frame, config) -> dict:
    from judges.suite import metric_order
    from stats.analysis import compute_all
    from tasks.judge import SCORE_COLUMNS

    scores = frame.loc[frame["score"].notna(), SCORE_COLUMNS]
    return compute_all(scores, b=config.stats.b, seed=config.stats.seed, alpha=config.stats.alpha,
                       metric_order=metric_order())


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(judged: dict, results: dict, n_queries: int, n_systems: int) -> None:
    integer, expected = judged["integer"][0], judged["expected"][0]
    print(f"\n{n_queries} queries x {n_systems} systems; tie rate = mean over systems; "
          f"DP = significant pairs / pairs (randomized Tukey HSD)")
    print(f"{'metric':<7}{'mode':<10}{'tie rate':>9}{'DP':>7}{'sig/pairs':>11}{'n_used':>8}{'ok':>6}")
    for metric in results["integer"]["metrics"]:
        for mode in MODES:
            entry = results[mode]["per_metric"].get(metric)
            if entry is None:
                continue
            ok = int(((judged[mode][0]["metric"] == metric) & judged[mode][0]["score"].notna()).sum())
            sig = sum(bool(pair["significant"]) for pair in entry["pairwise"])
            pairs = f"{sig}/{len(entry['pairwise'])}"
            print(f"{metric:<7}{mode:<10}{_fmt(_mean(entry['tie_rate'].values())):>9}"
                  f"{_fmt(entry['discriminative_power']):>7}{pairs:>11}"
                  f"{entry['n_used']:>8}{ok:>6}")
    ok = expected[expected["status"] == "ok"]
    counts = {k: int(v) for k, v in ok["scoring"].value_counts().items()}
    print(f"\nexpected pass: {counts}; mean probability on allowed marks "
          f"{ok['score_mass'].mean():.3f} (median {ok['score_mass'].median():.3f})")
    keys = ["query_id", "system", "metric"]
    both = integer.merge(expected, on=keys, suffixes=("_int", "_exp"))
    both = both[both["llm_score_int"].notna() & both["llm_score_exp"].notna()]
    same = int((both["llm_score_int"] == both["llm_score_exp"]).sum())
    print(f"argmax integer of the expected pass = integer pass's mark: {same}/{len(both)}")
    gap = (ok["llm_score_expected"] - ok["llm_score"]).abs()
    print(f"|expected - argmax| on the 0-100 scale: mean {gap.mean():.2f}, max {gap.max():.2f}")
    for mode in MODES:
        _, seconds, calls = judged[mode]
        took = "not run (the expected pass's argmax marks)" if math.isnan(seconds) else f"{seconds:.0f} s"
        print(f"{mode:<9} pass: {took}, {calls} judge calls")
    ratio = judged["expected"][1] / judged["integer"][1]
    print("expected/integer: " + ("" if math.isnan(ratio) else f"{ratio:.2f}x time, ")
          + f"{judged['expected'][2] / judged['integer'][2]:.2f}x calls")


def _first_questions(judged: dict, query_ids: list[str]) -> dict:
    """The judged frames restricted to these questions (seconds and calls kept: they are the whole run's)."""
    keep = set(query_ids)
    return {mode: (frame[frame["query_id"].isin(keep)], seconds, calls)
            for mode, (frame, seconds, calls) in judged.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "cpu-demo.yaml"))
    parser.add_argument("--limit", type=int, nargs="*", default=[None],
                        help="questions, one run each on the same server (default: the config's limit)")
    parser.add_argument("--run-dir", help="default: the config's run_dir (a folder per limit under it)")
    parser.add_argument("--b", type=int, help="HSD/bootstrap resamples (default: the config's stats.b)")
    parser.add_argument("--llm-base-url", help="use this running OpenAI-compatible endpoint instead of "
                        "deploying the Serve app")
    parser.add_argument("--integer-from-argmax", action="store_true", help="one expected pass; integer "
                        "scores from its argmax marks (the same greedy replies) instead of a second pass")
    parser.add_argument("--subset", type=int, nargs="*", default=[], help="also report the statistics "
                        "of the first N questions of each run (e.g. 8: the demo's questions inside a "
                        "24-question run; same judgments, no extra calls)")
    args = parser.parse_args()

    configs = [load(args, limit) for limit in args.limit]
    with endpoint(configs[0], args.llm_base_url) as base_url:
        for config in configs:
            print(f"\n=== {config.dataset.path} limit {config.dataset.limit} ({config.resolved_run_dir()})")
            samples, failed, order = prepare(config, base_url)
            judged = judge_both(config, base_url, samples, args.integer_from_argmax)
            print(f"samples judged: {len(samples)} (failed generations left out: {len(failed)})")
            for n in [None, *(n for n in args.subset if n < len(order))]:
                part = _first_questions(judged, order[:n]) if n else judged
                if n:
                    print(f"\n--- the first {n} of these {len(order)} questions (same judgments)")
                results = {mode: statistics(part[mode][0], config) for mode in MODES}
                report(part, results, results["integer"]["n_queries"], len(results["integer"]["systems"]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the process's start, not at import: the Hub is never asked
    raise SystemExit(main())
