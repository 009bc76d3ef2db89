"""The normalized retrieval schema: pydantic rows for validation, Arrow schemas for the Parquet files."""
from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field


class DatasetError(ValueError):
    """Input that cannot be loaded; the message names the file and the row (or question) at fault."""


class Passage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(min_length=1)
    text: str
    title: str = ""
    metadata: str = "{}"  # JSON object as a string, so the Arrow column stays one flat type


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    answer: str | None = None
    exact_answer: str | None = None  # JSON string
    qtype: str | None = None
    relevant_doc_ids: list[str] = []
    relevant_pmids: list[str] = []


PASSAGES_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("text", pa.string()), ("title", pa.string()), ("metadata", pa.string())]
)
QUERIES_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("text", pa.string()),
        ("answer", pa.string()),
        ("exact_answer", pa.string()),
        ("qtype", pa.string()),
        ("relevant_doc_ids", pa.list_(pa.string())),
        ("relevant_pmids", pa.list_(pa.string())),
    ]
)
CHUNKS_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("text", pa.string()),
        ("start_char", pa.int32()),
        ("end_char", pa.int32()),
        ("n_tokens", pa.int32()),
    ]
)
RETRIEVED_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("retriever", pa.string()),
        ("rank", pa.int32()),
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("score", pa.float64()),
        ("text", pa.string()),
    ]
)
METRICS_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("retriever", pa.string()), ("measure", pa.string()), ("value", pa.float64())]
)


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def passages_table(passages: list[Passage]) -> pa.Table:
    return pa.Table.from_pylist([p.model_dump() for p in passages], schema=PASSAGES_SCHEMA)


def queries_table(queries: list[Query]) -> pa.Table:
    return pa.Table.from_pylist([q.model_dump() for q in queries], schema=QUERIES_SCHEMA)


def top_k_contexts(retrieved: pd.DataFrame, top_k: int) -> dict[tuple[str, str], pd.DataFrame]:
    ordered = retrieved.sort_values(["query_id", "retriever", "rank"])
    return {
        (str(qid), str(retriever)): group.head(top_k)
        for (qid, retriever), group in ordered.groupby(["query_id", "retriever"], sort=False)
    }
