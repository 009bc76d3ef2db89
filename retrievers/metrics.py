"""Retrieval metrics against the relevant documents, computed with ir-measures.

Retrieved chunks are mapped to their document (max chunk score per document, ties broken by the better
chunk rank) before scoring. Queries that have judgments but retrieved nothing score 0 (ir-measures leaves
them out otherwise); queries without any relevant document are not scored and are counted instead.
"""
from __future__ import annotations

import pandas as pd

MEASURE_NAMES = ("R@{k}", "P@{k}", "RR@{k}", "nDCG@{k}")


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
