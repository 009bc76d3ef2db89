from __future__ import annotations

from itertools import pairwise

import pyarrow as pa
import pytest

from benchmarks.shared import chunks_from_offsets  # the all-offsets reference path
from retrievers.chunking import chunk_id, chunk_passages, chunk_spans, token_windows
from retrievers.schema import CHUNKS_SCHEMA
from retrievers.tokenization import load_tokenizer


def test_token_windows_overlap():
    assert list(token_windows(10, 4, 1)) == [(0, 4), (3, 7), (6, 10)]
    assert list(token_windows(3, 300, 60)) == [(0, 3)]
    assert list(token_windows(300, 300, 60)) == [(0, 300)]
    assert list(token_windows(301, 300, 60)) == [(0, 300), (240, 301)]
    assert list(token_windows(0, 300, 60)) == []
    with pytest.raises(ValueError):
        list(token_windows(10, 4, 4))


def test_chunks_are_spans_of_their_passage(sample_dataset, sample_chunks):
    assert sample_chunks.schema == CHUNKS_SCHEMA
    texts = dict(zip(sample_dataset.passages.column("doc_id").to_pylist(),
                     sample_dataset.passages.column("text").to_pylist()))
    for chunk in sample_chunks.to_pylist():
        assert chunk["text"] == texts[chunk["doc_id"]][chunk["start_char"] : chunk["end_char"]]
        assert chunk["text"] == chunk["text"].strip() and chunk["text"]
        assert 1 <= chunk["n_tokens"] <= 300
        assert chunk["chunk_id"] == chunk_id(chunk["doc_id"], chunk["start_char"], chunk["end_char"])
    assert set(texts) == set(sample_chunks.column("doc_id").to_pylist())  # every passage has a chunk


def test_long_passage_windows_share_60_tokens(sample_dataset):
    tokenizer = load_tokenizer("mistral-common:tokenizer.model.v1")
    rows = sample_dataset.passages.to_pylist()
    offsets = tokenizer.offsets_batch([r["text"] for r in rows])
    longest = max(range(len(rows)), key=lambda i: len(offsets[i]))
    text, spans = rows[longest]["text"], offsets[longest]
    assert len(spans) > 300  # the sample holds real snippets longer than one window
    chunks = chunk_spans(text, spans, 300, 60)
    assert len(chunks) >= 2
    assert chunks[0][2] == 300
    assert chunks[0][0] == 0 and chunks[-1][1] == len(text)
    # The second window starts at token 240, i.e. 60 tokens before the first one ends.
    assert chunks[1][0] == spans[240][0] + (text[spans[240][0]] == " ")


def test_chunk_ids_are_deterministic_and_unique(sample_dataset, sample_chunks):
    again = chunk_passages(
        sample_dataset.passages, load_tokenizer("mistral-common:tokenizer.model.v1"), 300, 60
    )
    assert again.equals(sample_chunks)
    ids = sample_chunks.column("chunk_id").to_pylist()
    assert len(set(ids)) == len(ids)


def test_small_windows_cover_the_passage(sample_dataset):
    tokenizer = load_tokenizer("mistral-common:tokenizer.model.v1")
    chunks = chunk_passages(sample_dataset.passages.slice(0, 5), tokenizer, 16, 4).to_pylist()
    first_doc = [c for c in chunks if c["doc_id"] == chunks[0]["doc_id"]]
    for a, b in pairwise(first_doc):
        assert b["start_char"] < a["end_char"]  # overlapping windows


def test_batch_shortcut_equals_offsets_everywhere(sample_dataset):
    """chunk_passages skips offsets for one-window passages; the result equals the all-offsets path."""
    tokenizer = load_tokenizer("mistral-common:tokenizer.model.v1")
    passages = sample_dataset.passages.select(["doc_id", "text"])
    doc_ids, texts = passages.column("doc_id").to_pylist(), passages.column("text").to_pylist()
    for size, overlap in ((300, 60), (40, 8)):
        expected = chunks_from_offsets(doc_ids, texts, tokenizer.offsets_batch(texts), size, overlap)
        assert chunk_passages(passages, tokenizer, size, overlap).equals(expected)


def test_unstripped_and_unicode_text():
    tokenizer = load_tokenizer("mistral-common:tokenizer.model.v1")
    text = "  \u03b1-Synuclein (\u03b1Syn) \u2013 aggregates in Parkinson\u2019s disease.\n"
    table = pa.table({"doc_id": ["p1"], "text": [text]})
    short = chunk_passages(table, tokenizer, 300, 60).to_pylist()
    assert len(short) == 1 and short[0]["text"] == text.strip() and short[0]["start_char"] == 2
    windows = chunk_passages(table, tokenizer, 8, 2).to_pylist()
    assert all(w["text"] == text[w["start_char"] : w["end_char"]] for w in windows)
    assert windows[0]["start_char"] == 2 and windows[-1]["end_char"] == len(text.rstrip())
