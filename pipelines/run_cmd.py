"""`ccrs run`: ingest -> chunk -> index -> retrieve -> generate -> judge -> reduce -> MLflow.

Every stage is content-keyed and resumable (tasks/runtime/stage.py): a rerun with the same config reuses
finished
outputs, `--from-stage` recomputes from a stage on, and a failed stage leaves earlier outputs intact."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipelines import options
from pipelines.config import REPO_ROOT, STAGES, ConfigError, RunConfig, load_config
from pipelines.tools.run_outcome import adhoc_tags, outcome_code, print_cost_plan, report_result, run_guarded


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    options.add_config(parser, name)
    options.add_dataset(parser, name)
    options.add_out(parser, name, aliases=("--run-dir",))
    options.add(parser, name, "--judges")
    options.add(parser, name, "--from-stage", choices=STAGES)
    options.add_endpoint(parser, command=name)
    options.add_judge(parser, command=name)
    options.add_extensions(parser, name)
    options.add_tracking(parser, command=name)
    parser.add_argument("--keep-serving", action="store_true", help="leave the Serve app up after the run")
    parser.add_argument("--check-config", action="store_true", help="validate the config and exit")


def console_log(args: argparse.Namespace) -> Path | None:
    """<run dir>/logs/console.log; none for --check-config or a config that does not load (main says why)."""
    from tasks.runtime.layout import RunLayout

    if args.check_config:
        return None
    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError:
        return None
    return RunLayout(config.resolved_run_dir()).console_log


def main(args: argparse.Namespace) -> int:
    from infra.console import say

    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        say(f"ccrs run: {exc}", err=True)
        return 2
    if args.check_config:
        endpoints = f" + {len(config.systems)} endpoint systems" if config.systems else ""
        say(f"config OK: {config.name} ({len(config.readers)} readers x "
            f"{len(config.retrieval.retrievers)} retrievers{endpoints}; judges {', '.join(config.judges)})")
        return 0
    if config.serving.profile == "cluster":
        print_cost_plan(config)
    from pipelines.pipeline import run_pipeline
    from tasks.runtime.layout import RunLayout

    started, started_at = time.perf_counter(), time.time()
    layout = RunLayout(config.resolved_run_dir())
    code, result = run_guarded("ccrs run", layout,
                               lambda: run_pipeline(config, from_stage=args.from_stage,
                                                    keep_serving=args.keep_serving,
                                                    run_tags=adhoc_tags(args), started_at=started_at))
    if result is None:
        return code
    report_result(result, layout, started)
    return outcome_code("ccrs run", layout)


def _overrides(args: argparse.Namespace) -> dict:
    return options.config_overrides(args, "run")


__all__ = ["add_arguments", "main", "RunConfig", "REPO_ROOT"]
