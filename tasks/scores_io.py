"""The reduce stage's own files: long-format scores read from disk and stats.json written from the result
of `stats.analysis.compute_all` (stats/ itself reads and writes nothing). The tables/ and plots/ beside
stats.json are reporting (pipelines/reporting/report.py), outside the stage's code key."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from stats.errors import StatsInputError
from stats.scores import REPEAT_COLUMN, validate_scores
from tasks.layout import STATS_FILE


def read_scores_file(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise StatsInputError(f"scores file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".tsv"):
            # Read everything as text so that a non-numeric score is reported, not silently coerced.
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
    except (OSError, ValueError) as error:
        raise StatsInputError(f"cannot read scores file {path}: {error}") from error
    raise StatsInputError(f"scores file must be Parquet (.parquet), CSV (.csv) or JSONL (.jsonl), got "
                          f"{path.name}")


def load_scores(path: str | Path) -> pd.DataFrame:
    """Read long-format scores from Parquet or CSV and validate them (raises StatsInputError)."""
    return validate_scores(read_scores_file(path))


def concat_scores(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One long-format table of several suites' scores. When only some carry a repeat column (judged
    with judge.repeats), the others were judged once: their rows get repeat 0."""
    if any(REPEAT_COLUMN in frame.columns for frame in frames):
        frames = [frame if REPEAT_COLUMN in frame.columns else frame.assign(**{REPEAT_COLUMN: 0})
                  for frame in frames]
    return pd.concat(frames, ignore_index=True)


def write_stats(result: dict, out_dir: Path) -> Path:
    """stats.json in out_dir (created when missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats_path = out_dir / STATS_FILE
    stats_path.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return stats_path
