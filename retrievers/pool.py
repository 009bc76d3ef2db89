"""A small passage pool ranked in process by the product's retrieval methods (retrievers/methods.py): the
pool indexed by the embedded backend (bm25s BM25 with the config's parameters, exact k-NN over the config's
embedder) in a temporary folder, each query's top k returned by passage id. `ccrs vera qrels --retrievers`
ranks a qrels file's judged passages with it (VERA section 5.1: the top 5 retrieved passages).

The pool is never chunked (a judged passage is one unit) and never written to an OpenSearch index (a run's
OpenSearch index holds the run's corpus; a pool of a few thousand passages needs no service).
"""
from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from retrievers.backends import build_index, open_index
from retrievers.config import EmbedderConfig, IndexConfig
from retrievers.embedders import load_embedder
from retrievers.methods import retrieval_method


def rank_pool(pool: Mapping[str, str], queries: Sequence[str], methods: Sequence[str], k: int,
              index: IndexConfig = IndexConfig(), embedder: EmbedderConfig = EmbedderConfig()
              ) -> dict[str, list[list[str]]]:
    """{method: per query the ids of its top-k passages of `pool` ({id: text}), best first}. BM25 returns
    fewer than k where fewer passages share a term with the query (bm25s' zero-score padding is no hit)."""
    if not pool or not queries:
        raise ValueError("rank_pool: an empty pool or no query")
    chosen = [retrieval_method(name) for name in methods]
    ids = list(pool)
    chunks = pa.table({"chunk_id": ids, "doc_id": ids, "text": [pool[i] for i in ids]})
    vectors = query_vectors = None
    if any(method.needs_vectors for method in chosen):
        model = load_embedder(embedder)
        vectors, query_vectors = model.embed_passages(list(pool.values())), model.embed_queries(list(queries))
    embedded = index.model_copy(update={"backend": "embedded"})
    with tempfile.TemporaryDirectory(prefix="ccrs-pool-") as folder:
        build_index(embedded, chunks, vectors, Path(folder))
        opened = open_index(embedded, Path(folder))
        return {method.name: [[hit.doc_id for hit in row] for row in method.search(
                    opened, list(queries), query_vectors if method.needs_vectors else None, k)]
                for method in chosen}
