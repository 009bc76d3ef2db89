"""The embedded index backend (in-process, the default): BM25 with Lucene scoring through bm25s, exact k-NN
with numpy (dot product of L2-normalized vectors = cosine), persisted in a folder (bm25s files, vectors.npy,
chunks.parquet) so later runs reuse it.

The OpenSearch backend is retrievers/opensearch_index.py; retrievers/backends.py registers both and picks
one by `IndexConfig.backend`. Both backends import only retrievers/types.py and retrievers/config.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from retrievers.config import IndexConfig
from retrievers.types import Hit, IndexBackendError, SearchIndex

BM25_DIR = "bm25"
VECTORS_FILE = "vectors.npy"
CHUNKS_FILE = "chunks.parquet"
PARAMS_FILE = "embedded_index.json"


def _stemmer(name: str | None):
    if not name:
        return None
    try:
        import Stemmer
    except ImportError:
        raise IndexBackendError(f"bm25_stemmer={name!r} needs PyStemmer (pip install PyStemmer)") from None
    return Stemmer.Stemmer(name).stemWords


def bm25_tokens(texts: list[str], config: IndexConfig) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(
        texts,
        stopwords=config.bm25_stopwords or [],
        stemmer=_stemmer(config.bm25_stemmer),
        return_ids=False,
        show_progress=False,
    )


def build_embedded(
    config: IndexConfig, chunks: pa.Table, vectors: np.ndarray | None, directory: Path
) -> dict:
    import bm25s

    directory.mkdir(parents=True, exist_ok=True)
    retriever = bm25s.BM25(method="lucene", k1=config.bm25_k1, b=config.bm25_b)
    retriever.index(bm25_tokens(chunks.column("text").to_pylist(), config), show_progress=False)
    retriever.save(str(directory / BM25_DIR), show_progress=False)
    pq.write_table(chunks.select(["chunk_id", "doc_id", "text"]), directory / CHUNKS_FILE)
    if vectors is not None:
        if len(vectors) != chunks.num_rows:
            raise IndexBackendError(f"{len(vectors)} vectors for {chunks.num_rows} chunks")
        np.save(directory / VECTORS_FILE, np.asarray(vectors, dtype=np.float32))
    params = {"bm25_k1": config.bm25_k1, "bm25_b": config.bm25_b, "n_chunks": chunks.num_rows,
              "dimension": None if vectors is None else int(vectors.shape[1])}
    (directory / PARAMS_FILE).write_text(json.dumps(params))
    return params


class EmbeddedIndex:
    def __init__(self, config: IndexConfig, directory: Path) -> None:
        import bm25s

        if not (directory / PARAMS_FILE).exists():
            raise IndexBackendError(f"{directory}: no embedded index here (build it with `ccrs index`)")
        self.config = config
        self.bm25 = bm25s.BM25.load(str(directory / BM25_DIR), show_progress=False)
        table = pq.read_table(directory / CHUNKS_FILE)
        self.chunk_ids = table.column("chunk_id").to_pylist()
        self.doc_ids = table.column("doc_id").to_pylist()
        self.texts = table.column("text").to_pylist()
        vectors_file = directory / VECTORS_FILE
        self.vectors = np.load(vectors_file, mmap_mode="r") if vectors_file.exists() else None

    def _hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        return [
            Hit(self.chunk_ids[r], self.doc_ids[r], float(s), self.texts[r]) for r, s in zip(rows, scores)
        ]

    def search_bm25(self, queries: list[str], k: int) -> list[list[Hit]]:
        k = min(k, len(self.chunk_ids))
        tokens = bm25_tokens(queries, self.config)
        rows, scores = self.bm25.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        # bm25s pads with zero-score rows when fewer than k chunks share a term: those are not hits.
        return [self._hits(r[s > 0], s[s > 0]) for r, s in zip(rows, scores)]

    def search_knn(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        if self.vectors is None:
            raise IndexBackendError("this index was built without vectors (retrievers did not include 'knn')")
        scores = np.asarray(vectors, dtype=np.float32) @ np.asarray(self.vectors).T
        k = min(k, scores.shape[1])
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        results = []
        for row_scores, candidates in zip(scores, top):
            # Stable order: score descending, then chunk position, so ties rank deterministically.
            order = candidates[np.lexsort((candidates, -row_scores[candidates]))]
            results.append(self._hits(order, row_scores[order]))
        return results


def open_embedded(config: IndexConfig, directory: Path) -> SearchIndex:
    return EmbeddedIndex(config, directory)


def embedded_is_built(config: IndexConfig, directory: Path, summary: dict) -> bool:
    return (directory / PARAMS_FILE).exists()
