"""The functions behind `from ccrs_eval import ...`: thin doors onto pipelines/ (the same code as the CLI)."""
from __future__ import annotations

import tempfile
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
                  out_dir: str | Path | None = None) -> StatsResult:
    """The statistics of `ccrs run` (randomized Tukey HSD, bootstrap CIs, discriminative power, Holm over
    hypotheses) for scores you already have: a DataFrame (or a Parquet/CSV/JSONL path), long (query_id,
    system, metric, score) or wide (query_id, system, one column per metric); `scale=(1, 5)` maps marks
    onto [0, 1]. Raises stats.errors.StatsInputError (one line) on bad scores."""
    from pipelines.extensions import verdict_sections
    from pipelines.reporting.report import reduce_user_scores
    from tasks.reduce import read_scores_file

    frame = scores if isinstance(scores, pd.DataFrame) else read_scores_file(scores)
    folder = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="ccrs-stats-"))
    title = Path(scores).name if isinstance(scores, (str, Path)) else "your scores"
    result, _, verdict = reduce_user_scores(frame, folder, scale=scale, hypotheses_path=hypotheses, b=b,
                                            seed=seed, alpha=alpha, title=title, sections=verdict_sections())
    return StatsResult(result, verdict, folder)
