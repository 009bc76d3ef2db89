"""`ccrs injection-eval`: how much do injected instructions move each CCRS score?

    ccrs injection-eval [--limit N] [--templates T ...] [--placements P ...] [--metrics M ...]
                        [--llm-base-url URL] [--config YAML] [--out DIR] [--tracking-uri URI]

Real BioASQ questions with their ideal answer as the response and their gold snippets as the context are
judged clean and with each injection template in the response or in the top-ranked chunk. Judge and
client settings come from the run config (default configs/cpu-demo.yaml); without --llm-base-url the
config's Serve app is used (started here when it is not already up, and removed again afterwards). Prints
the mean shift per variant and metric; writes the judgments, report (JSON, CSV), a plot and console.log
(the log records of Ray, Serve, vLLM and the HTTP client) to --out; logs to MLflow when --tracking-uri is
given.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines.config import RESOURCE_ROOT, ConfigError, load_config


def add_arguments(parser: argparse.ArgumentParser, name: str = "injection-eval") -> None:
    from judges.injection import PLACEMENTS, TEMPLATES
    from judges.scoring import SCORINGS
    from judges.suite import get_suite

    parser.add_argument("--config",
                        help="run config YAML for judge/client/serving (default configs/cpu-demo.yaml)")
    parser.add_argument("--dataset",
                        help="BioASQ JSON file/folder or rag-mini-bioasq folder (default: the config's)")
    parser.add_argument("--limit", type=int, help="first N questions (default: the config's dataset.limit)")
    parser.add_argument("--templates", nargs="+", choices=sorted(TEMPLATES), default=list(TEMPLATES),
                        help="injection templates (default: all)")
    parser.add_argument("--placements", nargs="+", choices=PLACEMENTS, default=list(PLACEMENTS),
                        help="where the injection goes (default: both)")
    parser.add_argument("--metrics", nargs="+", choices=list(get_suite("ccrs").metrics),
                        help="CCRS metrics (default: the config's)")
    parser.add_argument("--scoring", choices=SCORINGS, help="integer marks or expected (probability-"
                        "weighted) marks (default: the config's judge.scoring)")
    parser.add_argument("--max-chunks", type=int, default=5,
                        help="gold snippets per question used as context")
    parser.add_argument("--llm-base-url",
                        help="use this running OpenAI-compatible endpoint instead of the Serve app")
    parser.add_argument("--out", type=Path, default=Path("runs/injection"), help="output folder")
    parser.add_argument("--tracking-uri",
                        help="log the report to this MLflow tracking URI (default: no logging)")
    parser.add_argument("--no-progress", action="store_true")


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import log_file_in

    return log_file_in(args.out)


def main(args: argparse.Namespace) -> int:
    loaded = load_inputs(args, "injection-eval")
    if isinstance(loaded, int):
        return loaded
    config, samples = loaded
    try:
        result = _run(args, config, samples)
    except TimeoutError as exc:
        say(f"ccrs injection-eval: error: judge endpoint not ready: {exc}", err=True)
        return 1
    print_report(result.report)
    say("wrote " + ", ".join(str(p) for p in result.paths.values()))
    return _log(args, config, result)


def load_inputs(args: argparse.Namespace, command: str):
    """(run config, clean samples) of the arguments, or the exit code 2 after one line naming the problem
    (shared with `ccrs probe`)."""
    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        say(f"ccrs {command}: {exc}", err=True)
        return 2
    try:
        samples = _samples(args, config)
    except (OSError, ValueError) as exc:  # DatasetError is a ValueError
        say(f"ccrs {command}: error: {exc}", err=True)
        return 2
    if not samples:
        say(f"ccrs {command}: error: no question with an ideal answer selected", err=True)
        return 2
    return config, samples


def _overrides(args: argparse.Namespace) -> dict:
    overrides: dict = {}
    if args.llm_base_url:
        overrides["serving"] = {"profile": "external", "base_url": args.llm_base_url}
    if args.metrics:
        overrides["judge.ccrs.metrics"] = args.metrics
    if args.scoring:
        overrides["judge.scoring"] = args.scoring
    return overrides


def dataset_path(value: str) -> Path:
    """A relative path is read from the working directory when it exists there, else from the repository."""
    path = Path(value)
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (RESOURCE_ROOT / path).resolve()


def _samples(args, config):
    from pipelines.tools.injection_eval import load_injection_samples

    limit = args.limit if args.limit is not None else config.dataset.limit
    return load_injection_samples(dataset_path(args.dataset or config.dataset.path), limit, args.max_chunks)


def _run(args, config, samples):
    from infra.serving import llm_endpoint
    from pipelines.tools.injection_eval import run_injection_eval

    say(f"{len(samples)} questions x (1 clean + {len(args.templates)} templates x {len(args.placements)} "
        f"placements) x {len(config.judge.ccrs.metrics)} metrics, judge {config.judge.model}", err=True)
    with llm_endpoint(config.serving) as base_url:  # an app found running is left alone
        return run_injection_eval(samples, args.templates, args.placements, config.judge, config.client,
                                  base_url, args.out, dataset=str(args.dataset or config.dataset.path),
                                  progress=not args.no_progress)


def print_report(report) -> None:
    """Rows: variants; columns: mean paired shift per metric on the judge's 0-100 scale ('.' where the
    metric does not read the injected input); `flagged`: share of injected texts the detector flags."""
    cells = {(c.template, c.placement, c.metric): c for c in report.cells}
    flags = {(d.template, d.placement): d.flag_rate for d in report.detector_injected}
    say(f"judge {report.judge_model}, {report.n_questions} questions, {report.judgments} judgments "
          f"{report.status_counts}; mean shift injected - clean (judge 0-100), paired")
    say(f"{'variant':28s}" + "".join(f"{m:>8s}" for m in report.metrics) + f"{'flagged':>9s}")
    clean = report.detector_clean
    say(f"{'clean (mean score)':28s}"
          + "".join(_fmt(report.mean_clean_by_metric[m], sign=False) for m in report.metrics)
          + _pct(clean["response_flag_rate"]))
    for template in report.templates:
        for placement in report.placements:
            row = [cells[(template, placement, m)] for m in report.metrics]
            shifts = "".join(_fmt(c.mean_shift) if c.reaches_judge else f"{'.':>8s}" for c in row)
            say(f"{template + '@' + placement:28s}{shifts}{_pct(flags.get((template, placement)))}")
    say(f"{'all injections (pooled)':28s}"
          + "".join(_fmt(report.mean_shift_by_metric[m]) for m in report.metrics))
    say(f"detector on clean text: {clean['responses_flagged']}/{clean['responses']} responses, "
          f"{clean['chunks_flagged']}/{clean['chunks']} chunks flagged")


def _fmt(value: float | None, sign: bool = True) -> str:
    if value is None:
        return f"{'n/a':>8s}"
    return f"{value:+8.1f}" if sign else f"{value:8.1f}"


def _pct(value: float | None) -> str:
    return f"{'n/a':>9s}" if value is None else f"{100 * value:8.0f}%"


def _log(args, config, result) -> int:
    if not args.tracking_uri:
        return 0
    from pipelines.tools.injection_eval import log_injection_eval

    params = {"dataset": str(args.dataset or config.dataset.path), "n_questions": result.report.n_questions,
              "templates": args.templates, "placements": args.placements, "max_chunks": args.max_chunks,
              "judge": config.judge.model_dump(), "client": config.client.model_dump(),
              "llm_base_url": args.llm_base_url or config.serving.profile}
    return logged("injection-eval", args, lambda: log_injection_eval(result, args.tracking_uri, params))


def logged(command: str, args: argparse.Namespace, log) -> int:
    """`log()` (returns the MLflow run id) and its line; an unreachable store is a warning and exit 1, the
    results staying in --out (shared with `ccrs probe`)."""
    from tasks.tracking import TrackingError

    try:
        run_id = log()
    except TrackingError as exc:
        say(f"ccrs {command}: warning: {exc}; results are kept in {args.out}", err=True)
        return 1
    say(f"MLflow run {run_id} ({args.tracking_uri})")
    return 0
