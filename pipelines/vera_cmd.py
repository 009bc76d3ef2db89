"""`ccrs vera ...`: VERA metrics over a run (the registered "vera" judge suite through the judge stage
function, plus the cross-encoder aggregate), bootstrap + convergence, topicality, the section 5.1
experiment on qrels.

  ccrs vera score RUN_DIR --base-url URL [--limit N] [--top-k K] \
[--cross-encoder PATH|untrained-demo-head|none]
                          [--b B] [--n N] [--seed S]
  ccrs vera bootstrap SCORES.parquet [--b B] [--n N] [--seed S] [--out FILE]
  ccrs vera topicality [--config RUN.yaml] [--run-dir DIR] [--dataset PATH] [--sets SETS.yaml]
                       [--method llm|cosine] [--llm-base-url URL] [--model M] [--reader-model M]
                       [--scores SCORES.parquet] [--limit N] [--k K] [--b B] [--n N] [--out FILE]
  ccrs vera qrels --qrels QRELS [--queries PATH] [--corpus PATH] [--unit pair|query] [--k K] [--limit N]
                  [--relevant-grade G] [--config RUN.yaml] [--llm-base-url URL] [--model M]
                  [--reader-model M] [--scores SCORES.parquet] [--b B] [--n N] [--out FILE]

Topicality (sections 3.4 and 5.2): the query sets of --sets (default configs/vera/topicality-sets.yaml:
on-topic, minority-topic, unrelated, most topical first) are retrieved through the run config's own
retrievers (its dataset is the repository; the index stages of the run directory are reused when the run
built them), answered with VERA's summarisation prompt (reader prompt `vera-summary`), judged with the
VERA LLM metrics, bootstrapped per retriever, set and metric and compared pairwise, with the declared
order checked. --method cosine (ours, no LLM): the mean cosine of each query's top-k hits of the dense
retrievers instead. qrels (section 5.1): per TREC judgment (or per query) a perfectly relevant and an
irrelevant context, answered and judged the same way; means per metric as the paper's Tables 1-2.
Both need --llm-base-url, or --scores with the judged scores of an earlier run (written next to --out as
<out>.scores.parquet).

Log records of Ray, vLLM and the HTTP client: `score` in <run dir>/vera/console.log, `topicality` and
`qrels` (unless from --scores) in $CCRS_HOME/logs/vera-<command>-<UTC time>.log.
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
    topicality = sub.add_parser("topicality", help="query sets (on-topic, minority topic, unrelated) through "
                                "the run's retrievers, VERA metrics compared (paper sections 3.4, 5.2)")
    qrels = sub.add_parser("qrels", help="perfectly relevant vs irrelevant contexts from TREC qrels, VERA "
                           "metrics per condition (paper section 5.1, Tables 1-2)")
    for p in (score, sub.add_parser("bootstrap", help="bootstrap + convergence of a long-format scores file"),
              topicality, qrels):
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
    for p in (topicality, qrels):
        p.add_argument("--config", default=None, help="run config whose reader model, judge and client are "
                       "used (topicality: also its dataset, chunking, embedder, index and retrievers); "
                       "default configs/cpu-demo.yaml")
        p.add_argument("--llm-base-url", "--base-url", dest="base_url", default=None,
                       help="OpenAI-compatible /v1 URL of the reader and the judge")
        p.add_argument("--model", default=None, help="judge model (default: the config's judge.model)")
        p.add_argument("--reader-model", default=None,
                       help="reader model (default: the config's first LLM reader, else the judge model)")
        p.add_argument("--reader-max-tokens", type=int, default=None,
                       help="reader reply budget (default: that reader's max_tokens, else 512)")
        p.add_argument("--scores", default=None, help="judged scores of an earlier run (no LLM call)")
        p.add_argument("--k", type=int, default=5, help="passages per context (the paper's top 5)")
        p.add_argument("--limit", type=int, default=None,
                       help="topicality: queries per set (the first N); qrels: contexts per condition "
                            "(drawn at random, seeded)")
    topicality.add_argument("--run-dir", default=None, help="run directory holding (or to hold) the index "
                            "stages (default: the config's run_dir)")
    topicality.add_argument("--dataset", default=None, help="the repository: overrides the config's "
                            "dataset.path")
    topicality.add_argument("--sets", default=None, help="query sets YAML (default "
                            "configs/vera/topicality-sets.yaml)")
    topicality.add_argument("--method", choices=TOPICALITY_METHODS, default="llm",
                            help="llm: VERA's LLM metrics (the paper's); cosine: mean top-k cosine of the "
                                 "dense retrievers (no LLM)")
    qrels.add_argument("--qrels", required=True, help="TREC qrels file: query_id iteration doc_id grade")
    qrels.add_argument("--queries", default=None, help="queries: TSV (id, text[, ground truth]) or a "
                       "dataset path (default data/bioasq-sample)")
    qrels.add_argument("--corpus", default=None, help="passages: TSV (id, text) or a dataset path (default "
                       "data/bioasq-sample)")
    qrels.add_argument("--unit", default="pair",
                       help="pair: one context per judged query-passage pair (the paper's); query: per "
                            "query its first k passages of the grade")
    qrels.add_argument("--relevant-grade", type=int, default=None,
                       help="grade of a perfectly relevant passage (default: the file's highest)")


def console_log(args: argparse.Namespace) -> Path | None:
    """score: <run dir>/vera/console.log; topicality that retrieves or asks an LLM: a file under
    $CCRS_HOME/logs; bootstrap and topicality from --scores only compute: none."""
    from infra.console import home_log_file, log_file_in
    from tasks.layout import RunLayout

    if args.vera_command == "score":
        return log_file_in(RunLayout(Path(args.run_dir)).vera_dir)
    if args.vera_command == "topicality" and not args.scores and (args.method == "cosine" or args.base_url):
        return home_log_file("vera-topicality")
    if args.vera_command == "qrels" and not args.scores and args.base_url:
        return home_log_file("vera-qrels")
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
        return write_report(report, args.out, None)
    if args.vera_command == "topicality":
        return write_report(topicality(args, vera_tool), args.out, print_topicality)
    return write_report(qrels(args, vera_tool), args.out, print_qrels)


def write_report(report: dict, out: str | None, show) -> int:
    """The JSON report to --out (else printed); `show` prints the verdict a person reads first."""
    text = json.dumps(report, indent=2, allow_nan=False)
    if show is not None:
        show(report)
    if out:
        Path(out).write_text(text + "\n")
        say(f"wrote {out}")
    else:
        say(text)
    return 0


# --- topicality and qrels -----------------------------------------------------------------------------

def run_config(args: argparse.Namespace):
    """The run config (--config, default the CPU demo's) with a relative dataset path read from the working
    directory, else from the project's resources, as `ccrs run` reads it."""
    from pipelines.config import ConfigError, load_config
    from pipelines.injection_cmd import dataset_path

    overrides = {"dataset.path": args.dataset} if getattr(args, "dataset", None) else {}
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config.model_copy(update={"dataset": config.dataset.model_copy(
        update={"path": str(dataset_path(config.dataset.path))})})


def reader_and_judge(args: argparse.Namespace, config, vera_tool):
    """VERA's summarising reader (the config's first LLM reader's model, window and budget, or
    --reader-model) and the config's judge (--model overrides its model)."""
    llm = next((r for r in config.readers if r.kind == "llm"), None)
    judge = config.judge.model_copy(update={"model": args.model}) if args.model else config.judge
    model = args.reader_model or (llm.model if llm else judge.model)
    max_tokens = args.reader_max_tokens or (llm.max_tokens if llm else 512)
    reader = vera_tool.vera_reader(model, max_tokens, llm.context_window if llm else 2048)
    return reader, judge


def needs_endpoint(args: argparse.Namespace, what: str) -> None:
    if not args.base_url:
        raise UsageError(f"{what} needs --llm-base-url (the reader and the judge), or --scores from an "
                         "earlier run")


def keep_scores(scores, out: str | None, meta: dict) -> None:
    if out:
        scores_file = Path(out).with_suffix(".scores.parquet")
        scores.to_parquet(scores_file, index=False)
        meta["scores_file"] = str(scores_file)


def topicality(args: argparse.Namespace, vera_tool) -> dict:
    import pandas as pd

    stats = (args.b, args.n, args.seed)
    if args.scores:
        return vera_tool.topicality_report(pd.read_parquet(args.scores), *stats, method=args.method,
                                           scores_file=args.scores)
    if args.method == "llm":
        needs_endpoint(args, "topicality --method llm (the paper's: VERA LLM metrics)")
    config = run_config(args)
    run_dir = Path(args.run_dir) if args.run_dir else config.resolved_run_dir()
    try:
        sets = vera_tool.load_query_sets(args.sets or vera_tool.DEFAULT_SETS, config.dataset, args.limit)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    texts = [text for query_set in sets for text in query_set.texts]
    meta = {"method": args.method, "k": args.k, "repository": config.dataset.path, "run_dir": str(run_dir)}
    say(f"topicality: {', '.join(f'{s.name} ({len(s.texts)})' for s in sets)} queries, top {args.k} of "
        f"{', '.join(config.retrieval.retrievers)} over {config.dataset.path}", err=True)
    if args.method == "cosine":
        from retrievers.methods import retrieval_method

        dense = [name for name in config.retrieval.retrievers if retrieval_method(name).needs_vectors]
        if not dense:
            raise UsageError("--method cosine reads the cosines of a dense retriever (knn); the config's "
                             f"retrievers are {config.retrieval.retrievers}")
        config = config.model_copy(update={"retrieval": config.retrieval.model_copy(
            update={"retrievers": dense})})
        hits = vera_tool.run_retriever_hits(config, run_dir, texts, args.k, progress=True)
        return vera_tool.topicality_report(vera_tool.hit_score_frame(sets, hits), *stats, sets=sets, **meta)
    reader, judge = reader_and_judge(args, config, vera_tool)
    hits = vera_tool.run_retriever_hits(config, run_dir, texts, args.k, progress=True)
    asks = vera_tool.topicality_asks(sets, hits)
    samples, failed = vera_tool.answer_asks(asks, reader, config.client, args.base_url, progress=True)
    scores = vera_tool.judged_set_scores(asks, samples, failed, judge, config.client, args.base_url,
                                         progress=True)
    meta.update(provenance(reader, judge, len(failed)))
    keep_scores(scores, args.out, meta)
    return vera_tool.topicality_report(scores, *stats, sets=sets, **meta)


def provenance(reader, judge, failed_generations: int) -> dict:
    from judges.readers import PROMPT_VERSIONS

    return {"reader_model": reader.model, "reader_prompt": PROMPT_VERSIONS[reader.prompt_style],
            "reader_max_tokens": reader.max_tokens, "judge_model": judge.model,
            "judge_prompt_version": judge.vera.prompt_version, "failed_generations": failed_generations}


def qrels(args: argparse.Namespace, vera_tool) -> dict:
    import pandas as pd

    stats = (args.b, args.n, args.seed)
    if args.scores:
        return vera_tool.qrels_report(pd.read_parquet(args.scores), *stats, scores_file=args.scores)
    needs_endpoint(args, "qrels")
    config = run_config(args)
    sample = str(vera_tool.RESOURCE_ROOT / "data" / "bioasq-sample")
    try:
        judgments = vera_tool.read_qrels(args.qrels)
        queries, corpus = vera_tool.load_qrels_texts(args.queries or sample, args.corpus or sample, judgments)
        built = vera_tool.qrels_asks(judgments, queries, corpus, args.unit, args.k, args.limit,
                                     args.relevant_grade, args.seed)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    reader, judge = reader_and_judge(args, config, vera_tool)
    say(f"qrels: {len(built.asks)} contexts (unit {args.unit}, relevant grade {built.relevant_grade})"
        + (f"; judgments dropped: {built.dropped}" if built.dropped else ""), err=True)
    samples, failed = vera_tool.answer_asks(built.asks, reader, config.client, args.base_url, progress=True)
    scores = vera_tool.judged_set_scores(built.asks, samples, failed, judge, config.client, args.base_url,
                                         progress=True)
    meta = {"qrels": args.qrels, "unit": args.unit, "k": args.k if args.unit == "query" else 1,
            "relevant_grade": built.relevant_grade, "dropped_judgments": built.dropped,
            **provenance(reader, judge, len(failed))}
    keep_scores(scores, args.out, meta)
    return vera_tool.qrels_report(scores, *stats, **meta)


def _cell(entry: dict | None) -> str:
    if not entry:
        return "-"
    return f"{entry['mean']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def print_topicality(report: dict) -> None:
    """Per retriever and metric: each set's bootstrap mean [interval], whether the declared order holds,
    and every pair's difference."""
    names = [s["name"] for s in report["sets"]]
    say(f"VERA topicality ({report.get('method', 'llm')}), B = {report['b']}, n = {report['n'] or 'all'}: "
        + ", ".join(f"{s['name']} {s['n_queries']}" for s in report["sets"]) + " queries")
    for system, result in report["systems"].items():
        say(f"\n{'retriever ' + system:28s}" + "".join(f"  {name:>24s}" for name in names) + "  order")
        for metric, entry in result["metrics"].items():
            if not entry["computable"]:
                say(f"  {metric:26s} not computable: {entry['reason']}")
                continue
            order = ("holds, separated" if entry["expected_order_separated"] else
                     "holds" if entry["expected_order_holds"] else "broken: " + " > ".join(entry["ranking"]))
            say(f"  {metric:26s}" + "".join(f"  {_cell(entry['sets'].get(n)):>24s}" for n in names)
                + f"  {order}")
            for pair in entry["pairs"]:
                say(f"      {pair['verdict']}")


def print_qrels(report: dict) -> None:
    """Paper Tables 1-2: mean per metric over the perfectly relevant (PR) and irrelevant (IR) contexts."""
    counts = report["n_asks"]
    say(f"VERA section 5.1: {counts['perfectly_relevant']} perfectly relevant (PR), {counts['irrelevant']} "
        f"irrelevant (IR) contexts")
    say(f"  {'metric':26s} {'PR mean (n)':>14s} {'IR mean (n)':>14s}  PR - IR")
    for metric, row in report["metrics"].items():
        pr, ir = row["perfectly_relevant"], row["irrelevant"]
        cells = [f"{c['mean']:.3f} ({c['n']})" if c["mean"] is not None else f"- ({c['n']})"
                 for c in (pr, ir)]
        diff = row.get("difference")
        verdict = (f"{diff['diff_mean']:+.3f} [{diff['diff_low']:.3f}, {diff['diff_high']:.3f}]"
                   + (" separated" if diff["separated"] else "") if diff else "not computable")
        say(f"  {metric:26s} {cells[0]:>14s} {cells[1]:>14s}  {verdict}")
