"""`ccrs report RUN_DIR [--goals FILE] [--out DIR] [--tracking-uri URI --run-id ID]`: the GQM report."""
from __future__ import annotations

import argparse
import json
import sys

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "report") -> None:
    parser.add_argument("run_dir", help="run directory written by `ccrs run`")
    parser.add_argument("--goals", default=None,
                        help="GQM goal tree YAML (default configs/gqm/thesis-goals.yaml)")
    options.add_out(parser, None, "gqm_report.json and the plots", inside_run="RUN_DIR/gqm")
    parser.add_argument("--tracking-uri", metavar="URI", default=None, help="MLflow tracking URI (with "
                        "--run-id)")
    parser.add_argument("--run-id", default=None, help="MLflow run to log gqm/ artifacts and metrics into")


def main(args: argparse.Namespace) -> int:
    from pipelines.tools.gqm_report import write_report
    from tasks.gqm_report import GQMConfigError, log_to_mlflow

    if bool(args.tracking_uri) != bool(args.run_id):
        print("error: --tracking-uri and --run-id go together", file=sys.stderr)
        return 2
    try:
        report, files = write_report(args.run_dir, args.goals, args.out)
    except (GQMConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for system in report["systems_order"]:
        entry = report["systems"][system]["all"]
        overall = entry["overall"]
        shown = f"{overall['score']:.3f}" if overall["score"] is not None else f"n/a ({overall['reason']})"
        print(f"{system}: overall {shown}")
        for goal in entry["goals"]:
            value = f"{goal['score']:.3f}" if goal["score"] is not None else f"n/a ({goal['reason']})"
            print(f"  {goal['id']}: {value} (coverage {goal['coverage']:.2f})")
    for entry in report.get("not_applicable", []):
        print(f"not applicable to {entry['system']}: {', '.join(entry['metrics'])} ({entry['reason']})")
    if report["missing_metrics"]:
        print(f"metrics of the goal tree not in this run: {', '.join(report['missing_metrics'])}")
    if args.run_id:
        log_to_mlflow(report, files, args.tracking_uri, args.run_id)
        print(f"logged {len(files)} artifacts under gqm/ of MLflow run {args.run_id}")
    print(json.dumps({"written": [str(p) for p in files]}))
    return 0
