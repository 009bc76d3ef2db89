"""`ccrs metrics [--suite NAME] [--json]`: every registered judge metric (suite, name, scale, inputs,
prompt version, description), straight from the registry in judges/suite.py."""
from __future__ import annotations

import argparse
import json

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "metrics") -> None:
    parser.add_argument("--suite", action="append", default=None, help="only this suite (repeatable)")
    options.add(parser, name, "--json")


def metric_rows(suite_names: list[str] | None = None) -> list[dict]:
    from judges.config import JudgeConfig
    from judges.suite import all_metrics, get_suite

    default = JudgeConfig()
    return [{"suite": m.suite, "metric": m.name, "scale": f"{m.scale[0]:g}-{m.scale[1]:g}",
             "inputs": ", ".join(m.inputs) if m.judged else "(derived)",
             "prompt_version": get_suite(m.suite).prompt_version(default) if m.judged else "-",
             "templates": ", ".join(m.templates), "description": m.description}
            for m in all_metrics(suite_names)]


def main(args: argparse.Namespace) -> int:
    from judges.suite import suites

    unknown = [name for name in args.suite or [] if name not in suites()]
    if unknown:
        print(f"ccrs metrics: error: unknown suite(s) {unknown}; registered: {', '.join(suites())}")
        return 2
    rows = metric_rows(args.suite)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from tabulate import tabulate

    columns = ["suite", "metric", "scale", "inputs", "prompt_version", "description"]
    print(tabulate([[row[c] for c in columns] for row in rows], headers=columns))
    return 0
