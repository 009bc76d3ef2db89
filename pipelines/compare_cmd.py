"""`ccrs compare`: the nightly gate, a run checked against an accepted baseline run of the same experiment
(pipelines/tools/regression.py, docs/nightly.md).

Per-query scores of both runs are paired on (query, system, metric); each system x metric difference is
tested with a paired randomization (sign-flip) test, Holm-adjusted over all cells. The run is tagged
(`regression.status`, `regression.baseline`) and a summary artifact is written. Exit codes (with
--fail-on-regression; without it, only a setup error is non-zero): 0 pass or first run (the baseline),
2 setup error, 3 regression, 4 failure rate above --max-failure-rate, 5 incomparable judge settings.
MLflow's log records go to $CCRS_HOME/logs/compare-<UTC time>.log."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from infra.console import say


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--run", default="latest", help="run id to check, or 'latest' (default)")
    add_gate_arguments(parser)
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI or ./mlflow.db")
    parser.add_argument("--config", help="run config whose mlflow.experiment is compared (default: "
                        "configs/cpu-demo.yaml)")
    parser.add_argument("--experiment", help="MLflow experiment (default: the config's mlflow.experiment)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit with the status' code (3 regression, 4 failure rate, 5 incomparable)")
    parser.add_argument("--accept", action="store_true", help="move the baseline on purpose: tag --run "
                        "regression.status=accepted (the next `previous` baseline), compare nothing")
    parser.add_argument("--name-baseline", metavar="NAME", help="tag --run ccrs.baseline=NAME (for "
                        "--baseline tag:NAME), compare nothing")


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """The gate's options, shared by `ccrs compare` and `ccrs nightly`."""
    parser.add_argument("--baseline", default="previous", help="previous (default: the latest accepted "
                        "earlier run of the same config, not ad hoc), a run id, or tag:NAME")
    parser.add_argument("--max-failure-rate", type=float, default=0.05, help="failed judgments above this "
                        "share of the run's judgments: status failure_rate, exit 4 (default 0.05)")
    parser.add_argument("--allow-judge-change", action="store_true", help="compare even when the baseline "
                        "was judged with another judge model, prompt version, scoring or metric set")
    parser.add_argument("--notify", metavar="URL", help="POST a JSON alert (Slack-compatible `text` and the "
                        "outcome table) on every status but pass; env:NAME reads the URL from that "
                        "variable (the secrets file), e.g. env:CCRS_NOTIFY_URL")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--b", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import home_log_file

    return home_log_file("compare")


def main(args: argparse.Namespace) -> int:
    from pipelines.config import ConfigError, MlflowConfig
    from pipelines.tools.regression import RegressionError, gate, mark_baseline

    uri = MlflowConfig(tracking_uri=args.tracking_uri).resolved_uri(Path.cwd())
    try:
        experiment = args.experiment or experiment_of(args.config)
        notify_url = notify_target(args.notify)
        if args.accept or args.name_baseline:
            run_id = mark_baseline(uri, experiment, args.run, args.accept, args.name_baseline)
            say(f"run {run_id}: " + ", ".join(part for part in (
                "accepted as the baseline" if args.accept else "",
                f"tagged ccrs.baseline={args.name_baseline}" if args.name_baseline else "") if part))
            return 0
        report = gate(uri, experiment, args.run, args.baseline, gate_options(args))
    except (RegressionError, ConfigError, ValueError) as exc:
        say(f"ccrs compare: {exc}", err=True)
        return 2
    return report_outcome(report, notify_url, args.fail_on_regression)


def gate_options(args: argparse.Namespace):
    from pipelines.tools.regression import GateOptions

    return GateOptions(alpha=args.alpha, b=args.b, seed=args.seed, max_failure_rate=args.max_failure_rate,
                       allow_judge_change=args.allow_judge_change)


def report_outcome(report, notify_url: str | None, fail: bool = True) -> int:
    """The gate's outcome on the console (and as one JSON line), the alert, and the exit code."""
    from pipelines.tools.regression import alert_payload, notify

    say(report.markdown)
    say(json.dumps({"status": report.status, "run": report.run_id, "baseline": report.baseline_id,
                    "regressions": report.n_regressions, "failure_rate": round(report.failure_rate, 4),
                    "exit_code": report.exit_code}))
    if notify_url and report.status != "pass":
        say(notify(notify_url, alert_payload(report)), err=True)
    return report.exit_code if fail else 0


def experiment_of(config: str | None) -> str:
    from pipelines.config import load_config

    return load_config(config).mlflow.experiment


def notify_target(value: str | None) -> str | None:
    """--notify URL, or env:NAME for a URL kept in the environment / secrets file (never printed)."""
    if not value or not value.startswith("env:"):
        return value
    name = value.removeprefix("env:")
    if not os.environ.get(name):
        raise ValueError(f"--notify {value}: the variable {name} is not set (secrets file or environment)")
    return os.environ[name]
