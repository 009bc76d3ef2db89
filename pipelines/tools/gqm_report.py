"""`ccrs report`'s side of the GQM report: the thesis goal tree unless the user gives one. The report itself
(goal tree config, metric table, aggregation, plots, MLflow logging) is tasks/gqm_report.py, which the
track stage runs too."""
from __future__ import annotations

from pathlib import Path

from pipelines.config import RESOURCE_ROOT
from tasks import gqm_report

DEFAULT_GOALS = RESOURCE_ROOT / "configs" / "gqm" / "thesis-goals.yaml"


def write_report(run_dir: str | Path, goals: str | Path | None = None,
                 out_dir: str | Path | None = None) -> tuple[dict, list[Path]]:
    """The GQM report of a run directory under `goals` (default: the thesis goal tree)."""
    return gqm_report.write_report(run_dir, goals or DEFAULT_GOALS, out_dir)
