"""`ccrs compare`: the nightly gate, a run checked against an accepted baseline run of the same experiment
(pipelines/tools/gate/, docs/nightly.md).

Per-query scores of both runs are paired on (query, system, metric); each system x metric difference is
tested with a paired randomization (sign-flip) test, Holm-adjusted over all cells; systems only one run
holds are named and left out. The run is tagged (`regression.status`, `regression.baseline`) and a summary
artifact is written, with the questions that moved most in each regressed cell (--show-moves N: in every
cell) as the MLflow table regression/moves.json. Exit codes (with
--fail-on-regression; without it, only a setup error is non-zero): 0 pass or first run (the baseline),
2 setup error, 3 regression, 4 failure rate above --max-failure-rate, 5 incomparable judge settings.
MLflow's log records go to $CCRS_HOME/logs/compare-<UTC time>.log."""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    options.add(parser, name, "--run")
    options.add_gate(parser, name)
    options.add_config(parser, name)
    options.add_tracking(parser, command=name)
    options.add_extensions(parser, name)
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit with the status' code (3 regression, 4 failure rate, 5 incomparable)")
    parser.add_argument("--accept", action="store_true", help="move the baseline on purpose: tag --run "
                        "regression.status=accepted (the next `previous` baseline), compare nothing")
    parser.add_argument("--name-baseline", metavar="NAME", help="tag --run ccrs.baseline=NAME (for "
                        "--baseline tag:NAME), compare nothing")


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import home_log_file

    return home_log_file("compare")


def main(args: argparse.Namespace) -> int:
    from pipelines.config import ConfigError, load_config
    from pipelines.tools.gate import gate
    from pipelines.tools.gate.alert import describe_gate, gate_options, notify_target, report_outcome
    from pipelines.tools.gate.decide import RegressionError
    from pipelines.tools.gate.fetch import mark_baseline

    try:
        config = load_config(args.config)
        uri = options.tracking_uri(args, config)
        experiment = args.experiment or config.mlflow.experiment
        notify_url = notify_target(args.notify)
        if args.accept or args.name_baseline:
            run_id = mark_baseline(uri, experiment, args.run, args.accept, args.name_baseline)
            say(f"run {run_id}: " + ", ".join(part for part in (
                "accepted as the baseline" if args.accept else "",
                f"tagged ccrs.baseline={args.name_baseline}" if args.name_baseline else "") if part))
            return 0
        report = gate(uri, experiment, args.run, args.baseline, gate_options(args, "compare"))
    except (RegressionError, ConfigError, ValueError) as exc:
        say(f"ccrs compare: {exc}", err=True)
        return 2
    describe_gate(uri, report, "ccrs compare")
    return report_outcome(report, notify_url, args.fail_on_regression)
