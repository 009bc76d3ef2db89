"""`ccrs evaluate FILE [FILE ...]`: judge the answers your own RAG systems produced, with the judge stage,
statistics, verdict, run extensions (pipelines/extensions/) and MLflow logging of `ccrs run` (no retrieval,
no generation).

Exit codes: 0 the verdict is printed; 2 bad input or options (one line, before any work); 1 a failure
during the run (finished stages are kept, a rerun resumes); 4 no judgment has a score (every one failed:
the verdict is the failure table, the reasons and the judge's replies; the run is in MLflow)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "evaluate") -> None:
    from tasks.outputs import COLUMN_ALIASES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "One row = one system's answer to one question (JSONL, CSV or Parquet). Accepted column names:\n"
        + "\n".join(f"  {field:<14} {' | '.join(names)}" for field, names in COLUMN_ALIASES.items())
        + "\nquestion and answer are required; contexts (a list of strings, in CSV a JSON list) are needed "
        "by CC, ID, AC and IR,\na reference answer by AC and IR (`ccrs metrics` lists every metric's "
        "inputs). Without a system column\neach file is one system, named by its stem (or --system NAME). "
        "Without a question id, a hash of the question text is used.")
    parser.add_argument("files", nargs="*", type=Path, help="outputs files (.jsonl, .csv, .parquet); or an "
                        "extension's source instead (--traces EXPERIMENT: docs/traces.md)")
    for flag in options.EVALUATE_OPTIONS:  # the names and meanings ccrs_eval.evaluate() takes too
        extra = {"choices": ("judge", "reduce", "track")} if flag == "--from-stage" else {}
        action = options.SHARED[flag].add(parser, name, **extra)
        if flag == "--out":
            options.add_alias(parser, "--run-dir", action)
    options.add_extensions(parser, "evaluate")


def console_log(args: argparse.Namespace) -> Path | None:
    """<run dir>/logs/console.log; none when the inputs do not pass the checks (main says why)."""
    from pipelines.evaluate import EvaluationInputError
    from tasks.runtime.layout import RunLayout

    try:
        config, _ = _prepare(args)
    except EvaluationInputError:
        return None
    return RunLayout(config.resolved_run_dir()).console_log


def main(args: argparse.Namespace) -> int:
    from infra.console import say
    from pipelines.evaluate import EvaluationInputError
    from pipelines.pipeline import run_evaluation
    from pipelines.tools.run_outcome import adhoc_tags, outcome_code, report_result, run_guarded
    from tasks.runtime.layout import RunLayout

    try:
        config, outputs = _prepare(args)
    except EvaluationInputError as exc:
        say(f"ccrs evaluate: {exc}", err=True)
        return 2
    started, started_at = time.perf_counter(), time.time()
    layout = RunLayout(config.resolved_run_dir())
    code, result = run_guarded("ccrs evaluate", layout,
                               lambda: run_evaluation(config, outputs, from_stage=args.from_stage,
                                                      run_tags=adhoc_tags(args), started_at=started_at))
    if result is None:
        return code
    report_result(result, layout, started)
    return outcome_code("ccrs evaluate", layout)


def _prepare(args: argparse.Namespace):
    from pipelines.evaluate import option_names, prepare_evaluation

    if not hasattr(args, "_prepared"):
        given = {name: getattr(args, name) for name in option_names() if hasattr(args, name)}
        args._prepared = prepare_evaluation(args.files or None, **given)
    return args._prepared
