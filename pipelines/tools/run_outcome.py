"""How a run that `ccrs run` and `ccrs evaluate` started ends on the console: the cost plan before a cluster
run, the expected failures as one line and an exit code, the verdict and where the outputs are, and the
exit code of a run in which no judgment has a score."""
from __future__ import annotations

import argparse
import time

from pipelines.config import RunConfig


def adhoc_tags(args: argparse.Namespace) -> dict[str, str]:
    """A run on a --limit of its dataset is ad hoc: never a `previous` baseline of the nightly gate."""
    return {"ccrs.adhoc": "true"} if args.limit is not None else {}


def run_guarded(command: str, layout, work) -> tuple[int, object | None]:
    """(0, result) of `work()`; an expected failure is one line and (1, None), a judge endpoint that cannot
    serve the config's scoring (2, None), a run an extension stopped before judging (its exit code and
    line, tasks/runtime/stops.py); Ray is shut down either way."""
    from infra.console import say
    from infra.ray_runtime import shutdown_ray
    from judges.scoring import ScoringUnsupportedError
    from tasks.runtime.stops import RunStopped

    try:
        return 0, work()
    except ScoringUnsupportedError as exc:
        say(f"{command}: {exc}", err=True)
        return 2, None
    except RunStopped as exc:
        say(f"{command}: {exc}", err=True)
        say(f"{exc.where + '; ' if exc.where else ''}finished stages are kept in {layout.root}", err=True)
        return exc.exit_code, None
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
    from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT, run_url

    tracked = result.tracked
    say(f"MLflow run: {tracked['url']}")
    say("per-sample table (question, system, answer, chunks, scores, judge replies, failures): "
        + run_url(tracked["tracking_uri"], tracked["experiment_id"], tracked["run_id"],
                  PER_SAMPLE_TABLE_ARTIFACT))
    if not result.tracked["tracking_uri"].startswith("http"):
        say(f"browse it: mlflow ui --backend-store-uri {result.tracked['tracking_uri']} --host 127.0.0.1")


def outcome_code(command: str, layout) -> int:
    """0; for a run in which no judgment has a score (every one failed), whose verdict printed above is the
    failure table, the most common reasons and the judge's replies: one line and the nightly gate's
    failure-rate code (pipelines/tools/gate/decide.py STATUSES)."""
    from infra.console import say
    from pipelines.tools.gate.decide import STATUSES
    from pipelines.reporting.failures import unscored_run_line

    line = unscored_run_line(layout.root)
    if line is None:
        return 0
    say(f"{command}: {line}", err=True)
    return STATUSES["failure_rate"]


def print_cost_plan(config: RunConfig) -> None:
    """What the run will cost (`ccrs plan cost`), printed before a cluster run starts; a plan that cannot
    be made here (e.g. the dataset lives on the cluster only) is a note, never a reason not to run."""
    from infra.console import say
    from pipelines.tools.planning.cost import cost_plan
    from pipelines.tools.planning.cost_render import render

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
    from pipelines.reporting.tracking import TrackingError

    return (DatasetError, IndexBackendError, LLMRequestError, StatsInputError, TrackingError, TimeoutError)
