"""`ccrs probe`: judge bias probes. How far does each CCRS score move under a perturbation whose effect a
judge that follows its constructs would not show (or would show only where the construct says so)?

    ccrs probe --kind verbosity|order|injection [--kind ...] [--limit N] [--sentences K] [--tolerance T]
               [--templates T ...] [--placements P ...] [--metrics M ...] [--b B] [--seed S]
               [--llm-base-url URL] [--config YAML] [--out DIR] [--tracking-uri URI]

The test set is `ccrs injection-eval`'s (real BioASQ questions, their ideal answer as the response, their
gold snippets as the context) and so are the judge settings and the endpoint (the run config's, default
configs/cpu-demo.yaml, its Serve app started when not already up). Each question is judged clean and in
every variant of the asked kinds (judges/bias_probes.py); per kind, variant and metric the paired shift
probed - clean of the judge's mark (0-1) with its bootstrap CI, flagged where |shift| > --tolerance.
Prints that table; writes probe_judgments.parquet, probe_report.json/.csv, probe_shift.png and
console.log to --out; logs to MLflow (experiment ccrs-probes) when --tracking-uri is given.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines.injection_cmd import add_arguments as add_injection_arguments
from pipelines.injection_cmd import console_log, load_inputs, logged  # noqa: F401 - console_log: the CLI's log file


def add_arguments(parser: argparse.ArgumentParser, name: str = "probe") -> None:
    from judges.bias_probes import PROBES, ProbesConfig

    defaults = ProbesConfig()
    parser.add_argument("--kind", dest="kinds", action="extend", nargs="+", choices=list(PROBES),
                        required=True,
                        help="probe kinds, one or more (--kind verbosity order, or --kind repeated)")
    add_injection_arguments(parser, name)
    parser.set_defaults(out=Path("runs/probes"))
    parser.add_argument("--sentences", type=int, default=defaults.sentences,
                        help=f"verbosity: padding sentences per answer (default {defaults.sentences})")
    parser.add_argument("--tolerance", type=float, default=defaults.tolerance,
                        help=f"flag a shift with |shift| above this, 0-1 scale (default "
                        f"{defaults.tolerance})")
    parser.add_argument("--b", type=int, default=defaults.b,
                        help=f"bootstrap resamples per CI (default {defaults.b})")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="seed of the padding draw and of the bootstrap (default 0)")


def main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from judges.bias_probes import ProbesConfig

    try:
        probes = ProbesConfig(kinds=list(dict.fromkeys(args.kinds)), tolerance=args.tolerance,
                              sentences=args.sentences, templates=args.templates, placements=args.placements,
                              b=args.b, seed=args.seed)
    except ValidationError as exc:
        say(f"ccrs probe: error: {_first_error(exc)}", err=True)
        return 2
    loaded = load_inputs(args, "probe")
    if isinstance(loaded, int):
        return loaded
    config, samples = loaded
    try:
        result = _run(args, config, samples, probes)
    except TimeoutError as exc:
        say(f"ccrs probe: error: judge endpoint not ready: {exc}", err=True)
        return 1
    from tasks.bias_probes import probe_table, report_json

    for line in probe_table(report_json(result)):
        say(line)
    say("wrote " + ", ".join(str(p) for p in result.paths.values()))
    return _log(args, config, probes, result)


def _first_error(exc) -> str:
    error = exc.errors()[0]
    return f"--{'-'.join(str(part) for part in error['loc'])}: {error['msg']}"


def _run(args, config, samples, probes):
    from infra.serving import llm_endpoint
    from tasks.bias_probes import run_probes

    say(f"{len(samples)} questions, probes {', '.join(probes.kinds)}, metrics "
        f"{', '.join(config.judge.ccrs.metrics)}, judge {config.judge.model}", err=True)
    with llm_endpoint(config.serving) as base_url:  # an app found running is left alone
        return run_probes(samples, probes, config.judge, config.client, base_url, args.out,
                          dataset=str(args.dataset or config.dataset.path), progress=not args.no_progress)


def _log(args, config, probes, result) -> int:
    if not args.tracking_uri:
        return 0
    return logged("probe", args, lambda: _log_run(args, config, probes, result))


def _log_run(args, config, probes, result) -> str:
    import mlflow

    from pipelines.config import REPO_ROOT
    from tasks.bias_probes import EXPERIMENT, log_probes, report_json
    from tasks.tracking import git_commit, log_params_redacted, open_experiment

    open_experiment(args.tracking_uri, EXPERIMENT)
    report = result.report
    with mlflow.start_run(run_name=f"probe-{'-'.join(probes.kinds)}-{report.judge_model}") as run:
        mlflow.set_tags({"ccrs.kind": "probe", "judge_model": report.judge_model,
                         "git_commit": git_commit(REPO_ROOT)})
        log_params_redacted(mlflow, {"dataset": report.dataset, "n_questions": report.n_questions,
                                     "probes": probes.model_dump(mode="json"), "max_chunks": args.max_chunks,
                                     "judge": config.judge.model_dump(), "client": config.client.model_dump(),
                                     "llm_base_url": args.llm_base_url or config.serving.profile})
        log_probes(report_json(result), list(result.paths.values()), args.tracking_uri, run.info.run_id)
        return run.info.run_id
