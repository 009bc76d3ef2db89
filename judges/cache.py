"""Judgment cache: Parquet files keyed by (model, prompt version, inputs, sampling params).

The key hashes the exact request (model, messages, which hold every input, temperature, max_tokens,
extra body such as response_format), the seed, the prompt version and the re-ask budget. Each writer
appends one new Parquet part file, so concurrent runs never rewrite each other's data. Only judgments
the judge actually produced are stored (a score, or an invalid reply after every re-ask); request
failures (server down) are not cached and are retried on the next run.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from judges.client import ChatRequest

CACHE_COLUMNS = ["key", "llm_score", "status", "reason", "raw", "attempts", "prompt_tokens", "completion_tokens"]


def default_cache_dir() -> Path:
    home = Path(os.environ.get("CCRS_HOME") or Path.home() / ".cache" / "ccrs")
    return Path(os.environ.get("CCRS_JUDGE_CACHE") or home / "judge_cache")


def judgment_key(request: ChatRequest, prompt_version: str, seed: int, max_reasks: int) -> str:
    payload = {
        "model": request.model,
        "messages": request.messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "extra": request.extra_body,
        "seed": seed,
        "prompt_version": prompt_version,
        "max_reasks": max_reasks,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class JudgmentCache:
    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._entries: dict[str, dict[str, Any]] = {}
        self._new: list[dict[str, Any]] = []
        self._load()

    def _load(self) -> None:
        if not self.directory.exists():
            return
        for part in sorted(self.directory.glob("part-*.parquet")):
            for record in pd.read_parquet(part).to_dict("records"):
                self._entries[record["key"]] = record

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._entries.get(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        entry = {column: record.get(column) for column in CACHE_COLUMNS}
        entry["key"] = key
        self._entries[key] = entry
        self._new.append(entry)

    def flush(self) -> int:
        if not self._new:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(self._new, columns=CACHE_COLUMNS)
        frame["llm_score"] = frame["llm_score"].astype("Int64")
        tmp = self.directory / f".tmp-{uuid.uuid4().hex}.parquet"
        frame.to_parquet(tmp, index=False)
        tmp.rename(self.directory / f"part-{uuid.uuid4().hex}.parquet")
        written = len(self._new)
        self._new = []
        return written
