"""The retrieval-method registry: each method declared once, looked up by the name configs use."""
from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
from pydantic import ValidationError

from retrievers.config import RetrievalConfig, RetrieverName
from retrievers.methods import BM25, KNN, RETRIEVAL_METHODS, RetrievalMethod, needs_vectors, retrieval_method
from retrievers.types import Hit


class FakeIndex:
    """Records which search a method ran."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def search_bm25(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.calls.append(("bm25", tuple(queries), k))
        return [[Hit("c", "d", 1.0, q)] for q in queries]

    def search_knn(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        self.calls.append(("knn", vectors.shape, k))
        return [[Hit("c", "d", float(v[0]), "")] for v in vectors]


def test_registry_holds_the_config_names_in_config_order():
    assert list(RETRIEVAL_METHODS) == ["bm25", "knn"]
    for name, method in RETRIEVAL_METHODS.items():
        assert isinstance(method, RetrievalMethod) and method.name == name
    assert (BM25.needs_vectors, KNN.needs_vectors) == (False, True)
    # The config accepts exactly the registered names, and lists them all by default.
    assert get_args(RetrieverName) == tuple(RETRIEVAL_METHODS)
    assert RetrievalConfig().retrievers == ["bm25", "knn"]
    with pytest.raises(ValidationError, match="'bm25' or 'knn'"):
        RetrievalConfig(retrievers=["dense"])


def test_lookup_and_needs_vectors():
    assert retrieval_method("knn") is KNN
    with pytest.raises(ValueError, match="unknown retrieval method 'dense' \\(known: bm25, knn\\)"):
        retrieval_method("dense")
    assert needs_vectors(["bm25", "knn"]) and needs_vectors(["knn"])
    assert not needs_vectors(["bm25"]) and not needs_vectors([])


def test_each_method_runs_its_own_search():
    index = FakeIndex()
    assert BM25.search(index, ["a", "b"], None, 5)[1][0].text == "b"
    vectors = np.array([[0.25, 0.0], [0.5, 0.0]], dtype=np.float32)
    assert [hits[0].score for hits in KNN.search(index, ["a", "b"], vectors, 3)] == [0.25, 0.5]
    assert index.calls == [("bm25", ("a", "b"), 5), ("knn", (2, 2), 3)]
    with pytest.raises(ValueError, match="'knn' searches with query vectors"):
        KNN.search(index, ["a"], None, 3)
