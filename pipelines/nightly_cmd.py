"""`ccrs nightly`: one night of a regression series as one command with one exit code, the same on a cron
host and in a RayJob (docs/nightly.md).

The night: `ccrs run --config C` (or `ccrs evaluate FILE ...` of the team's own outputs with --outputs),
logged as its own MLflow run (tag ccrs.nightly), then the gate (`ccrs compare` against the latest accepted
run of the same series: `--series`, default the experiment), then an alert on every status but pass. A
crash is logged to MLflow as a FAILED run with its error and exits 1; a setup error exits 2 (logged too
when the tracking store answers).
Exit codes: pipelines/tools/gate/decide.py statuses()."""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from infra.console import say
from pipelines import options

NIGHTLY_TAGS = {"ccrs.nightly": "true"}
SERIES_RUN_DIR = "runs/nightly-{series}"  # a night of outputs' run folder: one per series, any file name


def add_arguments(parser: argparse.ArgumentParser, name: str = "nightly") -> None:
    options.add_config(parser, name)
    parser.add_argument("--outputs", nargs="+", type=Path, metavar="FILE", help="evaluate these outputs "
                        "files of your own systems (as `ccrs evaluate`) instead of running the pipeline")
    options.add_out(parser, name, aliases=("--run-dir",))
    options.add_endpoint(parser, command=name)
    options.add_tracking(parser, command=name)
    options.add_series(parser, name)
    options.add_judge(parser, command=name)
    options.add_extensions(parser, name)
    options.add_gate(parser, name)


def console_log(args: argparse.Namespace) -> Path | None:
    from tasks.runtime.layout import RunLayout

    try:
        config, _ = _prepare(args)
    except Exception:  # noqa: BLE001 - main reports it
        return None
    return RunLayout(config.resolved_run_dir()).console_log


def main(args: argparse.Namespace) -> int:
    from infra.ray_runtime import shutdown_ray

    try:
        return night(args)
    finally:
        shutdown_ray()


def night(args: argparse.Namespace) -> int:
    """The night, leaving the Ray it joined or started as it is (main shuts it down)."""
    from pipelines.tools.gate import gate
    from pipelines.tools.gate.alert import describe_gate, gate_options, notify_target, report_outcome
    from pipelines.tools.gate.decide import RegressionError, RegressionReport

    started, started_at = time.perf_counter(), time.time()
    try:
        notify_url = notify_target(args.notify)
        config, outputs = _prepare(args)
    except Exception as exc:  # noqa: BLE001 - any setup problem is exit 2, one line, and an alert
        return _failed_night("setup_error", f"{type(exc).__name__}: {exc}", args, None, _safe_notify(args))
    from tasks.runtime.stops import RunStopped

    try:
        result = _run_night(config, outputs, started_at, options.tracking_uri(args, config), args.baseline)
    except RunStopped as exc:  # a run extension stopped the run before judging: its status and exit code
        return _failed_night(exc.status, str(exc), args, config, notify_url, exc.run_id)
    except Exception as exc:  # noqa: BLE001 - a crash: logged as a FAILED run, alerted, exit 1
        status = "setup_error" if _is_setup_error(exc) else "crash"
        return _failed_night(status, f"{type(exc).__name__}: {exc}", args, config, notify_url)
    say(f"night finished in {time.perf_counter() - started:.0f} s; MLflow run {result.tracked['url']}")
    uri = options.tracking_uri(args, config)
    try:
        report = gate(uri, config.mlflow.experiment, result.tracked["run_id"], args.baseline,
                      gate_options(args, "nightly"))
    except RegressionError as exc:
        report = RegressionReport("setup_error", result.tracked["run_id"], None, None, 0, str(exc),
                                  experiment=config.mlflow.experiment)
    describe_gate(uri, report, "ccrs nightly")
    return report_outcome(report, notify_url)


def _prepare(args: argparse.Namespace):
    """(RunConfig, Outputs or None), checked before any work."""
    if not hasattr(args, "_prepared"):
        args._prepared = _config_and_outputs(args)
    return args._prepared


def _config_and_outputs(args: argparse.Namespace):
    from pipelines.config import load_config
    from pipelines.evaluate import option_names, prepare_evaluation
    from pipelines.extensions import outputs_named

    given = {name: getattr(args, name) for name in option_names() if hasattr(args, name)}
    if args.outputs or outputs_named(args, "nightly"):
        config, outputs = prepare_evaluation(args.outputs or None, **given)
        return (config if args.out else _in_series_folder(config)), outputs
    if args.system is not None:
        raise ValueError("--system names the system of --outputs; a config's systems are named by the config")
    return load_config(args.config, options.config_overrides(args, "nightly")), None


def _in_series_folder(config):
    """The night's run folder: the series' own (SERIES_RUN_DIR), whatever tonight's file is named (its stages
    are keyed by their inputs' content: other answers are judged again, the same ones reused)."""
    folder = re.sub(r"[^A-Za-z0-9._-]+", "-", config.mlflow.resolved_series()).strip("-.") or "series"
    return config.model_copy(update={"run_dir": SERIES_RUN_DIR.format(series=folder)})


def _run_night(config, outputs, started_at: float, tracking_uri: str, baseline: str = "previous"):
    from pipelines.pipeline import run_evaluation, run_pipeline

    against = _baseline(config, tracking_uri, baseline)
    if outputs is not None:
        return run_evaluation(config, outputs, run_tags=NIGHTLY_TAGS, started_at=started_at, baseline=against)
    return run_pipeline(config, run_tags=NIGHTLY_TAGS, started_at=started_at, baseline=against)


def _baseline(config, tracking_uri: str, baseline: str):
    """The baseline's scores (tasks.runtime.judge_loop.Baseline) where a run extension the night turns on
    reads them (e.g. to stop once every (system, metric) cell is settled against them), each saying so in a
    line; None where none does, or on the first night."""
    from pipelines.extensions import baseline_lines

    lines = baseline_lines(config)
    if not lines:
        return None
    from pipelines.tools.gate.fetch import baseline_scores

    found = baseline_scores(tracking_uri, config.mlflow.experiment, config.mlflow.resolved_series(),
                            config.name, baseline)
    for line in lines:
        say(line(found.run_id if found else None))
    return found


def _is_setup_error(exc: Exception) -> bool:
    from judges.scoring import ScoringUnsupportedError
    from pipelines.reporting.tracking import TrackingError

    return isinstance(exc, (ScoringUnsupportedError, TrackingError))


def _failed_night(status: str, error: str, args, config, notify_url: str | None,
                  logged_run: str | None = None) -> int:
    """One line on the terminal, a FAILED MLflow run holding the error (where the store answers; `logged_run`:
    the one the pipeline logged already, tagged here), the alert; the exit code of `status`."""
    from pipelines.tools.gate.alert import alert_payload, notify
    from pipelines.tools.gate.decide import RegressionReport
    from pipelines.tools.gate.fetch import SERIES_TAG
    from pipelines.reporting.tracking import log_failed_run

    say(f"ccrs nightly: {status}: {error}", err=True)
    run_id = ""
    try:
        experiment = config.mlflow.experiment if config else options.config_experiment(args)
        uri = options.tracking_uri(args, config)
        tags = {**NIGHTLY_TAGS, "regression.status": status,
                "ccrs.config_name": config.name if config else "unknown",
                **({SERIES_TAG: config.mlflow.resolved_series()} if config else {})}
        if logged_run:
            from mlflow.tracking import MlflowClient

            for name, value in tags.items():
                MlflowClient(uri).set_tag(logged_run, name, value)
            run_id = logged_run
        else:
            run_id = log_failed_run(tracking_uri=uri, experiment=experiment,
                                    run_name=f"{config.name if config else 'nightly'}-{status}", error=error,
                                    tags=tags, log_file=_console_log_file(config))
        say(f"logged as the FAILED MLflow run {run_id} (experiment {experiment})", err=True)
    except Exception as exc:  # noqa: BLE001 - a store that is down, or any other: the alert still goes out
        say(f"ccrs nightly: could not log the failure to MLflow ({type(exc).__name__}: {exc})", err=True)
        experiment = args.experiment or "unknown"
    report = RegressionReport(status, run_id, None, None, 0, error, experiment=experiment)
    if notify_url:
        say(notify(notify_url, alert_payload(report)), err=True)
    return report.exit_code


def _console_log_file(config) -> Path | None:
    from tasks.runtime.layout import RunLayout

    return RunLayout(config.resolved_run_dir()).console_log if config is not None else None


def _safe_notify(args: argparse.Namespace) -> str | None:
    from pipelines.tools.gate.alert import notify_target

    try:
        return notify_target(args.notify)
    except ValueError:
        return None
