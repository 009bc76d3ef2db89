"""`ccrs report RUN_DIR [--goals thesis|hybrid|FILE] [--out DIR] [--tracking-uri URI --run-id ID]`: the GQM
report, its goal tree printed (computed metrics apart from those not computable here)."""
from __future__ import annotations

import argparse
import json
import sys

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "report") -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (`ccrs run`, `ccrs evaluate`)")
    parser.add_argument("--goals", default=None, metavar="thesis|hybrid|FILE",
                        help="GQM goal tree: `thesis` (the thesis' metrics only, configs/gqm/thesis-goals"
                             ".yaml), `hybrid` (the default: every suite's metrics, configs/gqm/ccrs-hybrid-"
                             "goals.yaml) or a YAML file")
    options.add_out(parser, name, "gqm_report.json and the plots", shown="RUN_DIR/gqm")
    options.add(parser, name, "--tracking-uri")
    options.add_alias(parser, "--run-id", options.add(parser, name, "--run")[0])


def main(args: argparse.Namespace) -> int:
    from pipelines.tools.gqm_report import write_report
    from pipelines.reporting.gqm import GQMConfigError, log_to_mlflow, tree_lines

    if bool(args.tracking_uri) != bool(args.run):
        print("error: --tracking-uri and --run go together", file=sys.stderr)
        return 2
    try:
        report, files = write_report(args.run_dir, args.goals, args.out)
    except (GQMConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(tree_lines(report)))
    if report.get("question_types"):
        from pipelines.reporting.gqm_types import markdown

        print("overall by question type (the thesis' Table 5.1):\n" + markdown(report["question_types"]))
    for entry in report.get("not_applicable", []):
        print(f"not applicable to {entry['system']}: {', '.join(entry['metrics'])} ({entry['reason']})")
    if report["missing_metrics"]:
        print(f"metrics of the goal tree not in this run: {', '.join(report['missing_metrics'])}")
    if args.run:
        log_to_mlflow(report, files, args.tracking_uri, args.run)
        print(f"logged {len(files)} artifacts under gqm/ of MLflow run {args.run}")
    print(json.dumps({"written": [str(p) for p in files]}))
    return 0
