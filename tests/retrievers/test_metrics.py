from __future__ import annotations

import math

import ir_measures
import pandas as pd
import pytest

from retrievers.metrics import doc_run, measures, per_query_metrics, qrels_of, summarize

QUERIES = pd.DataFrame(
    {
        "query_id": ["q1", "q2", "q3", "q4"],
        "relevant_doc_ids": [["d1", "d2"], ["d3"], ["d9"], []],
    }
)


def _hits(query_id, retriever, doc_ids, start_score=10.0):
    return [
        {"query_id": query_id, "retriever": retriever, "rank": r, "chunk_id": f"{d}#{r}", "doc_id": d,
         "score": start_score - r, "text": ""}
        for r, d in enumerate(doc_ids, start=1)
    ]


RETRIEVED = pd.DataFrame(
    _hits("q1", "bm25", ["d5", "d1", "d1", "d2"])  # d1 twice: two chunks of one document
    + _hits("q2", "bm25", ["d3", "d4"])
    + _hits("q4", "bm25", ["d1"])
    + _hits("q1", "knn", ["d2"])
)


def test_chunks_map_to_documents_with_max_score():
    run = doc_run(RETRIEVED)
    q1 = run[(run.query_id == "q1") & (run.retriever == "bm25")]
    assert list(q1.doc_id) == ["d5", "d1", "d2"]
    assert q1.score.iloc[1] == pytest.approx(8.0, abs=1e-6)


def test_per_query_values():
    table = per_query_metrics(QUERIES, RETRIEVED, 3, ["bm25", "knn"])
    value = table.set_index(["query_id", "retriever", "measure"])["value"]
    assert value[("q1", "bm25", "R@3")] == 1.0
    assert value[("q1", "bm25", "P@3")] == pytest.approx(2 / 3)
    assert value[("q1", "bm25", "RR@3")] == 0.5
    ideal = 1 + 1 / math.log2(3)
    assert value[("q1", "bm25", "nDCG@3")] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert value[("q2", "bm25", "RR@3")] == 1.0
    # q3 has judgments but retrieved nothing: scored 0, not dropped. q4 has no judgments: not scored.
    assert value[("q3", "bm25", "R@3")] == 0.0
    assert "q4" not in set(table.query_id)
    assert value[("q2", "knn", "R@3")] == 0.0 and value[("q1", "knn", "R@3")] == 0.5
    assert len(table) == 3 * 2 * 4


def test_summary_equals_ir_measures_aggregate_when_every_query_has_hits():
    retrieved = RETRIEVED[RETRIEVED.query_id.isin(["q1", "q2"]) & (RETRIEVED.retriever == "bm25")]
    queries = QUERIES[QUERIES.query_id.isin(["q1", "q2"])]
    summary = summarize(per_query_metrics(queries, retrieved, 3, ["bm25"]))["bm25"]
    run = [ir_measures.ScoredDoc(r.query_id, r.doc_id, r.score) for r in doc_run(retrieved).itertuples()]
    aggregate = ir_measures.calc_aggregate(measures(3), qrels_of(queries), run)
    assert summary == pytest.approx({str(m): v for m, v in aggregate.items()})


def test_semantic_diversity_by_hand():
    """GQM thesis eq. 5.5-5.6, lambda 0.5: q = (1, 0); a duplicate adds no novelty. With d1 = d2 = (1, 0)
    and d3 = (0, 1): MMR 0.5 (d1), then 0.5 - 0.5 = 0 (d2) and 0 - 0 = 0 (d3): 0.5 * (1/6 + 1)."""
    import numpy as np

    from retrievers.metrics import semantic_diversity

    q = np.array([1.0, 0.0])
    assert semantic_diversity(q, np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])) == pytest.approx(7 / 12)
    assert semantic_diversity(q, np.array([[2.0, 0.0], [0.0, 3.0]])) == pytest.approx(0.625)  # scale-free
    assert semantic_diversity(q, np.array([[1.0, 0.0]]), lam=1.0) == pytest.approx(1.0)


def test_per_query_diversity_reads_the_top_k_chunks_of_each_retriever():
    import numpy as np

    from retrievers.metrics import per_query_diversity

    retrieved = pd.DataFrame({"query_id": ["q1"] * 4, "retriever": ["bm25", "bm25", "knn", "knn"],
                              "rank": [1, 2, 1, 2], "chunk_id": ["a", "b", "a", "a"]})
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]])
    rows = per_query_diversity({"q1": np.array([1.0, 0.0])}, retrieved, vectors, {"a": 0, "b": 1}, 2,
                               ["bm25", "knn"])
    assert rows.measure.tolist() == ["SD@2", "SD@2"]
    assert rows.value.tolist() == pytest.approx([0.625, 0.5 * (0.25 + 1)])  # knn: the same chunk twice
