"""`ccrs vera ...`: VERA metrics over a run (the run config's "vera" judge suite through the judge stage
function, plus the cross-encoder aggregate), bootstrap + convergence, topicality, the section 5.1
experiment on qrels.

  ccrs vera score RUN_DIR [--config YAML] [--llm-base-url URL] [--judge-base-url URL] [--judge-model NAME]
                          [--limit N] [--top-k K] [--cross-encoder PATH|ID|untrained-demo-head|none]
                          [--embedder PATH|ID] [--vera-prompt-version v2|paper|v1] [--b B] [--n N]
                          [--preset paper] [--seed S]
  ccrs vera bootstrap SCORES.parquet [--b B] [--n N] [--seed S] [--out DIR]
  ccrs vera topicality [--config YAML] [--run-dir DIR] [--dataset PATH] [--sets SETS.yaml]
                       [--method llm|cosine] [--llm-base-url URL] [--judge-model NAME] [--reader-model M]
                       [--scores SCORES.parquet] [--limit N] [--k K] [--b B] [--n N] [--out DIR]
                       [--cross-encoder PATH|ID] [--embedder PATH|ID]
  ccrs vera qrels --qrels QRELS [--queries PATH] [--corpus PATH] [--unit pair|query] [--k K] [--limit N]
                  [--retrievers bm25,knn]
                  [--relevant-grade G] [--config YAML] [--llm-base-url URL] [--judge-model NAME]
                  [--reader-model M] [--scores SCORES.parquet] [--b B] [--n N] [--out DIR]
                  [--cross-encoder PATH|ID] [--embedder PATH|ID]

--cross-encoder (every command that judges) sets judge.vera.cross_encoder: a TRAINED cross-encoder (local
folder, or a hub id already in the local cache) whose logit over (question, enriched answer) is the paper's
aggregate, vera_aggregate, with vera_aggregate_sigmoid beside it (qrels prints it as the Agg column);
'none' turns off one the config names. --embedder sets judge.vera.embedder (retrieval precision and answer
relevance; default all-MiniLM-L6-v2). --vera-prompt-version sets judge.vera.prompt_version: the default v2
(ours: at most 12 statements, every generated question in one call) fits the local CPU model; `paper` is
the VERA paper's construct (no statement cap, one question a call: more and longer calls). The version in
use is named on the line each judging command starts with. --preset paper sets what the paper fixes: the
`paper` prompts, the top 5 passages, n = 50 and B = 500; a set with fewer than 50 observations is drawn at
the paper's ratio n/N = 50/200 and a note says so. A --n above a set's observations is refused (exit 2).

score: the judge, its `judge.vera` options, the client and the endpoint are the run's own config
(RUN_DIR/config.json; --config names another), reached as `ccrs run` reaches them (the judge's own
endpoint, else --llm-base-url, else the config's Serve app); the outputs go to RUN_DIR/vera/.
Topicality (sections 3.4 and 5.2): the query sets of --sets (default configs/vera/topicality-sets.yaml:
on-topic, minority-topic, unrelated, most topical first) are retrieved through the run config's own
retrievers (its dataset is the repository; the index stages of the run directory are reused when the run
built them), answered with VERA's summarisation prompt (reader prompt `vera-summary`), judged with the
VERA LLM metrics, bootstrapped per retriever, set and metric and compared pairwise, with the declared
order checked. --method cosine (ours, no LLM): the mean cosine of each query's top-k hits of the dense
retrievers instead. qrels (section 5.1): per TREC judgment (or per query) a perfectly relevant and an
irrelevant context, answered and judged the same way; means per metric as the paper's Tables 1-2. With
--retrievers (the paper's rows, LLM x retriever): per condition the pool of the passages judged at its
grade, each query's top k ranked by each named retrieval method (in process: BM25 with the config's index
parameters, k-NN with its embedder), answered by each of the config's LLM readers (or --reader-model); a
reader x retriever grid, written beside the JSON as qrels.md.
Both need --llm-base-url, or --scores with the judged scores of an earlier run (written to --out as
<command>_scores.parquet beside the <command>.json report).

Log records of Ray, vLLM and the HTTP client: `score` in <run dir>/vera/console.log, `topicality` and
`qrels` (unless from --scores) in $CCRS_HOME/logs/vera-<command>-<UTC time>.log.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from infra.console import say
from pipelines import options
from pipelines.options import UsageError
from pipelines.option_schema import ANY_COMMAND, Option
from pipelines.resources import RESOURCE_ROOT
from retrievers.methods import RETRIEVAL_METHODS
from stats.vera import PAPER_SAMPLE_RATIO, SampleSize

# llm: VERA's LLM metrics (the paper's, pipelines/tools/vera/query_sets.py);
# cosine: our embedding variant (pipelines/tools/vera/topicality.py topicality_report)
TOPICALITY_METHODS = ("llm", "cosine")
# Settings by name. paper: everything the VERA paper fixes that runs here: its prompts (no statement cap,
# one generated question a call), the top 5 passages (section 5.1), bootstrap samples of 50 and 500
# resamples (section 5.2), drawn at its ratio n/N = 50/200 where a set has fewer than 50 observations.
# The reader's temperature 0 and top_p 0.01 are every VERA reader's (pipelines/tools/vera/query_sets.py
# vera_reader);
# the paper's Claude judges, Titan embedder and ms-marco cross-encoder are not reachable here.
PRESETS = {"paper": {"n": 50, "b": 500, "sample_ratio": PAPER_SAMPLE_RATIO, "prompt_version": "paper",
                     "top_k": 5}}
RETRIEVERS = Option(
    "--retrievers", "the section 5.1 contexts retrieved, one grid row per reader x retriever (the paper's "
    "rows): these retrieval methods, comma-separated, each ranking the pool of the passages judged at a "
    "condition's grade for each of its queries, the top --top-k fed; readers: the config's LLM readers "
    "(or --reader-model)", {"action": options.CommaList, "choices": list(RETRIEVAL_METHODS),
                            "metavar": "R,R"},
    {ANY_COMMAND: (None, "none: the contexts straight from the qrels, by --unit")})


def add_arguments(parser: argparse.ArgumentParser, name: str = "vera") -> None:
    sub = parser.add_subparsers(dest="vera_command", required=True)
    score = sub.add_parser("score", help="the run config's VERA suite + cross-encoder aggregate + bootstrap "
                           "for a run")
    bootstrap = sub.add_parser("bootstrap", help="bootstrap + convergence of a long-format scores file")
    topicality = sub.add_parser("topicality", help="query sets (on-topic, minority topic, unrelated) through "
                                "the run's retrievers, VERA metrics compared (paper sections 3.4, 5.2)")
    qrels = sub.add_parser("qrels", help="perfectly relevant vs irrelevant contexts from TREC qrels, VERA "
                           "metrics per condition (paper section 5.1, Tables 1-2)")
    _score_arguments(score)
    bootstrap.add_argument("scores")
    for command, p in (("vera score", score), ("vera bootstrap", bootstrap), ("vera topicality", topicality),
                       ("vera qrels", qrels)):
        options.add_bootstrap(p, command)
        p.add_argument("--n", type=int, default=None,
                       help="bootstrap sample size n (default: all observations; above them: refused)")
        p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                       help="paper: the VERA paper's settings: its prompts, top 5 passages, n = 50 and "
                            "B = 500 (section 5.2), n drawn as the paper's n/N = 50/200 where a set has "
                            "fewer than 50 observations (noted); --b, --n, --top-k and "
                            "--vera-prompt-version still win")
    for command, p in (("vera bootstrap", bootstrap), ("vera topicality", topicality), ("vera qrels", qrels)):
        options.add_out(p, command, "<command>.json, and <command>_scores.parquet of the judged scores",
                        default=Path("runs/vera"))
    for command, p in (("vera topicality", topicality), ("vera qrels", qrels)):
        _set_arguments(p, command)
    _topicality_arguments(topicality)
    _qrels_arguments(qrels)


def _score_arguments(score: argparse.ArgumentParser) -> None:
    command = "vera score"
    score.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (`ccrs run`, `ccrs evaluate`)")
    options.add_config(score, command)
    options.add_endpoint(score, aliases=("--base-url",), command=command)
    options.add_judge(score, model_aliases=("--model",), scoring=False, command=command)
    options.add(score, command, "--limit", lands=False)
    options.add(score, command, "--top-k")
    add_vera_models(score)


def add_vera_models(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cross-encoder", default=None, metavar="PATH|ID",
                   help="a TRAINED cross-encoder (local folder or cached hub id; sets "
                        "judge.vera.cross_encoder) for the aggregate: vera_aggregate (logit) and "
                        "vera_aggregate_sigmoid; 'none': off "
                        "(default: the config's, off unless it names one; none ships here); "
                        "'untrained-demo-head' = demo only, written as vera_aggregate_untrained")
    p.add_argument("--embedder", default=None, metavar="PATH|ID",
                   help="sentence-transformers model of retrieval precision and answer relevance (sets "
                        "judge.vera.embedder; default the config's, all-MiniLM-L6-v2)")
    from judges.templates import versions

    p.add_argument("--vera-prompt-version", choices=versions("vera"), default=None,
                   help="VERA prompts (sets judge.vera.prompt_version; default the config's, v2: ours, "
                        "fitted to the local CPU model); paper: the VERA paper's construct")


def vera_overrides(args: argparse.Namespace) -> dict:
    """judge.vera.cross_encoder and judge.vera.embedder from --cross-encoder / --embedder, where given."""
    overrides = {}
    if getattr(args, "cross_encoder", None):
        overrides["judge.vera.cross_encoder"] = None if args.cross_encoder == "none" else args.cross_encoder
    if getattr(args, "embedder", None):
        overrides["judge.vera.embedder"] = args.embedder
    version = getattr(args, "vera_prompt_version", None) or preset_of(args).get("prompt_version")
    if version:
        overrides["judge.vera.prompt_version"] = version
    return overrides


def preset_of(args: argparse.Namespace) -> dict:
    return PRESETS.get(getattr(args, "preset", None) or "", {})


def prompts_named(judge) -> str:
    """The VERA prompt version a command judges with, and the option that gives the paper's."""
    version = judge.vera.prompt_version
    paper = "" if version == "paper" else "; the paper's: --vera-prompt-version paper"
    return f"VERA prompts {version}{paper}"



def _set_arguments(p: argparse.ArgumentParser, command: str) -> None:
    """What topicality and qrels share: the config's reader, judge and client, an endpoint, judged scores."""
    options.add_config(p, command)
    options.add_endpoint(p, aliases=("--base-url",), command=command)
    options.add_judge(p, model_aliases=("--model",), scoring=False, command=command)
    p.add_argument("--reader-model", default=None,
                   help="reader model (default: the config's first LLM reader, else the judge model)")
    p.add_argument("--reader-max-tokens", type=int, default=None,
                   help="reader reply budget (default: that reader's max_tokens, else 512)")
    p.add_argument("--scores", default=None, help="judged scores of an earlier run (no LLM call)")
    options.add_alias(p, "--k", options.add(p, command, "--top-k")[0])
    add_vera_models(p)


def _topicality_arguments(topicality: argparse.ArgumentParser) -> None:
    topicality.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="a run folder whose retrievers and "
                            "index stages are used (built there when missing; default: the config's run_dir)")
    topicality.add_argument("--run-dir", action=options.DeprecatedAlias, dest="old_run_dir",
                            new="RUN_DIR (an argument)")
    options.add_dataset(topicality, "vera topicality")
    sets = topicality.add_argument("--query-sets", metavar="YAML", help="query sets YAML (default "
                                   "configs/vera/topicality-sets.yaml)")
    options.add_alias(topicality, "--sets", sets)
    topicality.add_argument("--method", choices=TOPICALITY_METHODS, default="llm",
                            help="llm: VERA's LLM metrics (the paper's); cosine: mean top-k cosine of the "
                                 "dense retrievers (no LLM)")


def _qrels_arguments(qrels: argparse.ArgumentParser) -> None:
    qrels.add_argument("--qrels", required=True, help="TREC qrels file: query_id iteration doc_id grade")
    qrels.add_argument("--queries", default=None, help="queries: TSV (id, text[, ground truth]) or a "
                       "dataset path (default data/bioasq-sample)")
    options.add(qrels, "vera qrels", "--corpus", default=(None, "data/bioasq-sample"))
    qrels.add_argument("--unit", default=None,
                       help="pair (default): one context per judged query-passage pair (the paper's); "
                            "query: per query its first k passages of the grade; with --retrievers: query, "
                            "the retrieved top k")
    RETRIEVERS.add(qrels, "vera qrels", lands=False)
    options.add_alias(qrels, "--limit", options.add(qrels, "vera qrels", "--sample")[0])
    qrels.add_argument("--relevant-grade", type=int, default=None,
                       help="grade of a perfectly relevant passage (default: the file's highest)")


def console_log(args: argparse.Namespace) -> Path | None:
    """score: <run dir>/vera/console.log; topicality that retrieves or asks an LLM: a file under
    $CCRS_HOME/logs; bootstrap and topicality from --scores only compute: none."""
    from infra.console import home_log_file, log_file_in
    from tasks.runtime.layout import RunLayout

    if args.vera_command == "score":
        return log_file_in(RunLayout(Path(args.run_dir)).vera_dir)
    if args.vera_command == "topicality" and not args.scores and (args.method == "cosine"
                                                                   or args.llm_base_url):
        return home_log_file("vera-topicality")
    if args.vera_command == "qrels" and not args.scores and args.llm_base_url:
        return home_log_file("vera-qrels")
    return None


def main(args: argparse.Namespace) -> int:
    from judges.vera import CrossEncoderUnavailable
    from stats.errors import StatsInputError

    return options.exit_2_on_usage_error("vera", lambda: run(args), CrossEncoderUnavailable, StatsInputError)


def bootstrap_settings(args: argparse.Namespace) -> argparse.Namespace:
    """B and n from --b / --n, else the --preset's, else B's default and n = every observation. n becomes
    a SampleSize: a --n above a set's observations is refused; the preset's is drawn at its ratio."""
    preset = preset_of(args)
    if not options.given(args, "b"):
        args.b = preset.get("b", args.b)
    if args.n is not None:
        args.n = SampleSize(args.n)
    else:
        args.n = SampleSize(preset.get("n"), preset.get("sample_ratio"))
    if getattr(args, "top_k", None) is None and "top_k" in preset and args.vera_command == "score":
        args.top_k = preset["top_k"]
    return args


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    args = bootstrap_settings(args)
    from pipelines.tools import vera as vera_tool

    if getattr(args, "out", None) and args.out.suffix == ".json":
        say(f"ccrs vera: --out {args.out} is deprecated: --out names a folder (<command>.json inside it); "
            "this release still writes the file named", err=True)

    if args.vera_command == "score":
        return score(args, vera_tool)
    if args.vera_command == "bootstrap":
        report = vera_tool.bootstrap_report(pd.read_parquet(args.scores), args.b, args.seed, args.n)
        return write_report(report, report_files(args.out, "bootstrap")[0], print_bootstrap)
    if args.vera_command == "topicality":
        return write_report(topicality(args, vera_tool), report_files(args.out, "topicality")[0],
                            print_topicality)
    report, path = qrels(args, vera_tool), report_files(args.out, "qrels")[0]
    written = write_report(report, path, print_qrels)
    if "grid" in report:
        path.with_suffix(".md").write_text(grid_markdown(report))
        say(f"wrote {path.with_suffix('.md')}")
    return written


def score(args: argparse.Namespace, vera_tool) -> int:
    """The run config's VERA suite on the run's answers, with its judge, at the judge's endpoint."""
    from pipelines.tools.endpoint import fitted_judge, judge_client, judge_endpoint

    config = score_config(args)
    if (n_queries := run_queries(args)) is not None:
        args.n.for_observations(n_queries)  # an n the run cannot give: refused before any call
    cross_encoder = config.judge.vera.cross_encoder
    if cross_encoder is None:
        say(vera_tool.AGGREGATE_OFF, err=True)
    top_k = args.top_k if args.top_k is not None else config.retrieval.top_k
    say(f"vera score: judge {config.judge.model}, metrics {', '.join(config.judge.vera.metrics)}, "
        f"top {top_k} chunks, {prompts_named(config.judge)}", err=True)
    with judge_endpoint(config, announce=lambda text: say(f"{text}...", err=True)) as base_url:
        judge = fitted_judge(config, ["vera"], base_url)
        summary = vera_tool.run_vera(args.run_dir, judge, judge_client(config), base_url, top_k,
                                     cross_encoder, args.b, args.n, args.seed, args.limit, progress=True)
    say(json.dumps(summary, indent=2))
    return 0


def run_queries(args: argparse.Namespace) -> int | None:
    """The queries `score` judges per system: the run's, or its first --limit (None: no queries file)."""
    import pyarrow.parquet as pq
    from tasks.runtime.layout import RunLayout

    queries = RunLayout(Path(args.run_dir)).queries
    if not queries.exists():
        return None
    count = pq.read_metadata(queries).num_rows
    return min(count, args.limit) if args.limit is not None else count


def score_config(args: argparse.Namespace):
    """--config, else the run's own config.json, else the default run config; the options' overrides."""
    from pipelines.config import ConfigError, load_config
    from tasks.runtime.layout import RunLayout

    recorded = RunLayout(Path(args.run_dir)).config_json
    path = args.config or (str(recorded) if recorded.exists() else None)
    in_use = argparse.Namespace(**{**vars(args), "config": path})  # a recorded config is the user's own
    try:
        return load_config(path, {**options.config_overrides(in_use), **vera_overrides(args)})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def report_files(out: Path, command: str) -> tuple[Path, Path]:
    """(report JSON, judged scores) in the --out folder. A --out ending in .json is the former file form,
    still written for one release: the scores beside it as <out>.scores.parquet."""
    if out.suffix == ".json":
        return out, out.with_suffix(".scores.parquet")
    return out / f"{command}.json", out / f"{command}_scores.parquet"


def write_report(report: dict, path: Path, show) -> int:
    """The JSON report to `path`; `show` prints the verdict a person reads first."""
    text = json.dumps(report, indent=2, allow_nan=False)
    show(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    say(f"wrote {path}")
    return 0


def sample_size_notes(tree) -> list[str]:
    """Every distinct note of a set or metric whose n above its observations was drawn at a ratio."""
    if isinstance(tree, list):
        return list(dict.fromkeys(note for item in tree for note in sample_size_notes(item)))
    if not isinstance(tree, dict):
        return []
    own = [tree["sample_size_note"]] if tree.get("sample_size_note") else []
    return list(dict.fromkeys(own + sample_size_notes(list(tree.values()))))


def print_sample_size_notes(report: dict) -> None:
    for note in sample_size_notes(report):
        say(f"  note: {note}")


def print_bootstrap(report: dict) -> None:
    """Per system and metric: the bootstrap mean [interval], SE and the B from which the SE converged."""
    say(f"VERA bootstrap, B = {report['b']}, n = {report['n'] or 'all'}, seed {report['seed']}")
    print_sample_size_notes(report)
    for system, metrics in report["systems"].items():
        for metric, entry in metrics.items():
            if not entry["computable"]:
                say(f"  {system:16s} {metric:28s} not computable: {entry['reason']}")
                continue
            converged = entry["convergence"]["converged_at"]
            say(f"  {system:16s} {metric:28s} {_cell(entry)}  se {entry['se']:.4f}  converged at B = "
                f"{converged if converged is not None else 'not within the grid'}")


# --- topicality and qrels -----------------------------------------------------------------------------

def run_config(args: argparse.Namespace):
    """The run config (--config, default the CPU demo's) with the options' overrides and a relative dataset
    path read from the working directory, else from the project's resources, as `ccrs run` reads it."""
    from pipelines.config import ConfigError, load_config

    try:
        config = load_config(args.config, {**options.config_overrides(args), **vera_overrides(args)})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config.model_copy(update={"dataset": config.dataset.model_copy(
        update={"path": str(options.dataset_path(config.dataset.path))})})


def reader_and_judge(args: argparse.Namespace, config, vera_tool):
    """VERA's summarising reader (the config's first LLM reader's model, window and budget, or
    --reader-model) and the config's judge (--judge-model and --judge-base-url already applied)."""
    llm = next((r for r in config.readers if r.kind == "llm"), None)
    judge = config.judge
    model = args.reader_model or (llm.model if llm else judge.model)
    max_tokens = args.reader_max_tokens or (llm.max_tokens if llm else 512)
    reader = vera_tool.vera_reader(model, max_tokens, llm.context_window if llm else 2048)
    return reader, judge


def needs_endpoint(args: argparse.Namespace, what: str) -> None:
    if not args.llm_base_url:
        raise UsageError(f"{what} needs --llm-base-url (the reader and the judge), or --scores from an "
                         "earlier run")


def judge_url(args: argparse.Namespace, judge) -> str:
    """The judge's own endpoint (--judge-base-url, judge.base_url), else the reader's."""
    return judge.base_url or args.llm_base_url


def keep_scores(scores, args: argparse.Namespace, command: str, meta: dict) -> None:
    scores_file = report_files(args.out, command)[1]
    scores_file.parent.mkdir(parents=True, exist_ok=True)
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
    given_dir = args.run_dir or getattr(args, "old_run_dir", None)
    run_dir = Path(given_dir) if given_dir else config.resolved_run_dir()
    try:
        sets = vera_tool.load_query_sets(args.query_sets or vera_tool.DEFAULT_SETS, config.dataset,
                                         args.limit)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    args.n.for_observations(min(len(s.texts) for s in sets))  # an n the sets cannot give: refused now
    texts = [text for query_set in sets for text in query_set.texts]
    meta = {"method": args.method, "k": args.top_k, "repository": config.dataset.path,
            "run_dir": str(run_dir)}
    say(f"topicality: {', '.join(f'{s.name} ({len(s.texts)})' for s in sets)} queries, top {args.top_k} of "
        f"{', '.join(config.retrieval.retrievers)} over {config.dataset.path}", err=True)
    if args.method == "cosine":
        from retrievers.methods import retrieval_method

        dense = [name for name in config.retrieval.retrievers if retrieval_method(name).needs_vectors]
        if not dense:
            raise UsageError("--method cosine reads the cosines of a dense retriever (knn); the config's "
                             f"retrievers are {config.retrieval.retrievers}")
        config = config.model_copy(update={"retrieval": config.retrieval.model_copy(
            update={"retrievers": dense})})
        hits = vera_tool.run_retriever_hits(config, run_dir, texts, args.top_k, progress=True)
        return vera_tool.topicality_report(vera_tool.hit_score_frame(sets, hits), *stats, sets=sets, **meta)
    reader, judge = reader_and_judge(args, config, vera_tool)
    hits = vera_tool.run_retriever_hits(config, run_dir, texts, args.top_k, progress=True)
    asks = vera_tool.topicality_asks(sets, hits)
    scores, failed = answered_and_judged(args, asks, reader, config)
    meta.update(provenance(reader, judge, failed))
    keep_scores(scores, args, "topicality", meta)
    return vera_tool.topicality_report(scores, *stats, sets=sets, **meta)


def answered_and_judged(args: argparse.Namespace, asks, reader, config):
    """(judged scores, failed generations): the asks answered by the reader at --llm-base-url (a list of
    (label, reader): each answers every ask, one grid system per reader and retriever), then judged by the
    config's judge (at its own endpoint where it has one)."""
    from pipelines.tools import vera as vera_tool
    from pipelines.tools.endpoint import fitted_judge, judge_client

    url = judge_url(args, config.judge)
    say(f"judge {config.judge.model}, {prompts_named(config.judge)}", err=True)
    judge = fitted_judge(config, ["vera"], url)
    vera_tool.load_aggregator(judge.vera.cross_encoder, judge.vera.cross_encoder_max_length)  # before calls
    cells = None
    if isinstance(reader, list):
        asks, samples, failed, cells = vera_tool.answer_grid(asks, reader, config.client, args.llm_base_url,
                                                             progress=True)
    else:
        samples, failed = vera_tool.answer_asks(asks, reader, config.client, args.llm_base_url,
                                                progress=True)
    scores = vera_tool.judged_set_scores(asks, samples, failed, judge, judge_client(config), url,
                                         progress=True)
    return (scores if cells is None else vera_tool.with_grid_columns(scores, cells)), len(failed)


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
    if args.retrievers and args.unit not in (None, "query"):
        raise UsageError(f"--unit {args.unit} with --retrievers: a retriever ranks passages per query "
                         "(unit query)")
    args.unit = args.unit or ("query" if args.retrievers else "pair")
    config = run_config(args)
    sample = str(RESOURCE_ROOT / "data" / "bioasq-sample")
    from retrievers.trec import load_qrels_texts, read_qrels

    try:
        judgments = read_qrels(args.qrels)
        queries, corpus = load_qrels_texts(args.queries or sample, args.corpus or sample, judgments)
        if args.retrievers:
            return qrels_grid(args, config, vera_tool, judgments, queries, corpus)
        built = vera_tool.qrels_asks(judgments, queries, corpus, args.unit, args.top_k, args.sample,
                                     args.relevant_grade, args.seed)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    per_condition = Counter(ask.query_set for ask in built.asks)
    args.n.for_observations(min(per_condition.values()))  # an n the contexts cannot give: refused now
    reader, judge = reader_and_judge(args, config, vera_tool)
    say(f"qrels: {len(built.asks)} contexts (unit {args.unit}, relevant grade {built.relevant_grade})"
        + (f"; judgments dropped: {built.dropped}" if built.dropped else ""), err=True)
    scores, failed = answered_and_judged(args, built.asks, reader, config)
    meta = {"qrels": args.qrels, "unit": args.unit, "k": args.top_k if args.unit == "query" else 1,
            "relevant_grade": built.relevant_grade, "dropped_judgments": built.dropped,
            **provenance(reader, judge, failed)}
    keep_scores(scores, args, "qrels", meta)
    return vera_tool.qrels_report(scores, *stats, **meta)


def qrels_grid(args: argparse.Namespace, config, vera_tool, judgments, queries, corpus) -> dict:
    """The section 5.1 experiment per reader x retriever: each condition's qrels pool ranked by each of
    --retrievers, the top k answered by each reader, judged, reported per grid cell."""
    from retrievers.pool import rank_pool

    def rank(pool, texts, names, k):
        return rank_pool(pool, texts, names, k, config.index, config.embedder)

    built = vera_tool.retrieved_asks(judgments, queries, corpus, args.retrievers, rank, args.top_k,
                                     args.sample, args.relevant_grade, args.seed)
    per_cell = Counter((ask.system, ask.query_set) for ask in built.asks)
    args.n.for_observations(min(per_cell.values()))  # an n the contexts cannot give: refused now
    readers, judge = grid_readers(args, config, vera_tool), config.judge
    say(f"qrels: top {args.top_k} of each condition's pool by {', '.join(args.retrievers)}, "
        f"{len(built.asks)} contexts x {len(readers)} reader(s) ({', '.join(label for label, _ in readers)})"
        f", relevant grade {built.relevant_grade}"
        + (f"; dropped: {built.dropped}" if built.dropped else ""), err=True)
    scores, failed = answered_and_judged(args, built.asks, readers, config)
    meta = {"qrels": args.qrels, "unit": "query", "k": args.top_k, "relevant_grade": built.relevant_grade,
            "dropped_judgments": built.dropped, "retrievers": retriever_descriptions(args.retrievers, config),
            "retrieved": built.retrieved,
            "readers": {label: reader.model for label, reader in readers}, "judge_model": judge.model,
            "judge_prompt_version": judge.vera.prompt_version, "reader_prompt": reader_prompt(readers),
            "failed_generations": failed}
    keep_scores(scores, args, "qrels", meta)
    return vera_tool.qrels_report(scores, args.b, args.n, args.seed, **meta)


def grid_readers(args: argparse.Namespace, config, vera_tool) -> list:
    """(label, VERA summarising reader) per grid row: --reader-model alone, else every LLM reader of the
    config (its name, model, window and budget), else the judge model."""
    llms = [r for r in config.readers if r.kind == "llm"]
    if args.reader_model or not llms:
        reader, _ = reader_and_judge(args, config, vera_tool)
        return [(reader.model, reader)]
    return [(r.name, vera_tool.vera_reader(r.model, args.reader_max_tokens or r.max_tokens, r.context_window))
            for r in llms]


def reader_prompt(readers: list) -> str:
    from judges.readers import PROMPT_VERSIONS

    return PROMPT_VERSIONS[readers[0][1].prompt_style]


def retriever_descriptions(names: list[str], config) -> dict[str, str]:
    """What each grid retriever is, in words: the method and the settings of the config it ran with."""
    from retrievers.methods import retrieval_method

    index = config.index
    settings = {"bm25": f"bm25s Lucene BM25, k1 {index.bm25_k1}, b {index.bm25_b}",
                "knn": f"exact k-NN, embedder {config.embedder.model}"}
    return {name: settings.get(name, retrieval_method(name).description) for name in names}


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
    print_sample_size_notes(report)
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
    if "grid" in report:
        print_qrels_grid(report)
        return
    counts = report["n_asks"]
    say(f"VERA section 5.1: {counts['perfectly_relevant']} perfectly relevant (PR), {counts['irrelevant']} "
        f"irrelevant (IR) contexts")
    print_sample_size_notes(report)
    say(f"  {'metric':26s} {'PR mean (n)':>14s} {'IR mean (n)':>14s}  PR - IR")
    for metric, row in report["metrics"].items():
        pr, ir = row["perfectly_relevant"], row["irrelevant"]
        cells = [f"{c['mean']:.3f} ({c['n']})" if c["mean"] is not None else f"- ({c['n']})"
                 for c in (pr, ir)]
        diff = row.get("difference")
        verdict = (f"{diff['diff_mean']:+.3f} [{diff['diff_low']:.3f}, {diff['diff_high']:.3f}]"
                   + (" separated" if diff["separated"] else "") if diff else "not computable")
        say(f"  {metric:26s} {cells[0]:>14s} {cells[1]:>14s}  {verdict}")
    print_paper_table(report)


# The columns of the paper's Tables 1-2 (Agg: the cross-encoder's logit, vera_aggregate).
PAPER_COLUMNS = (("Faithfulness", "vera_faithfulness"), ("Relevance", "vera_answer_relevance"),
                 ("Recall", "vera_retrieval_recall"), ("Precision", "vera_retrieval_precision"),
                 ("Agg", "vera_aggregate"))


def print_paper_table(report: dict) -> None:
    """The means in the layout of the paper's Tables 1-2: PR and IR rows, one column per metric, the
    aggregate's logit as the Agg column ("-" where a metric has no score, e.g. no cross-encoder)."""
    metrics = report["metrics"]
    say("\n  as the paper's Tables 1-2 (Agg = cross-encoder logit, vera_aggregate"
        + (")" if "vera_aggregate" in metrics else "; off: no --cross-encoder)"))
    say(f"  {'Dataset':8s}" + "".join(f" {title:>12s}" for title, _ in PAPER_COLUMNS))
    for label, condition in (("PR", "perfectly_relevant"), ("IR", "irrelevant")):
        means = [metrics.get(metric, {}).get(condition, {}).get("mean") for _, metric in PAPER_COLUMNS]
        say(f"  {label:8s}" + "".join(f" {m:12.2f}" if m is not None else f" {'-':>12s}" for m in means))


def grid_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """The reader x retriever grid as the paper's Tables 1-2 side by side: per (reader, retriever) a PR
    and an IR row of the metric means (Agg: the cross-encoder's logit), with the contexts' count and the
    share of the fed passages the qrels judge at the relevant grade for their query."""
    header = ["Reader", "Retriever", "Dataset", *[title for title, _ in PAPER_COLUMNS], "Contexts",
              "Fed at relevant grade"]
    rows = []
    for cell in report["grid"]:
        fed = report.get("retrieved", {}).get(cell["retriever"], {})
        for label, condition in (("PR", "perfectly_relevant"), ("IR", "irrelevant")):
            means = [cell["metrics"].get(metric, {}).get(condition, {}).get("mean")
                     for _, metric in PAPER_COLUMNS]
            rows.append([cell["reader"], cell["retriever"], label,
                         *[f"{m:.2f}" if m is not None else "-" for m in means],
                         str(cell["n_asks"][condition]), _relevant_share(fed.get(condition))])
    return header, rows


def _relevant_share(counts: dict | None) -> str:
    """"a/b": of the b passages fed, a judged at the relevant grade for their query ("-": not known)."""
    if not counts:
        return "-"
    passages = sum(v for k, v in counts.items() if k.startswith("at_") or k == "unjudged")
    return f"{counts.get('at_relevant_grade', 0)}/{passages}"


def _difference(row: dict) -> str:
    diff = row.get("difference")
    if not diff:
        return "not computable"
    separated = " separated" if diff["separated"] else ""
    return f"{diff['diff_mean']:+.3f} [{diff['diff_low']:.3f}, {diff['diff_high']:.3f}]{separated}"


def print_qrels_grid(report: dict) -> None:
    """The grid, then per cell and metric the bootstrap difference PR - IR."""
    aggregate = any("vera_aggregate" in cell["metrics"] for cell in report["grid"])
    say(f"VERA section 5.1 per reader x retriever: top {report.get('k', 'k')} of each condition's qrels "
        f"pool (relevant grade {report.get('relevant_grade', '-')}); Agg = cross-encoder logit, "
        "vera_aggregate" + ("" if aggregate else " (off: no --cross-encoder)"))
    print_sample_size_notes(report)
    header, rows = grid_table(report)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for line in (header, *rows):
        say("  " + "  ".join(f"{str(x):>{w}s}" for x, w in zip(line, widths)))
    for cell in report["grid"]:
        say(f"\n  {cell['reader']} + {cell['retriever']}: PR - IR")
        for metric, row in cell["metrics"].items():
            say(f"    {metric:26s} {_difference(row)}")


def grid_markdown(report: dict) -> str:
    """qrels.md: the grid as a Markdown table, with what the contexts were."""
    header, rows = grid_table(report)
    retrievers = "; ".join(f"{name}: {what}" for name, what in report.get("retrievers", {}).items())
    intro = (f"Top {report.get('k', 'k')} of each condition's qrels pool ({report.get('qrels', '-')}, "
             f"relevant grade {report.get('relevant_grade', '-')}) per query; retrievers: "
             f"{retrievers or 'see the scores file'}; judge {report.get('judge_model', '-')}, VERA prompts "
             f"{report.get('judge_prompt_version', '-')}. Means per metric; Agg = the cross-encoder's logit "
             "(vera_aggregate). Fed at relevant grade: of the retrieved passages fed, those the qrels judge "
             "at the relevant grade for their query.")
    lines = ["# VERA section 5.1: perfectly relevant (PR) vs irrelevant (IR), reader x retriever", "", intro,
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"
