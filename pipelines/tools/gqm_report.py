"""`ccrs report`'s side of the GQM report: the goal tree by name (`thesis`, `hybrid`) or a YAML file of the
user's, the hybrid tree by default. The report itself (goal tree config, metric table, aggregation, plots,
MLflow logging) is pipelines/reporting/gqm.py, which the track stage runs too."""
from __future__ import annotations

from pathlib import Path

from pipelines.config import RESOURCE_ROOT
from pipelines.reporting import gqm as gqm_report

GOAL_TREES = {  # name -> file: the thesis' own metrics only, and the project's hybrid of every suite
    "thesis": RESOURCE_ROOT / "configs" / "gqm" / "thesis-goals.yaml",
    "hybrid": RESOURCE_ROOT / "configs" / "gqm" / "ccrs-hybrid-goals.yaml",
}
DEFAULT_GOALS = GOAL_TREES["hybrid"]


def goals_path(goals: str | Path | None) -> Path:
    """A goal tree's file: a name of GOAL_TREES, else the path given; None: the default (hybrid) tree."""
    if goals is None:
        return DEFAULT_GOALS
    if str(goals) in GOAL_TREES:
        return GOAL_TREES[str(goals)]
    path = Path(goals)
    if not path.exists() and path.suffix not in (".yaml", ".yml"):
        raise gqm_report.GQMConfigError(f"unknown goal tree {str(goals)!r}: one of {sorted(GOAL_TREES)} or a "
                                        "YAML file")
    return path


def write_report(run_dir: str | Path, goals: str | Path | None = None,
                 out_dir: str | Path | None = None) -> tuple[dict, list[Path]]:
    """The GQM report of a run directory under `goals` (a GOAL_TREES name or a file; default hybrid)."""
    return gqm_report.write_report(run_dir, goals_path(goals), out_dir)
