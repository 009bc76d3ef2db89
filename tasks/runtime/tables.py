"""A table file a stage or a command reads (scores, human labels): Parquet, CSV/TSV or JSONL, every failure
one StatsInputError that names the file."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from stats.errors import StatsInputError


def read_table(path: str | Path, what: str) -> pd.DataFrame:
    """The table in `path` (`what` it holds names it in the errors), unchecked."""
    path = Path(path)
    if not path.is_file():
        raise StatsInputError(f"{what} file not found: {path}")
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
        raise StatsInputError(f"cannot read {what} file {path}: {error}") from error
    raise StatsInputError(f"{what} file must be Parquet (.parquet), CSV (.csv) or JSONL (.jsonl), got "
                          f"{path.name}")
