"""Token-window chunking (paper: 300 tokens, 60 overlap) that keeps each chunk's character span.

A chunk is `text[start_char:end_char]` of its passage, with the span taken from the tokenizer's offsets
(trimmed of surrounding whitespace), and its id is a hash of (doc_id, span): rerunning on the same input
gives the same ids.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pyarrow as pa

from retrievers.schema import CHUNKS_SCHEMA
from retrievers.tokenization import Offsets, OffsetTokenizer


def chunk_id(doc_id: str, start_char: int, end_char: int) -> str:
    return hashlib.sha1(f"{doc_id}\x1f{start_char}\x1f{end_char}".encode()).hexdigest()[:20]


def token_windows(n_tokens: int, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    """[start, end) token windows of `size` tokens, consecutive windows sharing `overlap` tokens."""
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be smaller than size ({size})")
    stride = size - overlap
    start = 0
    while start < n_tokens:
        end = min(start + size, n_tokens)
        yield start, end
        if end == n_tokens:
            return
        start += stride


def _trimmed_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def chunk_spans(text: str, offsets: Offsets, size: int, overlap: int) -> list[tuple[int, int, int]]:
    """(start_char, end_char, n_tokens) per window; windows that are only whitespace are dropped."""
    spans = []
    for first, last in token_windows(len(offsets), size, overlap):
        start, end = _trimmed_span(text, offsets[first][0], offsets[last - 1][1])
        if end > start:
            spans.append((start, end, last - first))
    return spans


def _append_chunks(
    columns: dict[str, list], doc_id: str, text: str, spans: list[tuple[int, int, int]]
) -> None:
    for start, end, n_tokens in spans:
        columns["chunk_id"].append(chunk_id(doc_id, start, end))
        columns["doc_id"].append(doc_id)
        columns["text"].append(text[start:end])
        columns["start_char"].append(start)
        columns["end_char"].append(end)
        columns["n_tokens"].append(n_tokens)


def chunk_passages(passages: pa.Table, tokenizer: OffsetTokenizer, size: int, overlap: int) -> pa.Table:
    """Chunks of a batch of passages (columns doc_id, text), tokenized in batch calls.

    Token counts come first for the whole batch; offsets are computed only for passages longer than one
    window. A passage that fits in one window is one chunk spanning the whole (trimmed) text, which is what
    its offsets would give: the first token starts at 0 and the last ends at len(text).
    """
    doc_ids = passages.column("doc_id").to_pylist()
    texts = passages.column("text").to_pylist()
    lengths = tokenizer.lengths_batch(texts)
    long_rows = [i for i, n in enumerate(lengths) if n > size]
    long_offsets = dict(zip(long_rows, tokenizer.offsets_batch([texts[i] for i in long_rows])))
    columns: dict[str, list] = {name: [] for name in CHUNKS_SCHEMA.names}
    for row, (doc_id, text) in enumerate(zip(doc_ids, texts)):
        if row in long_offsets:
            spans = chunk_spans(text, long_offsets[row], size, overlap)
        else:
            start, end = _trimmed_span(text, 0, len(text))
            spans = [(start, end, lengths[row])] if end > start and lengths[row] else []
        _append_chunks(columns, doc_id, text, spans)
    return pa.Table.from_pydict(columns, schema=CHUNKS_SCHEMA)
