"""retrievers/pool.py: a small passage pool ranked in process by the product's retrieval methods."""
import pytest

from retrievers.pool import rank_pool

POOL = {"d1": "The cat sat on the mat in the kitchen.", "d2": "Insulin regulates blood glucose levels.",
        "d3": "Dogs bark at the mail carrier.", "d4": "Glucose is taken up by cells when insulin binds."}


def test_bm25_ranks_the_pool_by_passage_id_and_returns_no_zero_score_padding():
    ranked = rank_pool(POOL, ["insulin glucose", "cat mat", "volcano"], ["bm25"], k=3)
    assert list(ranked) == ["bm25"]
    first, second, none = ranked["bm25"]
    assert set(first) == {"d2", "d4"}  # the only passages sharing a term: no padding to 3
    assert second == ["d1"] and none == []


def test_knn_with_the_configured_embedder_ranks_the_closest_passage_first():
    ranked = rank_pool(POOL, ["What does insulin do to blood sugar?"], ["knn", "bm25"], k=2)
    assert ranked["knn"][0][0] in {"d2", "d4"} and len(ranked["knn"][0]) == 2
    assert list(ranked) == ["knn", "bm25"]


def test_an_empty_pool_or_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="empty pool"):
        rank_pool({}, ["q"], ["bm25"], 5)
    with pytest.raises(ValueError, match="unknown retrieval method"):
        rank_pool(POOL, ["q"], ["splade"], 5)
