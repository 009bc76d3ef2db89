"""`ccrs vera ...`: VERA metrics over a run (the registered "vera" judge suite through the judge stage
function, plus the cross-encoder aggregate), bootstrap + convergence, topicality.

  ccrs vera score RUN_DIR --base-url URL [--limit N] [--top-k K] \
[--cross-encoder MODEL|minilm-untrained-head|none]
                          [--b B] [--n N] [--seed S]
  ccrs vera bootstrap SCORES.parquet [--b B] [--n N] [--seed S] [--out FILE]
  ccrs vera topicality [--corpus BIOASQ_JSON] [--negative YAML] [--limit N] [--b B] [--n N] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, name: str = "vera") -> None:
    sub = parser.add_subparsers(dest="vera_command", required=True)
    score = sub.add_parser("score", help="VERA LLM metrics + cross-encoder aggregate + bootstrap for a run")
    score.add_argument("run_dir")
    score.add_argument("--llm-base-url", "--base-url", dest="base_url", required=True,
                       help="OpenAI-compatible /v1 URL of the judge")
    score.add_argument("--model", default="smollm2-135m-instruct")
    score.add_argument("--limit", type=int, default=None, help="first N queries only")
    score.add_argument("--top-k", type=int, default=5)
    score.add_argument("--cross-encoder", default="minilm-untrained-head",
                       help="cross-encoder id/path; 'minilm-untrained-head' (mechanics only) or 'none'")
    for p in (score, sub.add_parser("bootstrap", help="bootstrap + convergence of a long-format scores file"),
              sub.add_parser("topicality",
                             help="on-topic vs off-topic queries against the BioASQ sample corpus")):
        p.add_argument("--b", type=int, default=1000, help="bootstrap resamples B")
        p.add_argument("--n", type=int, default=None,
                       help="bootstrap sample size n (default: all observations)")
        p.add_argument("--seed", type=int, default=0)
        if p.prog.endswith("bootstrap"):
            p.add_argument("scores")
        if not p.prog.endswith("score"):
            p.add_argument("--out", default=None, help="JSON output file (default: print)")
        if p.prog.endswith("topicality"):
            p.add_argument("--corpus", default=None, help="BioASQ JSON (default: data/bioasq-sample)")
            p.add_argument("--negative", default=None, help="YAML with off-topic queries")
            p.add_argument("--limit", type=int, default=None, help="number of on-topic BioASQ questions")
            p.add_argument("--k", type=int, default=5)


def main(args: argparse.Namespace) -> int:
    import pandas as pd

    from pipelines.tools import vera as vera_tool

    if args.vera_command == "score":
        from judges.config import ClientConfig, JudgeConfig

        # the judge model of the VERA suite; its options (judge.vera) and the window are the defaults
        cross_encoder = None if args.cross_encoder == "none" else args.cross_encoder
        summary = vera_tool.run_vera(args.run_dir, JudgeConfig(model=args.model), ClientConfig(),
                                     args.base_url, args.top_k, cross_encoder, args.b, args.n, args.seed,
                                     args.limit, progress=True)
        print(json.dumps(summary, indent=2))
        return 0
    if args.vera_command == "bootstrap":
        report = vera_tool.bootstrap_report(pd.read_parquet(args.scores), args.b, args.seed, args.n)
    else:
        corpus = Path(args.corpus) if args.corpus else vera_tool.REPO / "data" / "bioasq-sample"
        from retrievers.loaders import load_bioasq_json

        positive = load_bioasq_json(corpus).queries.column("text").to_pylist()[: args.limit]
        negative = vera_tool.load_negative_queries(args.negative or vera_tool.DEFAULT_NEGATIVE)
        report = vera_tool.topicality_report(corpus, positive, negative, args.b, args.n, args.seed, args.k)
    text = json.dumps(report, indent=2, allow_nan=False)
    if args.out:
        Path(args.out).write_text(text + "\n")
    shown = not args.out or args.vera_command == "topicality" and len(text) < 4000
    print(text if shown else f"wrote {args.out}")
    return 0
