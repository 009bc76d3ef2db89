"""`ccrs show RUN_DIR|RUN_ID`: print a run's verdict again (the summary.md of `ccrs run`).

A run directory: its summary.md, or the verdict rebuilt from its files when the run predates summary.md.
An MLflow run id: the summary.md logged into that run (tracking URI from --tracking-uri,
$MLFLOW_TRACKING_URI or ./mlflow.db, as for `ccrs run`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "show") -> None:
    parser.add_argument("run", help="a run directory (e.g. runs/ccrs-cpu-demo) or an MLflow run id")
    options.add(parser, name, "--tracking-uri", "--markdown")


def console_log(args: argparse.Namespace) -> Path | None:
    """A run id is looked up through the MLflow client, whose log records belong in a file."""
    from infra.console import home_log_file

    return None if Path(args.run).is_dir() else home_log_file("show")


def main(args: argparse.Namespace) -> int:
    from infra.console import console_stream, print_markdown, say

    try:
        text = _summary_text(args.run, args.tracking_uri)
    except LookupError as exc:
        say(f"ccrs show: {exc}", err=True)
        return 2
    if args.markdown:
        console_stream().write(text)
        console_stream().flush()
    else:
        print_markdown(text)
    return 0


def _summary_text(run: str, tracking_uri: str | None) -> str:
    path = Path(run)
    if path.is_dir():
        return _from_run_dir(path)
    return _from_mlflow(run, tracking_uri)


def _from_run_dir(path: Path) -> str:
    from pipelines.extensions import verdict_sections
    from tasks.runtime.layout import RunLayout
    from pipelines.reporting.verdict import VerdictError, build_summary

    layout = RunLayout(path)
    if layout.summary_md.exists():
        return layout.summary_md.read_text()
    try:
        return build_summary(path, verdict_sections())
    except VerdictError as exc:
        raise LookupError(str(exc)) from exc


def _from_mlflow(run_id: str, tracking_uri: str | None) -> str:
    from pipelines.config import MlflowConfig
    from pipelines.reporting.tracking import SUMMARY_ARTIFACT, TrackingError, check_tracking_reachable

    uri = MlflowConfig(tracking_uri=tracking_uri).resolved_uri(Path.cwd())
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        raise LookupError(f"{run_id!r} is no run directory, and there is no MLflow store at {uri} to look "
                          "it up as a run id (give --tracking-uri)")
    try:
        check_tracking_reachable(uri)
        import mlflow

        return Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=SUMMARY_ARTIFACT,
                                                         tracking_uri=uri)).read_text()
    except TrackingError as exc:
        raise LookupError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types for a missing run or artifact
        raise LookupError(f"{run_id!r} is no run directory, and MLflow at {uri} has no run with that id "
                          f"holding {SUMMARY_ARTIFACT} ({type(exc).__name__}: {str(exc)[:200]})") from exc
