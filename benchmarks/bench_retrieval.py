"""Query throughput of the embedded backend (BM25 via bm25s, exact k-NN via numpy) and BM25 embedded vs
osmem-server (in-memory OpenSearch-compatible) over loopback, measured side by side in one run.

Corpus: all unique snippets of the 255 BioASQ 12b questions, chunked like the pipeline (E5-Mistral
tokenizer, 300/60); queries: the 255 question bodies; k = 20. k-NN uses random unit vectors of the
embedder's size unless --embed (then all-MiniLM-L6-v2 embeddings; slower to set up, same search cost).
Timings are the best of --repeats, the candidates interleaved. Never used as a test.

    python benchmarks/bench_retrieval.py [--data /work/shared/data/bioasq-12b] [--repeats 3] [--embed]
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from timing import interleaved_best

from retrievers.backends import build_index, open_index
from retrievers.chunking import chunk_passages
from retrievers.config import DatasetConfig, EmbedderConfig, IndexConfig, OpenSearchConfig
from retrievers.loaders import load_dataset
from retrievers.metrics import per_query_metrics, summarize
from retrievers.tokenization import load_tokenizer

K = 20


def unit_vectors(n: int, dimension: int, seed: int) -> np.ndarray:
    raw = np.random.default_rng(seed).normal(size=(n, dimension)).astype(np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def as_rows(query_ids, retriever, results) -> pd.DataFrame:
    return pd.DataFrame(
        [{"query_id": q, "retriever": retriever, "rank": r, "doc_id": h.doc_id, "score": h.score}
         for q, hits in zip(query_ids, results) for r, h in enumerate(hits, start=1)]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/work/shared/data/bioasq-12b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--embed", action="store_true", help="real all-MiniLM-L6-v2 vectors instead of random ones"
    )
    args = parser.parse_args()

    loaded = load_dataset(DatasetConfig(path=args.data))
    chunks = chunk_passages(loaded.passages, load_tokenizer("mistral-common:tokenizer.model.v1"), 300, 60)
    queries = loaded.queries.to_pandas()
    texts = queries["text"].tolist()
    if args.embed:
        from retrievers.embedders import load_embedder

        embedder = load_embedder(EmbedderConfig())
        vectors = embedder.embed_passages(chunks.column("text").to_pylist())
        query_vectors = embedder.embed_queries(texts)
    else:
        vectors, query_vectors = unit_vectors(chunks.num_rows, 384, 0), unit_vectors(len(texts), 384, 1)
    print(f"corpus: {chunks.num_rows} chunks from {loaded.passages.num_rows} passages; "
          f"{len(texts)} queries; k={K}; "
          f"vectors: {'all-MiniLM-L6-v2' if args.embed else 'random unit'} ({vectors.shape[1]} dims)")

    from osmem_server import OsmemServer

    with tempfile.TemporaryDirectory() as tmp, OsmemServer.start(freeze=False, japanese=False) as server:
        embedded_config = IndexConfig()
        build_index(embedded_config, chunks, vectors, Path(tmp))
        embedded = open_index(embedded_config, Path(tmp))
        os_config = IndexConfig(
            backend="opensearch", opensearch=OpenSearchConfig(hosts=[server.url], index_name="bench")
        )
        build_index(os_config, chunks, None, Path(tmp))
        remote = open_index(os_config, Path(tmp))
        candidates = {
            "embedded BM25, one batch call": lambda: embedded.search_bm25(texts, K),
            "embedded BM25, one call per query": lambda: [embedded.search_bm25([t], K)[0] for t in texts],
            "embedded k-NN, one matrix product": lambda: embedded.search_knn(query_vectors, K),
            "embedded k-NN, one call per query": lambda: [
                embedded.search_knn(v[None, :], K)[0] for v in query_vectors
            ],
            "osmem BM25, _msearch (64 per request)": lambda: remote.search_bm25(texts, K),
            "osmem BM25, one _search per query": lambda: [remote.search_bm25([t], K)[0] for t in texts],
        }
        best = interleaved_best(args.repeats, candidates)

    print(f"best of {args.repeats}, interleaved:")
    for name, (seconds, _) in best.items():
        print(f"  {name:<40} {seconds * 1000:9.1f} ms  {len(texts) / seconds:9.0f} queries/s")
    bm25_ratio = best["osmem BM25, _msearch (64 per request)"][0] / best["embedded BM25, one batch call"][0]
    print(f"embedded BM25 (batch) is x{bm25_ratio:.1f} the throughput of osmem BM25 (_msearch) over loopback")
    ids = queries["query_id"].tolist()
    retrieved = pd.concat([
        as_rows(ids, "bm25-embedded", best["embedded BM25, one batch call"][1]),
        as_rows(ids, "bm25-osmem", best["osmem BM25, _msearch (64 per request)"][1]),
    ])
    summary = summarize(per_query_metrics(queries, retrieved, K, ["bm25-embedded", "bm25-osmem"]))
    for name, values in summary.items():
        print(f"  {name:<14} " + "  ".join(f"{m}={v:.3f}" for m, v in sorted(values.items())))


if __name__ == "__main__":
    main()
