"""The functions behind `from ccrs_eval import ...`: thin doors onto pipelines/ (the same code as the CLI)."""
from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.evaluate import EvaluationInputError, EvaluationResult, evaluate

__all__ = ["evaluate", "compute_stats", "EvaluationResult", "StatsResult", "EvaluationInputError"]


@dataclass
class StatsResult:
    """`compute_stats`' answer: stats.json's content, the verdict (Markdown) and the folder holding
    stats.json, tables/, plots/ and summary.md."""

    stats: dict[str, Any]
    verdict: str
    out_dir: Path

    def means(self) -> pd.DataFrame:
        """Mean score per metric (rows) and system (columns)."""
        return pd.DataFrame({metric: block["means"] for metric, block in self.stats["per_metric"].items()}).T


def compute_stats(scores: pd.DataFrame | str | Path, *, scale: tuple[float, float] | None = None,
                  hypotheses: str | Path | None = None, b: int = 10_000, seed: int = 0, alpha: float = 0.05,
                  out: str | Path | None = None, labels: pd.DataFrame | str | Path | None = None,
                  label_scale: tuple[float, float] | None = None,
                  predicted_by: dict[str, str] | None = None,
                  out_dir: str | Path | None = None) -> StatsResult:
    """The statistics of `ccrs run` (randomized Tukey HSD, bootstrap CIs, discriminative power, Holm over
    hypotheses) for scores you already have: a DataFrame (or a Parquet/CSV/JSONL path), long (query_id,
    system, metric, score) or wide (query_id, system, one column per metric); `scale=(1, 5)` maps marks
    onto [0, 1]. Or a run folder, as `ccrs stats RUN_DIR`: its judge stages' scores and, without `labels`,
    its own labels/ (those an active design drew weighted by its record). `labels`: human labels (a
    DataFrame or a JSONL/CSV/Parquet path: question_id, system, metric, label[, annotator]) on
    `label_scale`, for the human-calibrated (PPI++) statistics in stats["per_metric"][M]["human_calibrated"];
    `predicted_by={"acceptable": "CC"}` for labels of a human metric of their own. `out`: the output folder,
    as `ccrs stats --out` (`out_dir` is its old name, one release, with a DeprecationWarning). Raises
    stats.errors.StatsInputError (one line) on bad scores, labels or a run folder's labeling design."""
    from pipelines.extensions import verdict_sections
    from pipelines.reporting.report import reduce_user_scores

    frame, contributed = _scores_and_labels(scores, labels, label_scale, predicted_by)
    if out_dir is not None:
        warnings.warn("compute_stats(out_dir=) is deprecated, use out= (the old name goes in the next "
                      "release)",
                      DeprecationWarning, stacklevel=2)
        out = out if out is not None else out_dir
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="ccrs-stats-"))
    title = Path(scores).name if isinstance(scores, (str, Path)) else "your scores"
    result, _, verdict = reduce_user_scores(frame, folder, scale=scale, hypotheses_path=hypotheses, b=b,
                                            seed=seed, alpha=alpha, title=title, sections=verdict_sections(),
                                            **contributed)
    return StatsResult(result, verdict, folder)


def _scores_and_labels(scores, labels, label_scale, predicted_by) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The scores and the statistics' label inputs: given labels checked (for a run folder they stand for
    its own, as `ccrs stats RUN_DIR --labels` takes them); a run folder's own read as `ccrs stats RUN_DIR`
    reads them (pipelines.stats_cmd.scores_and_inputs)."""
    import argparse

    from pipelines.stats_cmd import scores_and_inputs
    from stats.labels import validate_labels
    from tasks.reduce import read_scores_file, run_folder_scores
    from tasks.runtime.labels import read_labels_file

    run_dir = None if isinstance(scores, pd.DataFrame) or not Path(scores).is_dir() else Path(scores)
    if labels is None and run_dir is not None:
        return scores_and_inputs(argparse.Namespace(scores=run_dir))
    checked = None
    if labels is not None:
        table = labels if isinstance(labels, pd.DataFrame) else read_labels_file(labels)
        checked = validate_labels(table, label_scale, predicted_by)
    if run_dir is not None:
        return run_folder_scores(run_dir), {"labels": checked}
    return (scores if isinstance(scores, pd.DataFrame) else read_scores_file(scores)), {"labels": checked}
