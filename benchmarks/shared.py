"""What several benchmarks (and the tests) set up alike: the committed BioASQ sample's questions and the
per-document chunking path. A benchmark script imports it as `shared` (its own folder is on the path, as
for timing.py), a test as `benchmarks.shared`; it imports nothing of tests/ (tests/test_architecture.py)."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from retrievers.tokenization import Offsets

REPO = Path(__file__).resolve().parents[1]
BIOASQ_SAMPLE = REPO / "data" / "bioasq-sample" / "12B1_golden_sample.json"


def bioasq_questions(limit: int | None = None) -> list[dict]:
    """The sample's questions (the first `limit`), as the official JSON holds them."""
    questions = json.loads(BIOASQ_SAMPLE.read_text())["questions"]
    return questions[:limit] if limit else questions


def sample_field(value):
    """The sample stores nested fields as Python literals; parse them back."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def chunks_from_offsets(doc_ids: list[str], texts: list[str], offsets: list[Offsets], size: int,
                        overlap: int) -> pa.Table:
    """The all-offsets path, the reference for chunk_passages' shortcut (tests/retrievers/test_chunking.py)
    and bench_chunking.py's per-document loop: every passage cut into windows from its own token offsets."""
    import pyarrow as pa  # here: the sample's readers above need neither pyarrow nor the project

    from retrievers.chunking import chunk_id, chunk_spans
    from retrievers.schema import CHUNKS_SCHEMA

    rows = [{"chunk_id": chunk_id(doc_id, start, end), "doc_id": doc_id, "text": text[start:end],
             "start_char": start, "end_char": end, "n_tokens": n_tokens}
            for doc_id, text, doc_offsets in zip(doc_ids, texts, offsets)
            for start, end, n_tokens in chunk_spans(text, doc_offsets, size, overlap)]
    return pa.Table.from_pylist(rows, schema=CHUNKS_SCHEMA)
