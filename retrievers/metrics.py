"""Retrieval metrics against the relevant documents, computed with ir-measures, and the GQM thesis'
semantic diversity of what was retrieved.

Retrieved chunks are mapped to their document (max chunk score per document, ties broken by the better
chunk rank) before scoring. Queries that have judgments but retrieved nothing score 0 (ir-measures leaves
them out otherwise); queries without any relevant document are not scored and are counted instead.
Semantic diversity needs no judgment: every query with retrieved chunks gets it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

MEASURE_NAMES = ("R@{k}", "P@{k}", "RR@{k}", "nDCG@{k}")
DIVERSITY_NAME = "SD@{k}"
DIVERSITY_LAMBDA = 0.5  # the thesis' default trade-off between relevance and novelty


def measures(k: int) -> list:
    import ir_measures

    return [ir_measures.parse_measure(name.format(k=k)) for name in MEASURE_NAMES]


def doc_run(retrieved: pd.DataFrame) -> pd.DataFrame:
    """Chunk hits (query_id, retriever, rank, doc_id, score) -> one row per document, max score."""
    ordered = retrieved.sort_values(
        ["query_id", "retriever", "score", "rank"], ascending=[True, True, False, True]
    )
    best = ordered.drop_duplicates(["query_id", "retriever", "doc_id"], keep="first")
    # ir-measures orders by score; a tiny rank-based decrement keeps equal-score documents in rank order.
    best = best.assign(score=best["score"] - best["rank"] * 1e-9)
    return best[["query_id", "retriever", "doc_id", "score"]]


def qrels_of(queries: pd.DataFrame) -> list:
    import ir_measures

    return [
        ir_measures.Qrel(str(row.query_id), str(doc_id), 1)
        for row in queries.itertuples()
        for doc_id in row.relevant_doc_ids
    ]


def per_query_metrics(
    queries: pd.DataFrame, retrieved: pd.DataFrame, k: int, retrievers: list[str]
) -> pd.DataFrame:
    """Rows (query_id, retriever, measure, value) for every judged query and retriever."""
    import ir_measures

    qrels = qrels_of(queries)
    judged = sorted({q.query_id for q in qrels})
    runs = doc_run(retrieved)
    rows = []
    for retriever in retrievers:
        run = runs[runs["retriever"] == retriever]
        scored = [ir_measures.ScoredDoc(r.query_id, r.doc_id, float(r.score)) for r in run.itertuples()]
        calculated = ir_measures.iter_calc(measures(k), qrels, scored)
        values = {(m.query_id, str(m.measure)): m.value for m in calculated}
        for query_id in judged:
            for measure in measures(k):
                value = float(values.get((query_id, str(measure)), 0.0))
                rows.append((query_id, retriever, str(measure), value))
    return pd.DataFrame(rows, columns=["query_id", "retriever", "measure", "value"])


def summarize(per_query: pd.DataFrame) -> dict[str, dict[str, float]]:
    """retriever -> measure -> mean over judged queries."""
    means = per_query.groupby(["retriever", "measure"], sort=True)["value"].mean()
    summary: dict[str, dict[str, float]] = {}
    for (retriever, measure), value in means.items():
        summary.setdefault(retriever, {})[measure] = float(value)
    return summary


def semantic_diversity(query: np.ndarray, documents: np.ndarray, lam: float = DIVERSITY_LAMBDA) -> float:
    """GQM thesis eq. 5.5-5.6: the documents taken one at a time by Maximal Marginal Relevance (each step
    the one maximizing lam * cos(d, q) - (1 - lam) * max cos(d, chosen), the max being 0 for the first),
    and the mean of the chosen MMR values mapped from [-1, 1] to [0, 1]."""
    docs = np.asarray(documents, dtype=float)
    docs = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
    q = np.asarray(query, dtype=float)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    relevance, pairwise = docs @ q, docs @ docs.T
    remaining, chosen, values = list(range(len(docs))), [], []
    while remaining:
        redundancy = pairwise[np.ix_(remaining, chosen)].max(axis=1) if chosen else np.zeros(len(remaining))
        scores = lam * relevance[remaining] - (1 - lam) * redundancy
        best = int(np.argmax(scores))
        values.append(float(scores[best]))
        chosen.append(remaining.pop(best))
    return 0.5 * (float(np.mean(values)) + 1.0)


def per_query_diversity(query_vectors: Mapping[str, np.ndarray], retrieved: pd.DataFrame,
                        chunk_vectors: np.ndarray, chunk_rows: Mapping[str, int], k: int,
                        retrievers: Sequence[str], lam: float = DIVERSITY_LAMBDA) -> pd.DataFrame:
    """Rows (query_id, retriever, "SD@k", value) for every query with retrieved chunks: the semantic
    diversity of its top-k chunks (vectors: `chunk_vectors[chunk_rows[chunk_id]]`)."""
    name = DIVERSITY_NAME.format(k=k)
    top = retrieved[retrieved["rank"] <= k].sort_values(["retriever", "query_id", "rank"])
    rows = []
    for (retriever, query_id), group in top.groupby(["retriever", "query_id"], sort=True):
        if retriever not in retrievers or str(query_id) not in query_vectors:
            continue
        docs = chunk_vectors[[chunk_rows[str(c)] for c in group["chunk_id"]]]
        value = semantic_diversity(query_vectors[str(query_id)], docs, lam)
        rows.append((str(query_id), retriever, name, value))
    return pd.DataFrame(rows, columns=["query_id", "retriever", "measure", "value"])
