"""The GQM report (`gqm_goals`, pipelines/reporting/gqm.py): in the track step, the run's goal tree
aggregated into
track/gqm/ (gqm_report.json and its plots) and under gqm/ of the run's MLflow run. The goal tree is loaded
before any work, so that a broken one fails at once rather than after hours of judging."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.extensions.registry import MlflowPayload, RunExtension, register_extension

if TYPE_CHECKING:
    from pipelines.reporting.track import TrackContext

GQM_SUBDIR = "gqm"  # in the track stage's folder: track/gqm/


def check_goals(config) -> None:
    from pipelines.reporting.gqm import load_goals

    load_goals(config.gqm_goals)


def log_report(context: TrackContext, goals: str) -> None:
    """The report of the goal tree `goals` written into the track stage's folder, then logged under gqm/."""
    from pipelines.reporting.gqm import log_to_mlflow, write_report

    report, files = write_report(context.run_dir, goals, context.out_dir / GQM_SUBDIR)
    log_to_mlflow(report, files, context.tracking_uri, context.run_id)


register_extension(RunExtension(
    name="gqm",
    description="the GQM report of the run's goal tree, in the track step",
    key="gqm_goals",
    mlflow=MlflowPayload(log_report, ("pipelines.reporting.gqm",)),
    paths=("gqm_goals",),
    check=check_goals,
    names=(r"\bgqm_goals\b", r"\bgqm_report\b", r"\bGQM\b"),
    own=("pipelines/gqm_cmd.py", "pipelines/report_cmd.py"),
    rank=40,
))
