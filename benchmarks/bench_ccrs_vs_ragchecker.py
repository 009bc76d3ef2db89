"""CCRS vs the RAGChecker-style baseline on the same samples (CCRS paper section 4.1.4, Figure 4).

Runs the registered "ccrs" suite (five judgments) and the registered "ragchecker" suite (P/R/F: claim
extraction + entailment) with the same judge model, through `suite.plan` / `suite.evaluate` (context fitted
to the judge's window), over N real BioASQ questions (answer = the BioASQ ideal answer, or a truncated
version of it for variety; context = the question's gold snippets), then reports judge calls, tokens and
wall time of both as ratios (baseline / CCRS) and the Pearson correlation table between CCRS and baseline
metrics. Logs everything to MLflow when --tracking-uri is given.

    .venv/bin/python benchmarks/bench_ccrs_vs_ragchecker.py --base-url http://127.0.0.1:8000/v1 --n 6 \
        [--tracking-uri sqlite:///mlruns.db] [--out bench.json]

Without --base-url the CPU stack (Ray Serve LLM + vLLM CPU + SmolLM2-135M) is started and stopped.
SmolLM2-135M is a weak judge: the ratios measure the pipelines' cost; the correlations prove the plumbing.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CCRS = ("CC", "QR", "ID", "AC", "IR")
RC = ("rc_precision", "rc_recall", "rc_faithfulness")


def samples(n: int):
    from shared import bioasq_questions, sample_field

    out = []
    for i, q in enumerate(bioasq_questions(n)):
        ideal = sample_field(q["ideal_answer"])
        ideal = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in sample_field(q["snippets"])][:3]
        # half the responses are the first sentence only: some spread in recall
        response = ideal if i % 2 == 0 else ideal.split(". ")[0].rstrip(".") + "."
        exact = sample_field(q.get("exact_answer"))
        exact = [str(x) for x in (exact if isinstance(exact, list) else [exact]) if x]
        out.append({"id": q["id"], "question": q["body"], "response": response, "ground_truth": ideal,
                    "context": snippets, "exact": exact})
    return out


def run_suite(name: str, items, judge, base_url: str, concurrency: int, seed: int = 0):
    """Every selected metric of the registered suite `name` over the items: the suite plans its units
    (context fitted to the judge's window) and evaluates them through one LLMClient (no Ray, no cache:
    the wall time is the judging itself). Returns ({(id, metric): score}, cost)."""
    from judges.client import LLMClient
    from judges.config import ClientConfig
    from judges.suite import Sample, get_suite
    from tasks.runtime.judge_session import judge_counter

    suite = get_suite(name)
    count = judge_counter(judge)
    samples = [Sample(s["id"], "bench", s["question"], s["response"], s["ground_truth"], s["context"],
                      s["exact"]) for s in items]
    judgments = [j for s in samples if not s.response.strip()
                 for j in suite.not_judged(s, judge, "empty_response", "empty response")]
    units = [u for s in samples if s.response.strip() for u in suite.plan(s, judge, seed, count)]
    started = time.perf_counter()
    with LLMClient(ClientConfig(max_concurrency=concurrency, timeout_s=300), base_url) as client:
        results = client.map(lambda unit: suite.evaluate(client, unit, judge, count), units)
    judgments += [j for values in results for j in values]
    wall = time.perf_counter() - started
    scores = {(j.query_id, j.metric): None if j.score is None or not np.isfinite(j.score) else float(j.score)
              for j in judgments}
    return scores, {"calls": sum(j.attempts for j in judgments),
                    "prompt_tokens": sum(j.prompt_tokens for j in judgments),
                    "completion_tokens": sum(j.completion_tokens for j in judgments), "wall_s": wall,
                    "failed": sum(v is None for v in scores.values())}


def run_ccrs(items, base_url: str, model: str, concurrency: int):
    from judges.config import CcrsOptions, JudgeConfig

    # lenient_parse: SmolLM2-135M rarely replies with a bare integer; the paper's 70B judge does.
    judge = JudgeConfig(model=model, ccrs=CcrsOptions(metrics=list(CCRS), lenient_parse=True))
    return run_suite("ccrs", items, judge, base_url, concurrency)


def run_rc(items, base_url: str, model: str, concurrency: int):
    from judges.config import JudgeConfig, RagCheckerOptions

    # the suite puts a sample's calls and tokens on its rc_precision row only: the sums count each call once
    judge = JudgeConfig(model=model, ragchecker=RagCheckerOptions(max_tokens=128))
    return run_suite("ragchecker", items, judge, base_url, concurrency)


def correlation_table(items, ccrs_scores, rc_scores) -> dict:
    """Pearson r between every CCRS and baseline metric over samples where both are scored."""
    from scipy.stats import pearsonr

    table = {}
    for c in CCRS:
        for r in RC:
            pairs = [(ccrs_scores.get((s["id"], c)), rc_scores.get((s["id"], r))) for s in items]
            pairs = np.array([(a, b) for a, b in pairs if a is not None and b is not None and np.isfinite(b)],
                             dtype=float)
            if len(pairs) < 3 or np.ptp(pairs[:, 0]) == 0 or np.ptp(pairs[:, 1]) == 0:
                value, note = None, f"undefined ({len(pairs)} pairs, constant or too few)"
            else:
                value, note = float(pearsonr(pairs[:, 0], pairs[:, 1]).statistic), None
            table.setdefault(c, {})[r] = {"r": value, "n": len(pairs), "note": note}
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm-base-url", "--base-url", dest="base_url", default=None)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--experiment", default="bench-ccrs-vs-ragchecker")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    stop = None
    base_url = args.base_url
    if base_url is None:
        from infra.serving import ServingConfig, start_serve_app, stop_serve_app

        cfg = ServingConfig.for_profile("cpu")
        base_url, stop = start_serve_app(cfg), (lambda: stop_serve_app(cfg))
    try:
        items = samples(args.n)
        ccrs_scores, ccrs_cost = run_ccrs(items, base_url, args.model, args.concurrency)
        rc_scores, rc_cost = run_rc(items, base_url, args.model, args.concurrency)
    finally:
        if stop:
            stop()
    ratios = {k: (rc_cost[k] / ccrs_cost[k] if ccrs_cost[k] else None)
              for k in ("calls", "prompt_tokens", "completion_tokens", "wall_s")}
    result = {"n_samples": len(items), "model": args.model, "ccrs": ccrs_cost, "ragchecker": rc_cost,
              "ratio_ragchecker_over_ccrs": ratios,
              "correlations_pearson": correlation_table(items, ccrs_scores, rc_scores),
              "means": {m: _mean([ccrs_scores.get((s["id"], m)) for s in items]) for m in CCRS}
              | {m: _mean([rc_scores.get((s["id"], m)) for s in items]) for m in RC}}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.tracking_uri:
        import mlflow

        mlflow.set_tracking_uri(args.tracking_uri)
        mlflow.set_experiment(args.experiment)
        with mlflow.start_run(run_name=f"ccrs-vs-ragchecker-n{len(items)}"):
            mlflow.log_params({"n_samples": len(items), "model": args.model, "concurrency": args.concurrency})
            for side, cost in (("ccrs", ccrs_cost), ("ragchecker", rc_cost)):
                mlflow.log_metrics({f"{side}.{k}": float(v) for k, v in cost.items()})
            mlflow.log_metrics({f"ratio.{k}": float(v) for k, v in ratios.items() if v is not None})
            mlflow.log_dict(result, "bench_ccrs_vs_ragchecker.json")
    return 0


def _mean(values):
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(values)) if values else None


if __name__ == "__main__":
    sys.exit(main())
