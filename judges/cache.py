"""Judgment cache: Parquet part files mapping a unit's key to the judgment records it produced.

Keys are made by judges/caching.py (`CachingJudge`, the one place): everything a unit's judgments are
computed from, the endpoint's identity included. Each writer appends one new part file, so concurrent
runs never rewrite each other's data. Only what the judge actually produced is stored (scores, or invalid
replies after every re-ask); a unit with a request failure (server down) is not cached and is asked again
on the next run.
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from infra.process import ccrs_home

CACHE_COLUMNS = ["key", "suite", "records"]
PART_GLOB = "units-*.parquet"


def default_cache_dir() -> Path:
    return Path(os.environ.get("CCRS_JUDGE_CACHE") or ccrs_home() / "judge_cache")


class JudgmentCache:
    """Looked up a batch of keys at a time (`get_many`): only the parts' key column is scanned and only the
    matching records are read, so memory is bounded by a part, never by the cache. What `put` adds is
    visible to this instance until `flush` writes it as a new part (then to every reader)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._new: dict[str, dict[str, Any]] = {}

    def _parts(self) -> list[Path]:
        return sorted(self.directory.glob(PART_GLOB)) if self.directory.exists() else []

    def __len__(self) -> int:
        keys: set[str] = set(self._new)
        for part in self._parts():
            keys.update(pq.read_table(part, columns=["key"]).column("key").to_pylist())
        return len(keys)

    def get_many(self, keys: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        wanted = set(keys)
        found = {key: json.loads(self._new[key]["records"]) for key in wanted & self._new.keys()}
        wanted -= found.keys()
        for part in self._parts():
            if not wanted:
                break
            part_keys = pq.read_table(part, columns=["key"]).column("key")
            rows = pc.indices_nonzero(pc.is_in(part_keys, value_set=pa.array(sorted(wanted), pa.string())))
            if len(rows) == 0:
                continue
            table = pq.read_table(part, columns=["key", "records"]).take(rows)
            for key, records in zip(table.column("key").to_pylist(), table.column("records").to_pylist()):
                found[key] = json.loads(records)
            wanted -= found.keys()
        return found

    def get(self, key: str) -> list[dict[str, Any]] | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, suite: str, records: list[dict[str, Any]]) -> None:
        self._new[key] = {"key": key, "suite": suite, "records": json.dumps(records, default=str)}

    def flush(self) -> int:
        if not self._new:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".tmp-{uuid.uuid4().hex}.parquet"
        pd.DataFrame(list(self._new.values()), columns=CACHE_COLUMNS).to_parquet(tmp, index=False)
        tmp.rename(self.directory / f"units-{uuid.uuid4().hex}.parquet")
        written = len(self._new)
        self._new = {}
        return written
