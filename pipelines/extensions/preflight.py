"""The calibration gate (`judge.preflight`, tasks/calibration.py): before the judge stages the run's own
judge answers GroUSE unit tests in the `preflight` stage; below `min_pass_rate` with `on_fail: stop` the
run is logged to MLflow as stopped and JudgeCalibrationStop (exit 6) ends it before any judge-stage
request; with `warn` it goes on and the verdict opens with the warning."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from infra.console import say
from judges.config import PreflightOptions
from pipelines.extensions.registry import (
    ExtensionStage,
    MlflowPayload,
    PlannedCalls,
    RunExtension,
    StageContext,
    register_extension,
)
from pipelines.reporting.verdict import VerdictInputs, VerdictSection
from pipelines.resources import unit_tests_path
from tasks.runtime.layout import PREFLIGHT_STAGE, RunLayout

if TYPE_CHECKING:
    from pipelines.reporting.track import TrackContext
    from tasks.runtime.stops import RunStopped

# tasks.calibration is imported where it is used: loading a run config loads this declaration


def run_gate(context: StageContext) -> None:
    """The preflight stage, then the decision: said in one line, or the stop."""
    from pipelines.reporting.calibration import plot_matrix
    from tasks.calibration import JudgeCalibrationStop, planned_judge_calls, run_preflight

    config = context.config
    options = PREFLIGHT.block(config)
    preflight = context.run_with_judge(run_preflight, options, unit_tests_path(options.tests),
                                       draw=plot_matrix)
    say(preflight.measured())
    if preflight.status != "stop":
        say(preflight.line())
        return
    try:
        planned = planned_judge_calls(config.judges, *context.inputs, config.judge, config.client.seed,
                                      context.top_k)
    except Exception:  # noqa: BLE001 - the count is for the line; the stop stands without it
        planned = None
    line = preflight.line(planned)
    where = f"the judge's unit-test results are in {RunLayout(context.run_dir).preflight_dir}"
    raise JudgeCalibrationStop(line, _log_stopped(context, preflight, line), where)


def _log_stopped(context: StageContext, preflight, line: str) -> str | None:
    """The stopped run as a FAILED MLflow run with the pass rates and the preflight files (None where the
    tracking store fails: the line is said, the exit code stays the gate's)."""
    from pipelines.reporting.calibration import log_stopped_run

    config = context.config
    tags = {"ccrs.config_name": config.name, "ccrs.judge_model": config.judge.model, **context.run_tags}
    try:
        return log_stopped_run(config.mlflow.resolved_uri(Path.cwd()), config.mlflow.experiment,
                               config.mlflow.run_name or config.name, line, preflight, context.run_dir, tags)
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types for a failing store
        say(f"judge preflight: the stopped run is not in MLflow ({type(exc).__name__}: {exc})", err=True)
        return None


def planned(config) -> PlannedCalls:
    """Every call its unit tests can ask (the GroUSE requests of tasks.calibration.preflight_requests),
    replies at their budgets; paid once per judge model + prompt version, whatever the run's questions."""
    from tasks.calibration import load_preflight_tests, preflight_requests

    options = PREFLIGHT.block(config)
    requests = preflight_requests(load_preflight_tests(unit_tests_path(options.tests)), config.judge,
                                  config.client.seed)
    bound = " at most (its gates skip some)" if options.protocol == "pipeline" else ""
    note = (f"{PREFLIGHT_STAGE}: judge.preflight, {len(requests)} GroUSE calls{bound} "
            f"(protocol {options.protocol}); paid once per judge model + prompt version, later runs are "
            "answered by the judgment cache; replies counted at their budgets")
    return PlannedCalls(requests=tuple(requests), note=note)


def verdict_section(inputs: VerdictInputs) -> str:
    """The gate's outcome, a warning when it failed (the verdict's "Judge calibration")."""
    from pipelines.reporting.calibration import calibration_section
    from tasks.calibration import read_preflight

    if inputs.layout is None:
        return ""
    preflight = read_preflight(inputs.layout.root, (inputs.config.get("judge") or {}).get("preflight"))
    return calibration_section(preflight) if preflight is not None else ""


def log_to_mlflow(context: TrackContext, options: PreflightOptions) -> None:
    """The pass rates, the decision (tag ccrs.judge_calibration) and the stage's files."""
    from pipelines.reporting.calibration import log_preflight

    log_preflight(context.run_dir, options, context.tracking_uri, context.run_id)


def stopped_run() -> type[RunStopped]:
    """What a stop of the gate is: status judge_calibration, exit code 6 (tasks.calibration)."""
    from tasks.calibration import JudgeCalibrationStop

    return JudgeCalibrationStop


def tests_load(config) -> None:
    """The gate's unit tests load when the config does (a bad line is named then, not after hours of
    retrieval and generation)."""
    from tasks.calibration import load_preflight_tests

    load_preflight_tests(unit_tests_path(PREFLIGHT.block(config).tests))


PREFLIGHT = register_extension(RunExtension(
    name="preflight",
    description="the calibration gate: the run's judge on GroUSE unit tests before the judge stages",
    key="judge.preflight",
    model=PreflightOptions,
    validate=tests_load,
    stage=ExtensionStage("before_judge", run_gate, PREFLIGHT_STAGE, ("tasks.calibration",
                                                                       "pipelines.reporting.calibration")),
    plan=planned,
    verdict=(VerdictSection("header", verdict_section),),
    mlflow=MlflowPayload(log_to_mlflow, ("pipelines.reporting.calibration",)),
    stops=stopped_run,
    names=(r"judge\.preflight", r"\bpreflight\b", r"\bcalibration_gate\b", r"tasks\.calibration",
           r"\bJudgeCalibrationStop\b", r"\bSTOP_EXIT_CODE\b", r"\bjudge_calibration\b"),
    rank=10,
))
