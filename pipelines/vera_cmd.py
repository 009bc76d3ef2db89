"""`ccrs vera ...`: VERA metrics over a run (the registered "vera" judge suite through the judge stage
function, plus the cross-encoder aggregate), bootstrap + convergence, topicality.

  ccrs vera score RUN_DIR --base-url URL [--limit N] [--top-k K] \
[--cross-encoder PATH|untrained-demo-head|none]
                          [--b B] [--n N] [--seed S]
  ccrs vera bootstrap SCORES.parquet [--b B] [--n N] [--seed S] [--out FILE]
  ccrs vera topicality [--method llm|cosine] [--llm-base-url URL] [--model M] [--reader-model M]
                       [--scores TOPICALITY_SCORES.parquet] [--corpus BIOASQ_JSON] [--negative YAML]
                       [--limit N] [--k K] [--b B] [--n N] [--out FILE]

Topicality --method llm (the default, vera-paper section 3.4): every on-topic and off-topic query is
answered from its top-k repository chunks by the reader LLM and judged with the VERA LLM metrics; per
metric the two sets' bootstrap means are compared. Needs --llm-base-url, or --scores with the judged scores
of an earlier run (written next to --out as <out>.scores.parquet). --method cosine (ours, no LLM) compares
the mean kNN cosine of the retrieved chunks instead.

Log records of Ray, vLLM and the HTTP client: `score` in <run dir>/vera/console.log, `topicality` (unless
from --scores) in $CCRS_HOME/logs/vera-topicality-<UTC time>.log.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from infra.console import say

# llm: VERA's LLM metrics (the paper's, pipelines.tools.vera.llm_topicality_report);
# cosine: our embedding variant (pipelines.tools.vera.topicality_report)
TOPICALITY_METHODS = ("llm", "cosine")
# Bootstrap settings by name: the VERA paper's topicality analysis used samples of 50 and 500 resamples.
PRESETS = {"paper": {"n": 50, "b": 500}}
DEFAULT_B = 1000


def add_arguments(parser: argparse.ArgumentParser, name: str = "vera") -> None:
    sub = parser.add_subparsers(dest="vera_command", required=True)
    score = sub.add_parser("score", help="VERA LLM metrics + cross-encoder aggregate + bootstrap for a run")
    score.add_argument("run_dir")
    score.add_argument("--llm-base-url", "--base-url", dest="base_url", required=True,
                       help="OpenAI-compatible /v1 URL of the judge")
    score.add_argument("--model", default="smollm2-135m-instruct")
    score.add_argument("--limit", type=int, default=None, help="first N queries only")
    score.add_argument("--top-k", type=int, default=5)
    score.add_argument("--cross-encoder", default="none",
                       help="local folder of a TRAINED cross-encoder for the aggregate (default 'none': off, "
                            "no trained one ships here); 'untrained-demo-head' = demo only, written as "
                            "vera_aggregate_untrained")
    for p in (score, sub.add_parser("bootstrap", help="bootstrap + convergence of a long-format scores file"),
              sub.add_parser("topicality",
                             help="on-topic vs off-topic queries against the BioASQ sample corpus")):
        p.add_argument("--b", type=int, default=None, help="bootstrap resamples B (default 1000)")
        p.add_argument("--n", type=int, default=None,
                       help="bootstrap sample size n (default: all observations)")
        p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                       help="paper: the VERA paper's n = 50 and B = 500 (section 5.2); --b / --n still win")
        p.add_argument("--seed", type=int, default=0)
        if p.prog.endswith("bootstrap"):
            p.add_argument("scores")
        if not p.prog.endswith("score"):
            p.add_argument("--out", default=None, help="JSON output file (default: print)")
        if p.prog.endswith("topicality"):
            p.add_argument("--corpus", default=None, help="BioASQ JSON (default: data/bioasq-sample)")
            p.add_argument("--negative", default=None, help="YAML with off-topic queries")
            p.add_argument("--limit", type=int, default=None, help="number of on-topic BioASQ questions")
            p.add_argument("--k", type=int, default=5, help="repository chunks per query")
            p.add_argument("--method", choices=TOPICALITY_METHODS, default="llm",
                           help="llm: VERA's LLM metrics (the paper's); cosine: mean kNN cosine (no LLM)")
            p.add_argument("--llm-base-url", "--base-url", dest="base_url", default=None,
                           help="OpenAI-compatible /v1 URL of the reader and the judge (method llm)")
            p.add_argument("--model", default="smollm2-135m-instruct", help="judge model (method llm)")
            p.add_argument("--reader-model", default=None, help="reader model (default: the judge model)")
            p.add_argument("--scores", default=None,
                           help="judged topicality scores of an earlier llm run (no LLM call)")


def console_log(args: argparse.Namespace) -> Path | None:
    """score: <run dir>/vera/console.log; topicality that retrieves or asks an LLM: a file under
    $CCRS_HOME/logs; bootstrap and topicality from --scores only compute: none."""
    from infra.console import home_log_file, log_file_in
    from tasks.layout import RunLayout

    if args.vera_command == "score":
        return log_file_in(RunLayout(Path(args.run_dir)).vera_dir)
    if args.vera_command == "topicality" and not args.scores and (args.method == "cosine" or args.base_url):
        return home_log_file("vera-topicality")
    return None


class UsageError(ValueError):
    """A combination of options that cannot run; reported without a traceback."""


def main(args: argparse.Namespace) -> int:
    from judges.vera import CrossEncoderUnavailable

    try:
        return run(args)
    except (UsageError, CrossEncoderUnavailable) as exc:
        say(f"ccrs vera: {exc}", err=True)
        return 2


def bootstrap_settings(args: argparse.Namespace) -> argparse.Namespace:
    """B and n from --b / --n, else the --preset's, else B = 1000 and n = every observation."""
    preset = PRESETS.get(getattr(args, "preset", None) or "", {})
    args.b = args.b if args.b is not None else preset.get("b", DEFAULT_B)
    args.n = args.n if args.n is not None else preset.get("n")
    return args


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    args = bootstrap_settings(args)
    from pipelines.tools import vera as vera_tool

    if args.vera_command == "score":
        from judges.config import ClientConfig, JudgeConfig

        # the judge model of the VERA suite; its options (judge.vera) and the window are the defaults
        cross_encoder = None if args.cross_encoder == "none" else args.cross_encoder
        if cross_encoder is None:
            say(vera_tool.AGGREGATE_OFF, err=True)
        summary = vera_tool.run_vera(args.run_dir, JudgeConfig(model=args.model), ClientConfig(),
                                     args.base_url, args.top_k, cross_encoder, args.b, args.n, args.seed,
                                     args.limit, progress=True)
        say(json.dumps(summary, indent=2))
        return 0
    if args.vera_command == "bootstrap":
        report = vera_tool.bootstrap_report(pd.read_parquet(args.scores), args.b, args.seed, args.n)
    else:
        report = topicality(args, vera_tool)
    text = json.dumps(report, indent=2, allow_nan=False)
    if args.out:
        Path(args.out).write_text(text + "\n")
    shown = not args.out or args.vera_command == "topicality" and len(text) < 4000
    say(text if shown else f"wrote {args.out}")
    return 0


def topicality(args: argparse.Namespace, vera_tool) -> dict:
    import pandas as pd

    if args.method == "llm" and args.scores:
        return vera_tool.llm_topicality_report(pd.read_parquet(args.scores), args.b, args.n, args.seed,
                                               scores_file=args.scores)
    if args.method == "llm" and not args.base_url:
        raise UsageError("topicality --method llm (the paper's: VERA LLM metrics) needs --llm-base-url, or "
                         "--scores from an earlier run; --method cosine runs without an LLM")
    from retrievers.loaders import load_bioasq_json

    corpus = Path(args.corpus) if args.corpus else vera_tool.REPO / "data" / "bioasq-sample"
    queries = load_bioasq_json(corpus).queries
    positive = queries.column("text").to_pylist()[: args.limit]
    negative = vera_tool.load_negative_queries(args.negative or vera_tool.DEFAULT_NEGATIVE)
    if args.method == "cosine":
        return vera_tool.topicality_report(corpus, positive, negative, args.b, args.n, args.seed, args.k)
    from judges.config import ClientConfig, JudgeConfig, ReaderConfig

    truths = [str(t or "") for t in queries.column("answer").to_pylist()[: args.limit]]
    reader = ReaderConfig(name="topicality", model=args.reader_model or args.model)
    client, judge = ClientConfig(), JudgeConfig(model=args.model)
    samples, failed = vera_tool.topicality_samples(corpus, positive, negative, truths, reader, client,
                                                   args.base_url, args.k, progress=True)
    scores = vera_tool.judged_topicality_scores(samples, failed, judge, client, args.base_url, progress=True)
    meta = {"k": args.k, "judge_model": judge.model, "reader_model": reader.model,
            "prompt_version": judge.vera.prompt_version}
    if args.out:
        scores_file = Path(args.out).with_suffix(".scores.parquet")
        scores.to_parquet(scores_file, index=False)
        meta["scores_file"] = str(scores_file)
    return vera_tool.llm_topicality_report(scores, args.b, args.n, args.seed, **meta)
