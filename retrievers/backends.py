"""Index backends, each a small registered spec, picked by `IndexConfig.backend`:

- `embedded` (default, in-process): bm25s BM25 + exact numpy k-NN in a folder (retrievers/indexes.py);
- `opensearch`: one OpenSearch index with a BM25 text field and a knn_vector field
  (retrievers/opensearch_index.py).

This module imports both backends; they import only retrievers/types.py and retrievers/config.py, so the
import graph has no cycle. opensearch-py itself is imported only when an OpenSearch call is made.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from retrievers import opensearch_index
from retrievers.config import IndexConfig
from retrievers.indexes import build_embedded, embedded_is_built, open_embedded
from retrievers.types import SearchIndex


@dataclass(frozen=True)
class IndexBackend:
    build: Callable[[IndexConfig, pa.Table, np.ndarray | None, Path], dict]
    open: Callable[[IndexConfig, Path], SearchIndex]
    # Whether a previously built index (its build summary) is still there: a rerun rebuilds it otherwise.
    is_built: Callable[[IndexConfig, Path, dict], bool]
    # Raises IndexBackendError naming the address when a remote backend does not answer.
    check_reachable: Callable[[IndexConfig], None]


def _nothing_to_reach(config: IndexConfig) -> None:
    return None


def _build_opensearch(
    config: IndexConfig, chunks: pa.Table, vectors: np.ndarray | None, directory: Path
) -> dict:
    return opensearch_index.build_opensearch(config.opensearch, chunks, vectors)


def _open_opensearch(config: IndexConfig, directory: Path) -> SearchIndex:
    return opensearch_index.OpenSearchIndex(config.opensearch)


def _opensearch_is_built(config: IndexConfig, directory: Path, summary: dict) -> bool:
    return opensearch_index.opensearch_is_built(config.opensearch, summary)


def _ping_opensearch(config: IndexConfig) -> None:
    opensearch_index.ping(config.opensearch)


INDEX_BACKENDS: dict[str, IndexBackend] = {
    "embedded": IndexBackend(
        build=build_embedded, open=open_embedded, is_built=embedded_is_built,
        check_reachable=_nothing_to_reach,
    ),
    "opensearch": IndexBackend(
        build=_build_opensearch, open=_open_opensearch, is_built=_opensearch_is_built,
        check_reachable=_ping_opensearch,
    ),
}


def index_backend(config: IndexConfig) -> IndexBackend:
    return INDEX_BACKENDS[config.backend]


def check_index_reachable(config: IndexConfig) -> None:
    """A remote index backend that does not answer raises IndexBackendError naming its address."""
    index_backend(config).check_reachable(config)


def build_index(config: IndexConfig, chunks: pa.Table, vectors: np.ndarray | None, directory: Path) -> dict:
    return index_backend(config).build(config, chunks, vectors, directory)


def open_index(config: IndexConfig, directory: Path) -> SearchIndex:
    return index_backend(config).open(config, directory)


def index_is_built(config: IndexConfig, directory: Path, summary: dict) -> bool:
    return index_backend(config).is_built(config, directory, summary)
