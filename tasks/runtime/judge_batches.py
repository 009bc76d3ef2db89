"""The judge stage's bounded batches: whole questions planned, judged and written a batch at a time.

The driver never holds a whole run: one pass over the inputs sorts their rows into per-batch Parquet
files (whatever the input order), each batch is read, judged and written as one part, and the stage's
output files are the parts concatenated row group by row group. Everything lives in the stage's partial
folder (`run_dir/.<stage>.partial/<key>/b<samples>/`, removed by run_stage once the output is in place),
so a killed run skips its finished batches and resumes the current one from its checkpoint:

    inputs/{queries,retrieved,generations}-<batch>.parquet   the inputs, split once (`_DONE` when complete)
    checkpoint-<batch>.jsonl                                  units judged so far (StageCheckpoint)
    part-<batch>.parquet, part-<batch>.json                   a finished batch: judgments and its summary
"""
from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.runtime.layout import GENERATIONS_FILE, QUERIES_FILE, RETRIEVED_FILE
from tasks.runtime.stage import PARTIAL, StageCheckpoint

INPUT_FILES = {"queries": QUERIES_FILE, "retrieved": RETRIEVED_FILE, "generations": GENERATIONS_FILE}
READ_ROWS = 16_384  # rows per record batch when splitting the inputs (bounds the split's memory whatever N)
TOP_REASONS = 10  # failure reasons kept in a summary


def question_batches(generations: Path, samples_per_batch: int) -> list[list[str]]:
    """Question ids in order of first appearance, cut into batches of whole questions holding about
    `samples_per_batch` generated (question, system) rows (a question with more rows is a batch alone)."""
    ids = pq.read_table(generations, columns=["query_id"]).column("query_id").cast(pa.string()).to_pylist()
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for query_id, rows in Counter(ids).items():
        if current and size + rows > samples_per_batch:
            batches.append(current)
            current, size = [], 0
        current.append(query_id)
        size += rows
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class BatchStore:
    """The partial folder of one judge stage key and batch size."""

    root: Path

    @classmethod
    def of(cls, run_dir: Path, stage: str, key: str, samples_per_batch: int) -> BatchStore:
        return cls(Path(run_dir) / PARTIAL.format(name=stage) / key / f"b{samples_per_batch}")

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    def input_file(self, name: str, batch: int) -> Path:
        return self.inputs / f"{name}-{batch:05d}.parquet"

    def part(self, batch: int) -> Path:
        return self.root / f"part-{batch:05d}.parquet"

    def part_summary(self, batch: int) -> Path:
        return self.root / f"part-{batch:05d}.json"

    def checkpoint(self, batch: int) -> StageCheckpoint:
        return StageCheckpoint.at(self.root / f"checkpoint-{batch:05d}.jsonl")

    # --- splitting the inputs once
    def split_inputs(self, paths: dict[str, Path], batches: list[list[str]], top_k: int) -> None:
        """Each input's rows into its batch's file, streamed by record batch (rows of questions in no batch
        and retrieved chunks ranked below top_k are left out)."""
        done = self.inputs / "_DONE"
        if done.exists():
            return
        self.inputs.mkdir(parents=True, exist_ok=True)
        batch_of = {query_id: b for b, ids in enumerate(batches) for query_id in ids}
        for name, path in paths.items():
            keep_rank = top_k if name == "retrieved" else None
            _split(path, batch_of, len(batches), lambda b, n=name: self.input_file(n, b), keep_rank)
        done.write_text("")

    def read_inputs(self, batch: int) -> dict[str, pd.DataFrame]:
        return {name: pd.read_parquet(self.input_file(name, batch)) for name in INPUT_FILES}

    # --- finished batches
    def finished(self, batch: int) -> bool:
        return self.part(batch).exists() and self.part_summary(batch).exists()

    def write_part(self, batch: int, frame: pd.DataFrame, summary: dict[str, Any]) -> None:
        _atomic(self.part(batch), lambda tmp: frame.to_parquet(tmp, index=False))
        _atomic(self.part_summary(batch), lambda tmp: tmp.write_text(json.dumps(summary, default=str)))

    def read_summary(self, batch: int) -> dict[str, Any]:
        return json.loads(self.part_summary(batch).read_text())

    def parts(self, n_batches: int) -> list[Path]:
        return [self.part(b) for b in range(n_batches)]


def _split(path: Path, batch_of: dict[str, int], n_batches: int, target, keep_rank: int | None) -> None:
    source = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)  # streamed pages: no whole row group
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for records in source.iter_batches(batch_size=READ_ROWS):
            table = pa.Table.from_batches([records])
            if keep_rank is not None and "rank" in table.column_names:
                table = table.filter(pa.compute.less_equal(table["rank"], keep_rank))
            ids = table["query_id"].cast(pa.string()).to_pylist()
            numbers = pa.array([batch_of.get(query_id, -1) for query_id in ids], pa.int32())
            for b in set(numbers.to_pylist()) - {-1}:
                if b not in writers:
                    writers[b] = pq.ParquetWriter(target(b), table.schema)
                writers[b].write_table(table.filter(pa.compute.equal(numbers, b)))
    finally:
        for writer in writers.values():
            writer.close()
    empty = source.schema_arrow.empty_table()
    for b in set(range(n_batches)) - set(writers):  # a batch with no rows in this input still has a file
        pq.write_table(empty, target(b))


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


# --- the stage's output: the parts, concatenated ---------------------------------------------------------

def concatenate(parts: list[Path], outputs: dict[Path, Any]) -> dict[Path, int]:
    """The parts' rows into each output Parquet file in one pass, one part in memory at a time;
    `outputs`: {path: row picker or None}, where `rows(frame)` picks a file's rows (e.g. the scored ones).
    The schema is the parts' unified one (a column that is all null in one part takes the type it has in
    the others), so a file reads back as the parts' frames concatenated and written at once would. Returns
    the rows written to each file."""
    unified = pa.unify_schemas([pq.read_schema(part) for part in parts], promote_options="permissive")
    writers: dict[Path, pq.ParquetWriter] = {}
    written = dict.fromkeys(outputs, 0)
    try:
        for part in parts:
            frame = pd.read_parquet(part)
            for out, rows in outputs.items():
                picked = rows(frame) if rows is not None else frame
                table = pa.Table.from_pandas(picked, preserve_index=False)
                if out not in writers:
                    schema = pa.schema([unified.field(name) for name in table.column_names],
                                       metadata=table.schema.metadata)
                    writers[out] = pq.ParquetWriter(out, schema)
                writers[out].write_table(table.cast(writers[out].schema))
                written[out] += len(picked)
    finally:
        for writer in writers.values():
            writer.close()
    return written


def scored_rows(columns: list[str] | Callable[[pd.DataFrame], list[str]]):
    """Row picker for `concatenate`: the scored rows' `columns`, a list or a function of the part's frame
    (a failed judgment has no score row)."""
    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.loc[frame["score"].notna(), columns(frame) if callable(columns) else columns]
    return pick


# --- summaries -----------------------------------------------------------------------------------------

def merge_summaries(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The summaries of the batches as one: counts added (nested dicts too), lists joined, other values
    from the first batch that has one; failure reasons cut back to the most frequent."""
    merged: dict[str, Any] = {}
    for part in parts:
        _add_into(merged, part)
    if "failure_reasons" in merged:
        merged["failure_reasons"] = dict(Counter(merged["failure_reasons"]).most_common(TOP_REASONS))
    return merged


def _add_into(total: dict[str, Any], part: dict[str, Any]) -> None:
    for name, value in part.items():
        if name not in total or total[name] is None:
            total[name] = json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else value
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, (int, float)):
            total[name] += value
        elif isinstance(value, dict):
            _add_into(total[name], value)
        elif isinstance(value, list):
            total[name] = total[name] + value
