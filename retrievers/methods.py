"""Retrieval methods, each declared once as a registered object.

A method's `name` is what configs list under `retrieval.retrievers` and what the `retriever` column of
retrieved.parquet holds; `needs_vectors` says whether it searches with query vectors (then the chunks are
embedded at index time and the queries at search time); `search` runs it as one batch on an opened index
(any `SearchIndex` backend). Callers look methods up in `RETRIEVAL_METHODS` instead of comparing names.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from retrievers.types import Hit, SearchIndex

SearchFn = Callable[[SearchIndex, list[str], np.ndarray | None, int], list[list[Hit]]]


@dataclass(frozen=True)
class RetrievalMethod:
    name: str
    needs_vectors: bool
    description: str
    search_fn: SearchFn = field(repr=False, compare=False)

    def search(
        self, index: SearchIndex, queries: list[str], vectors: np.ndarray | None, k: int
    ) -> list[list[Hit]]:
        """Top-k hits per query (the query texts, or their vectors for a method that needs them)."""
        if self.needs_vectors and vectors is None:
            raise ValueError(f"retrieval method {self.name!r} searches with query vectors; none were given")
        return self.search_fn(index, queries, vectors, k)


def _search_bm25(index: SearchIndex, queries: list[str], vectors: np.ndarray | None, k: int):
    return index.search_bm25(queries, k)


def _search_knn(index: SearchIndex, queries: list[str], vectors: np.ndarray | None, k: int):
    return index.search_knn(vectors, k)


BM25 = RetrievalMethod("bm25", needs_vectors=False, description="BM25 over the chunk text",
                       search_fn=_search_bm25)
KNN = RetrievalMethod("knn", needs_vectors=True, description="k nearest chunk embeddings to the query's",
                      search_fn=_search_knn)

RETRIEVAL_METHODS: dict[str, RetrievalMethod] = {method.name: method for method in (BM25, KNN)}


def retrieval_method(name: str) -> RetrievalMethod:
    try:
        return RETRIEVAL_METHODS[name]
    except KeyError:
        known = ", ".join(RETRIEVAL_METHODS)
        raise ValueError(f"unknown retrieval method {name!r} (known: {known})") from None


def needs_vectors(names: Iterable[str]) -> bool:
    """Whether any of the named methods searches with vectors (so chunks and queries must be embedded)."""
    return any(retrieval_method(name).needs_vectors for name in names)
