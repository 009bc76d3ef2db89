"""Types shared by the index backends, the retrieval methods and their callers.

Imports no other module of this package, so every backend (retrievers/indexes.py for the embedded index,
retrievers/opensearch_index.py) can depend on it without an import cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class IndexBackendError(RuntimeError):
    """An index that cannot be built, reached or queried."""


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    doc_id: str
    score: float
    text: str


class SearchIndex(Protocol):
    """What every index backend opens: one batch search per retrieval method (retrievers/methods.py)."""

    def search_bm25(self, queries: list[str], k: int) -> list[list[Hit]]: ...

    def search_knn(self, vectors: np.ndarray, k: int) -> list[list[Hit]]: ...
