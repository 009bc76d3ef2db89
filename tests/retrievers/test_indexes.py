from __future__ import annotations

import math

import numpy as np
import pytest

from retrievers.backends import INDEX_BACKENDS, build_index, open_index
from retrievers.config import IndexConfig
from retrievers.indexes import EmbeddedIndex, bm25_tokens
from retrievers.types import IndexBackendError


@pytest.fixture(scope="module")
def vectors(sample_chunks) -> np.ndarray:
    # Deterministic stand-in vectors: k-NN is tested for exactness here; real embeddings in test_embedders.
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(sample_chunks.num_rows, 32)).astype(np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, sample_chunks, vectors):
    directory = tmp_path_factory.mktemp("embedded")
    build_index(IndexConfig(), sample_chunks, vectors, directory)
    return directory


def lucene_bm25(query: list[str], docs: list[list[str]], doc: int, k1: float, b: float) -> float:
    """Lucene's BM25Similarity: idf = ln(1 + (N - n + 0.5) / (n + 0.5));
    tf / (tf + k1 (1 - b + b dl/avgdl))."""
    n_docs, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    score = 0.0
    for term in set(query):
        n = sum(term in d for d in docs)
        tf = docs[doc].count(term)
        if n and tf:
            idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
            score += idf * tf / (tf + k1 * (1 - b + b * len(docs[doc]) / avgdl))
    return score


def test_backends_registered():
    assert set(INDEX_BACKENDS) == {"embedded", "opensearch"}


def test_bm25_scores_are_lucene_bm25(index_dir, sample_chunks, sample_questions):
    config = IndexConfig()
    index = open_index(config, index_dir)
    docs = bm25_tokens(sample_chunks.column("text").to_pylist(), config)
    row_of = {cid: i for i, cid in enumerate(sample_chunks.column("chunk_id").to_pylist())}
    question = sample_questions[0]["body"]
    hits = index.search_bm25([question], 20)[0]
    assert len(hits) == 20
    query = bm25_tokens([question], config)[0]
    for hit in hits:
        assert hit.score == pytest.approx(lucene_bm25(query, docs, row_of[hit.chunk_id], 1.2, 0.75), rel=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_parameters_come_from_config(tmp_path, sample_chunks, sample_questions):
    config = IndexConfig(bm25_k1=0.9, bm25_b=0.4)
    build_index(config, sample_chunks, None, tmp_path)
    index = open_index(config, tmp_path)
    docs = bm25_tokens(sample_chunks.column("text").to_pylist(), config)
    row_of = {cid: i for i, cid in enumerate(sample_chunks.column("chunk_id").to_pylist())}
    question = sample_questions[3]["body"]
    top = index.search_bm25([question], 1)[0][0]
    assert top.score == pytest.approx(
        lucene_bm25(bm25_tokens([question], config)[0], docs, row_of[top.chunk_id], 0.9, 0.4), rel=1e-4
    )
    with pytest.raises(IndexBackendError, match="without vectors"):
        index.search_knn(np.zeros((1, 32), dtype=np.float32), 5)


def test_bm25_query_without_known_terms_returns_no_hits(index_dir):
    hits = open_index(IndexConfig(), index_dir).search_bm25(["zzzqqq xxyyzz"], 20)
    assert hits == [[]]


def test_knn_is_exact_cosine(index_dir, vectors, sample_chunks):
    index = open_index(IndexConfig(), index_dir)
    queries = vectors[[3, 10, 200]] + 0.01
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    results = index.search_knn(queries, 20)
    chunk_ids = sample_chunks.column("chunk_id").to_pylist()
    for query, hits in zip(queries, results):
        expected = np.argsort(-(vectors @ query), kind="stable")[:20]
        assert [h.chunk_id for h in hits] == [chunk_ids[i] for i in expected]
        assert hits[0].score == pytest.approx(float(vectors[expected[0]] @ query), rel=1e-5)
    assert results[0][0].chunk_id == chunk_ids[3]


def test_index_is_persisted_and_reopened(index_dir, sample_chunks):
    reopened = EmbeddedIndex(IndexConfig(), index_dir)
    assert reopened.chunk_ids == sample_chunks.column("chunk_id").to_pylist()
    assert reopened.vectors.shape == (sample_chunks.num_rows, 32)


def test_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(IndexBackendError, match="no embedded index"):
        open_index(IndexConfig(), tmp_path)


def test_vector_count_must_match(tmp_path, sample_chunks, vectors):
    with pytest.raises(IndexBackendError, match="vectors for"):
        build_index(IndexConfig(), sample_chunks, vectors[:10], tmp_path)
