"""The label files: JSON lines appended durably (flushed and fsynced before the page is answered) and read
back whatever a killed server left; a JSON file written whole (a partial file renamed into place)."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pipelines.options import UsageError


def read_jsonl(path: Path, repair: bool = False) -> tuple[list[dict], int]:
    """(records, unfinished tail lines) of a JSON-lines file; a last line without its newline is a write
    the server was killed in, never answered: dropped from the file when `repair`, else left out."""
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a killed write may even end inside a UTF-8 character
    if len(complete) < len(data) and repair:
        with path.open("r+b") as handle:
            handle.truncate(len(complete))
    records = []
    for number, line in enumerate(complete.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path} line {number} is no JSON record: {exc}") from None
    return records, int(len(complete) < len(data))


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Appended, flushed and fsynced: on disk before the caller answers anyone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

