"""`ccrs run`: ingest -> chunk -> index -> retrieve -> generate -> judge -> reduce -> MLflow.

Every stage is content-keyed and resumable (tasks/stage.py): a rerun with the same config reuses finished
outputs, `--from-stage` recomputes from a stage on, and a failed stage leaves earlier outputs intact."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipelines.config import REPO_ROOT, STAGES, ConfigError, RunConfig, load_config


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--config", help="run config YAML (default: configs/cpu-demo.yaml)")
    parser.add_argument("--dataset", help="BioASQ JSON file/folder or rag-mini-bioasq folder")
    parser.add_argument("--limit", type=int, help="use only the first N questions")
    parser.add_argument("--run-dir", help="where stage outputs go (default: runs/<name>)")
    parser.add_argument("--judges", type=comma_list, help="comma-separated judge suites to run, replacing "
                        "the config's `judges` (see `ccrs metrics`), e.g. ccrs,grouse,vera,ragchecker")
    parser.add_argument("--from-stage", choices=STAGES, help="recompute this stage and all later ones")
    parser.add_argument("--llm-base-url", help="use this running OpenAI-compatible endpoint "
                        "(e.g. the RayService) instead of deploying the Serve app")
    add_judge_endpoint_arguments(parser)
    parser.add_argument("--experiment", help="MLflow experiment (default: the config's mlflow.experiment)")
    parser.add_argument("--keep-serving", action="store_true", help="leave the Serve app up after the run")
    parser.add_argument("--check-config", action="store_true", help="validate the config and exit")


def add_judge_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """--llm-base-url's counterpart for the judge alone (`ccrs run` and `ccrs evaluate`)."""
    parser.add_argument("--judge-base-url", help="the judge's own OpenAI-compatible /v1 endpoint, apart from "
                        "the readers' (key: $CCRS_JUDGE_API_KEY or the secrets file); sets judge.base_url")
    parser.add_argument("--judge-model", help="the judge model id at that endpoint; sets judge.model")


def judge_endpoint_overrides(args: argparse.Namespace) -> dict:
    overrides = {}
    if args.judge_base_url:
        overrides["judge.base_url"] = args.judge_base_url.rstrip("/")
    if args.judge_model:
        overrides["judge.model"] = args.judge_model
    if args.experiment:
        overrides["mlflow.experiment"] = args.experiment
    return overrides


def adhoc_tags(args: argparse.Namespace) -> dict[str, str]:
    """A run on a --limit of its dataset is ad hoc: never a `previous` baseline of the nightly gate."""
    return {"ccrs.adhoc": "true"} if args.limit is not None else {}


def console_log(args: argparse.Namespace) -> Path | None:
    """<run dir>/logs/console.log; none for --check-config or a config that does not load (main says why)."""
    from tasks.layout import RunLayout

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
    from tasks.layout import RunLayout

    started = time.perf_counter()
    layout = RunLayout(config.resolved_run_dir())
    code, result = run_guarded("ccrs run", layout,
                               lambda: run_pipeline(config, from_stage=args.from_stage,
                                                    keep_serving=args.keep_serving,
                                                    run_tags=adhoc_tags(args)))
    if result is None:
        return code
    report_result(result, layout, started)
    return 0


def run_guarded(command: str, layout, work) -> tuple[int, object | None]:
    """(0, result) of `work()`; an expected failure is one line and (1, None), a judge endpoint that cannot
    serve the config's scoring (2, None), a run the calibration gate stopped (`judge.preflight`, 6: its
    line); Ray is shut down either way."""
    from infra.console import say
    from infra.ray_runtime import shutdown_ray
    from judges.scoring import ScoringUnsupportedError
    from tasks.calibration import STOP_EXIT_CODE, JudgeCalibrationStop

    try:
        return 0, work()
    except ScoringUnsupportedError as exc:
        say(f"{command}: {exc}", err=True)
        return 2, None
    except JudgeCalibrationStop as exc:
        say(f"{command}: {exc}", err=True)
        say(f"the judge's unit-test results are in {layout.preflight_dir}; finished stages are kept in "
            f"{layout.root}", err=True)
        return STOP_EXIT_CODE, None
    except _expected_errors() as exc:
        say(f"{command}: {type(exc).__name__}: {exc}", err=True)
        say(f"finished stages are kept in {layout.root}; rerunning resumes from there", err=True)
        return 1, None
    finally:
        shutdown_ray()


def report_result(result, layout, started: float) -> None:
    """The verdict, where the outputs are, the MLflow links: the end of `ccrs run` and `ccrs evaluate`."""
    from infra.console import print_markdown, say

    say()
    print_markdown(layout.summary_md.read_text())
    say(f"\nfinished in {time.perf_counter() - started:.0f} s; outputs in {result.run_dir}")
    say(f"verdict: {result.summary_path} (again: ccrs show {result.run_dir})")
    from tasks.tracking import PER_SAMPLE_TABLE_ARTIFACT, run_url

    tracked = result.tracked
    say(f"MLflow run: {tracked['url']}")
    say("per-sample table (question, system, answer, chunks, scores, judge replies, failures): "
        + run_url(tracked["tracking_uri"], tracked["experiment_id"], tracked["run_id"],
                  PER_SAMPLE_TABLE_ARTIFACT))
    if not result.tracked["tracking_uri"].startswith("http"):
        say(f"browse it: mlflow ui --backend-store-uri {result.tracked['tracking_uri']} --host 127.0.0.1")


def print_cost_plan(config: RunConfig) -> None:
    """What the run will cost (`ccrs plan cost`), printed before a cluster run starts; a plan that cannot
    be made here (e.g. the dataset lives on the cluster only) is a note, never a reason not to run."""
    from infra.console import say
    from pipelines.tools.cost_plan import cost_plan, render

    try:
        say(render(cost_plan(config)) + "\n")
    except Exception as exc:  # noqa: BLE001 - the plan is advice; the run goes on without it
        say(f"ccrs run: no cost plan ({type(exc).__name__}: {exc}); see `ccrs plan cost`")


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Failures with a clear message of their own (data, index, LLM endpoint, MLflow, statistics)."""
    from judges.client import LLMRequestError
    from retrievers.schema import DatasetError
    from retrievers.types import IndexBackendError
    from stats.errors import StatsInputError
    from tasks.tracking import TrackingError

    return (DatasetError, IndexBackendError, LLMRequestError, StatsInputError, TrackingError, TimeoutError)


def comma_list(text: str) -> list[str]:
    """A comma-separated list option (`--judges ccrs,grouse`)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _overrides(args: argparse.Namespace) -> dict:
    overrides = {}
    if args.dataset:
        overrides["dataset.path"] = str(Path(args.dataset).resolve())
    if args.limit is not None:
        overrides["dataset.limit"] = args.limit
    if args.llm_base_url:
        overrides["serving"] = {"profile": "external", "base_url": args.llm_base_url}
    if args.judges:
        overrides["judges"] = args.judges
    if args.run_dir:
        overrides["run_dir"] = str(Path(args.run_dir).resolve())
    return {**overrides, **judge_endpoint_overrides(args)}


__all__ = ["add_arguments", "main", "RunConfig", "REPO_ROOT"]
