"""`ccrs probe`: judge bias probes. How far does each CCRS score move under a perturbation whose effect a
judge that follows its constructs would not show (or would show only where the construct says so)?

    ccrs probe --kind verbosity|order|injection [--kind ...] [--limit N] [--sentences K] [--tolerance T]
               [--templates T ...] [--placements P ...] [--metrics M ...] [--b B] [--seed S]
               [--config YAML] [--llm-base-url URL] [--judge-base-url URL] [--judge-model NAME]
               [--out DIR] [--experiment NAME] [--tracking-uri URI] [--no-mlflow]

The test set: real BioASQ questions, their ideal answer as the response, their gold snippets as the context
(pipelines/tools/probe_set.py). Judge settings and endpoint are the run config's (default
configs/cpu-demo.yaml, fitted to the local CPU model: structured output, expected marks from batched
continuations; `--config configs/paper-bioasq.yaml` is the paper's CCRS judge; the settings in use are named
on the first line; the judge's own endpoint where it has one, else the Serve app, started when not
already up). Each question is judged clean and in every variant of the asked kinds (judges/bias_probes.py);
per kind, variant and metric the paired shift probed - clean of the judge's mark (0-1) with its bootstrap
CI, flagged where |shift| > --tolerance; with the injection kind also the injection detector's flag rates.
Prints that table; writes probe_judgments.parquet, probe_report.json/.csv, probe_shift.png and console.log
to --out; logs to MLflow (experiment ccrs-probes) unless --no-mlflow.

`ccrs injection-eval` is this command with `--kind injection`, kept one release as an alias.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines import options

ALIAS = "injection-eval"  # the former prompt-injection command: `ccrs probe --kind injection`
PAPER_CONFIG = "configs/paper-bioasq.yaml"


def add_arguments(parser: argparse.ArgumentParser, name: str = "probe") -> None:
    from judges.bias_probes import PROBES, ProbesConfig
    from judges.injection import PLACEMENTS, TEMPLATES
    from judges.suite import get_suite
    from tasks.bias_probes import EXPERIMENT

    defaults = ProbesConfig()
    alias = name == ALIAS
    parser.add_argument("--kind", dest="kinds", action="extend", nargs="+", choices=list(PROBES),
                        required=not alias, default=["injection"] if alias else None,
                        help="probe kinds, one or more (--kind verbosity order, or --kind repeated)")
    options.add_config(parser, name)
    options.add_dataset(parser, name)
    parser.add_argument("--templates", nargs="+", choices=sorted(TEMPLATES), default=list(TEMPLATES),
                        help="injection: templates (default: all)")
    parser.add_argument("--placements", nargs="+", choices=PLACEMENTS, default=list(PLACEMENTS),
                        help="injection: where the injection goes (default: both)")
    options.add(parser, name, "--metrics", choices=list(get_suite("ccrs").metrics))
    parser.add_argument("--max-chunks", type=int, default=5, help="gold snippets per question used as "
                        "context (default 5)")
    parser.add_argument("--sentences", type=int, default=defaults.sentences,
                        help=f"verbosity: padding sentences per answer (default {defaults.sentences})")
    parser.add_argument("--tolerance", type=float, default=defaults.tolerance,
                        help=f"flag a shift with |shift| above this, 0-1 scale (default "
                        f"{defaults.tolerance})")
    options.add_bootstrap(parser, name)
    options.add_endpoint(parser, command=name)
    options.add_judge(parser, command=name)
    options.add_out(parser, name, default=Path("runs/probes"))
    options.add_tracking(parser, EXPERIMENT, optional=True, command=name)
    options.add(parser, name, "--no-progress")


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import log_file_in

    return log_file_in(args.out)


def main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from judges.bias_probes import ProbesConfig

    command = _command(args)
    if command == ALIAS:
        say(f"ccrs {ALIAS} is now `ccrs probe --kind injection` (this alias goes in the next release)",
            err=True)
    try:
        probes = ProbesConfig(kinds=list(dict.fromkeys(args.kinds)), tolerance=args.tolerance,
                              sentences=args.sentences, templates=args.templates, placements=args.placements,
                              b=args.b, seed=args.seed)
    except ValidationError as exc:
        say(f"ccrs {command}: error: {_first_error(exc)}", err=True)
        return 2
    loaded = load_inputs(args, command)
    if isinstance(loaded, int):
        return loaded
    config, samples = loaded
    try:
        result = _run(args, config, samples, probes)
    except TimeoutError as exc:
        say(f"ccrs {command}: error: judge endpoint not ready: {exc}", err=True)
        return 1
    from pipelines.reporting.probes import probe_table
    from tasks.bias_probes import report_json

    for line in probe_table(report_json(result)):
        say(line)
    say("wrote " + ", ".join(str(p) for p in result.paths.values()))
    return 0 if args.no_mlflow else _log(args, command, config, probes, result)


def _command(args: argparse.Namespace) -> str:
    return getattr(args, "command", None) or "probe"


def _first_error(exc) -> str:
    error = exc.errors()[0]
    return f"--{'-'.join(str(part) for part in error['loc'])}: {error['msg']}"


def load_inputs(args: argparse.Namespace, command: str):
    """(run config, clean samples) of the arguments, or the exit code 2 after one line naming the problem."""
    from pipelines.config import ConfigError, load_config
    from pipelines.tools.probe_set import load_probe_samples

    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        say(f"ccrs {command}: {exc}", err=True)
        return 2
    try:
        samples = load_probe_samples(options.dataset_path(config.dataset.path), config.dataset.limit,
                                     args.max_chunks)
    except (OSError, ValueError) as exc:  # DatasetError is a ValueError
        say(f"ccrs {command}: error: {exc}", err=True)
        return 2
    if not samples:
        say(f"ccrs {command}: error: no question with an ideal answer selected", err=True)
        return 2
    return config, samples


def _overrides(args: argparse.Namespace) -> dict:
    overrides = options.config_overrides(args)
    if args.metrics:
        overrides["judge.ccrs.metrics"] = args.metrics
    return overrides


def _run(args, config, samples, probes):
    from pipelines.tools.endpoint import fitted_judge, judge_client, judge_endpoint
    from pipelines.reporting.probes import plot_probe_shifts
    from tasks.bias_probes import run_probes

    say(f"{len(samples)} questions, probes {', '.join(probes.kinds)}, metrics "
        f"{', '.join(config.judge.ccrs.metrics)}, judge {config.judge.model}; {settings_named(args, config)}",
        err=True)
    with judge_endpoint(config) as base_url:  # an app found running is left alone
        judge = fitted_judge(config, ["ccrs"], base_url)
        return run_probes(samples, probes, judge, judge_client(config), base_url, args.out,
                          dataset=config.dataset.path, progress=not args.no_progress, draw=plot_probe_shifts)


def settings_named(args, config) -> str:
    """The judge settings in use, named by their config, and the option that gives the paper's."""
    name = args.config or "configs/cpu-demo.yaml"
    judge = config.judge
    paper = "" if Path(name).name == Path(PAPER_CONFIG).name else f"; the paper's: --config {PAPER_CONFIG}"
    return (f"judge settings of {name} (CCRS prompts {judge.ccrs.prompt_version}, {judge.scoring} marks, "
            f"structured output {'on' if judge.structured_output else 'off'}){paper}")


def _log(args, command: str, config, probes, result) -> int:
    """The MLflow run; an unreachable store is a warning and exit 1, the results staying in --out."""
    from pipelines.reporting.tracking import TrackingError

    uri = options.tracking_uri(args, config)
    try:
        run_id = _log_run(args, uri, config, probes, result)
    except TrackingError as exc:
        say(f"ccrs {command}: warning: {exc}; results are kept in {args.out}", err=True)
        return 1
    say(f"MLflow run {run_id} ({uri})")
    return 0


def _log_run(args, uri: str, config, probes, result) -> str:
    import mlflow

    from pipelines.config import REPO_ROOT
    from pipelines.reporting.probes import log_probes
    from tasks.bias_probes import report_json
    from pipelines.reporting.tracking import git_commit, log_params_redacted, open_experiment

    open_experiment(uri, args.experiment)
    report = result.report
    with mlflow.start_run(run_name=f"probe-{'-'.join(probes.kinds)}-{report.judge_model}") as run:
        mlflow.set_tags({"ccrs.kind": "probe", "judge_model": report.judge_model,
                         "git_commit": git_commit(REPO_ROOT)})
        log_params_redacted(mlflow, {"dataset": report.dataset, "n_questions": report.n_questions,
                                     "probes": probes.model_dump(mode="json"), "max_chunks": args.max_chunks,
                                     "judge": config.judge.model_dump(), "client": config.client.model_dump(),
                                     "llm_base_url": args.llm_base_url or config.serving.profile})
        log_probes(report_json(result), list(result.paths.values()), uri, run.info.run_id)
        return run.info.run_id
