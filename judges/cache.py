"""Judgment cache: Parquet part files mapping a unit's key to the judgment records it produced.

A unit's key (judges/suite.py `unit_key`) hashes everything that determines the judge's replies: model,
messages (every input), sampling parameters, response format, seed, prompt version and re-ask budget. Each
writer appends one new part file, so concurrent runs never rewrite each other's data. Only what the judge
actually produced is stored (scores, or invalid replies after every re-ask); a unit with a request
failure (server down) is not cached and is asked again on the next run.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from infra.process import ccrs_home

CACHE_COLUMNS = ["key", "suite", "records"]
PART_GLOB = "units-*.parquet"


def default_cache_dir() -> Path:
    return Path(os.environ.get("CCRS_JUDGE_CACHE") or ccrs_home() / "judge_cache")


class JudgmentCache:
    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._entries: dict[str, list[dict[str, Any]]] = {}
        self._new: list[dict[str, Any]] = []
        self._load()

    def _load(self) -> None:
        if not self.directory.exists():
            return
        for part in sorted(self.directory.glob(PART_GLOB)):
            columns = pd.read_parquet(part, columns=["key", "records"]).to_dict("list")
            for key, records in zip(*columns.values()):
                self._entries[key] = json.loads(records)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> list[dict[str, Any]] | None:
        return self._entries.get(key)

    def put(self, key: str, suite: str, records: list[dict[str, Any]]) -> None:
        self._entries[key] = records
        self._new.append({"key": key, "suite": suite, "records": json.dumps(records, default=str)})

    def flush(self) -> int:
        if not self._new:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".tmp-{uuid.uuid4().hex}.parquet"
        pd.DataFrame(self._new, columns=CACHE_COLUMNS).to_parquet(tmp, index=False)
        tmp.rename(self.directory / f"units-{uuid.uuid4().hex}.parquet")
        written = len(self._new)
        self._new = []
        return written
