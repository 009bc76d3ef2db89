"""`ccrs compare`: regression check of one pipeline run against a baseline run of the same experiment.

Per-query scores of both runs are paired on (query, system, metric); each system x metric difference is
tested with a paired randomization (sign-flip) test, Holm-adjusted over all cells. The run is tagged, a
summary artifact is written, and `--fail-on-regression` exits 3 on a significant drop. MLflow's log
records go to $CCRS_HOME/logs/compare-<UTC time>.log."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from infra.console import say

EXIT_REGRESSION = 3


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--run", default="latest", help="run id to check, or 'latest' (default)")
    parser.add_argument("--baseline", default="previous", help="baseline run id, or 'previous' (default)")
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI or ./mlflow.db")
    parser.add_argument("--experiment", default="ccrs-bioasq")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--b", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fail-on-regression", action="store_true")


def console_log(args: argparse.Namespace) -> Path:
    from pipelines.cli import home_log_file

    return home_log_file("compare")


def main(args: argparse.Namespace) -> int:
    from pipelines.config import MlflowConfig
    from pipelines.tools.regression import RegressionError, compare_runs

    uri = MlflowConfig(tracking_uri=args.tracking_uri).resolved_uri(Path.cwd())
    try:
        report = compare_runs(uri, args.experiment, args.run, args.baseline, args.alpha, args.b, args.seed)
    except RegressionError as exc:
        say(f"ccrs compare: {exc}", err=True)
        return 2
    say(report.markdown)
    say(json.dumps({"run": report.run_id, "baseline": report.baseline_id,
                    "regressions": report.n_regressions}))
    return EXIT_REGRESSION if args.fail_on_regression and report.n_regressions else 0
