"""OpenSearch backend: one index with a BM25 `text` field and an HNSW `knn_vector` field.

Request bodies are built by small pure functions (index_body, bm25_query, knn_query) so their JSON shape
is unit-tested against OpenSearch's documented query DSL without a server. opensearch-py is imported lazily.
Credentials are read from environment variables named in the config and are never logged.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from retrievers.config import OpenSearchConfig, redact_userinfo
from retrievers.types import Hit, IndexBackendError

TEXT_FIELD = "text"
VECTOR_FIELD = "embedding"
SIMILARITY_NAME = "ccrs_bm25"
SOURCE_FIELDS = ["chunk_id", "doc_id", TEXT_FIELD]


@dataclass(frozen=True)
class Credentials:
    """Basic-auth credentials resolved from the environment; the repr never shows them."""

    username: str = field(repr=False)
    password: str = field(repr=False)

    def __repr__(self) -> str:
        return "Credentials(username=***, password=***)"


def index_body(config: OpenSearchConfig, dimension: int | None) -> dict:
    """Settings (BM25 parameters, k-NN on) and mappings for the chunk index."""
    properties: dict[str, Any] = {
        "chunk_id": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        TEXT_FIELD: {"type": "text", "analyzer": config.analyzer, "similarity": SIMILARITY_NAME},
    }
    if dimension is not None:
        properties[VECTOR_FIELD] = {
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "engine": config.knn_engine,
                "space_type": config.knn_space_type,
                "parameters": {"m": config.hnsw_m, "ef_construction": config.hnsw_ef_construction},
            },
        }
    return {
        "settings": {
            "index": {
                "knn": True,
                "similarity": {SIMILARITY_NAME: {"type": "BM25", "k1": config.bm25_k1, "b": config.bm25_b}},
            }
        },
        "mappings": {"properties": properties},
    }


def bm25_query(text: str, k: int) -> dict:
    return {"size": k, "_source": SOURCE_FIELDS, "query": {"match": {TEXT_FIELD: {"query": text}}}}


def knn_query(vector: list[float], k: int) -> dict:
    return {"size": k, "_source": SOURCE_FIELDS, "query": {"knn": {VECTOR_FIELD: {"vector": vector, "k": k}}}}


def bulk_actions(index_name: str, chunks: pa.Table, vectors: np.ndarray | None) -> Iterator[dict]:
    """`_bulk` index actions with the chunk id as document id: re-indexing overwrites, never duplicates."""
    for row, chunk in enumerate(chunks.select(SOURCE_FIELDS).to_pylist()):
        source = dict(chunk)
        if vectors is not None:
            source[VECTOR_FIELD] = [float(x) for x in vectors[row]]
        yield {"_op_type": "index", "_index": index_name, "_id": chunk["chunk_id"], "_source": source}


def resolve_credentials(config: OpenSearchConfig) -> Credentials:
    missing = [name for name in (config.username_env, config.password_env) if not os.environ.get(name)]
    if missing:
        raise IndexBackendError(f"OpenSearch basic auth: environment variables {missing} are not set")
    return Credentials(os.environ[config.username_env], os.environ[config.password_env])


def _sigv4_auth(config: OpenSearchConfig):
    import boto3
    from opensearchpy import AWSV4SignerAuth

    if not config.aws_region:
        raise IndexBackendError("OpenSearch sigv4 auth needs opensearch.aws_region")
    credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise IndexBackendError("OpenSearch sigv4 auth: boto3 found no AWS credentials")
    return AWSV4SignerAuth(credentials, config.aws_region, config.aws_service)


def client_kwargs(config: OpenSearchConfig) -> dict:
    kwargs: dict[str, Any] = {
        "hosts": list(config.hosts),
        "timeout": config.timeout_s,
        "verify_certs": config.verify_certs,
        "use_ssl": any(h.startswith("https://") for h in config.hosts),
    }
    if config.auth == "basic":
        credentials = resolve_credentials(config)
        kwargs["http_auth"] = (credentials.username, credentials.password)
    elif config.auth == "sigv4":
        from opensearchpy import RequestsHttpConnection

        kwargs["http_auth"] = _sigv4_auth(config)
        kwargs["connection_class"] = RequestsHttpConnection
    return kwargs


def make_client(config: OpenSearchConfig):
    from opensearchpy import OpenSearch

    return OpenSearch(**client_kwargs(config))


def _hosts(config: OpenSearchConfig) -> str:
    return ", ".join(redact_userinfo(h) for h in config.hosts)


def _unreachable(config: OpenSearchConfig, err: Exception) -> IndexBackendError:
    # Only the error class: the message of a transport error may echo request headers.
    return IndexBackendError(f"OpenSearch at {_hosts(config)} is unreachable ({type(err).__name__})")


def _call(config: OpenSearchConfig, fn, *args, **kwargs):
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import TransportError

    try:
        return fn(*args, **kwargs)
    except OSConnectionError as err:
        raise _unreachable(config, err) from None
    except TransportError as err:
        raise IndexBackendError(
            f"OpenSearch at {_hosts(config)}: {err.status_code} {err.error}: {_reason(err)}"
        ) from None


def _reason(err) -> str:
    info = err.info if isinstance(err.info, dict) else {}
    error = info.get("error", {})
    return str(error.get("reason", error) if isinstance(error, dict) else error)[:300]


def build_opensearch(config: OpenSearchConfig, chunks: pa.Table, vectors: np.ndarray | None) -> dict:
    """(Re)create `config.index_name` and bulk-index the chunks; returns counts."""
    from opensearchpy import helpers

    client = make_client(config)
    name = config.index_name
    if _call(config, client.indices.exists, index=name):
        _call(config, client.indices.delete, index=name)
    dimension = None if vectors is None else int(vectors.shape[1])
    _call(config, client.indices.create, index=name, body=index_body(config, dimension))
    actions = bulk_actions(name, chunks, vectors)
    indexed, errors = _call(
        config, helpers.bulk, client, actions, chunk_size=config.bulk_batch, raise_on_error=False,
        refresh=True,
    )
    if errors:
        raise IndexBackendError(
            f"OpenSearch bulk indexing into {name}: {len(errors)} failed, e.g. {errors[0]}"
        )
    return {"index_name": name, "n_indexed": indexed, "dimension": dimension}


def ping(config: OpenSearchConfig) -> None:
    """Fail fast, naming the hosts, when the cluster does not answer its root route."""
    client = make_client(config)
    _call(config, client.info)


def opensearch_is_built(config: OpenSearchConfig, summary: dict) -> bool:
    """The index exists and holds as many documents as were indexed."""
    client = make_client(config)
    if not _call(config, client.indices.exists, index=config.index_name):
        return False
    count = _call(config, client.count, index=config.index_name)["count"]
    return count == summary.get("n_indexed")


def msearch_body(index_name: str, bodies: list[dict]) -> list[dict]:
    """`_msearch` NDJSON lines: a header naming the index, then the search body, per query."""
    return [line for body in bodies for line in ({"index": index_name}, body)]


def _hit(hit: dict) -> Hit:
    source = hit["_source"]
    return Hit(source["chunk_id"], source["doc_id"], float(hit["_score"]), source[TEXT_FIELD])


class OpenSearchIndex:
    def __init__(self, config: OpenSearchConfig) -> None:
        self.config = config
        self.client = make_client(config)

    def _hits(self, response: dict) -> list[Hit]:
        if "error" in response:
            error = response["error"]
            reason = error.get("reason", error) if isinstance(error, dict) else error
            raise IndexBackendError(f"OpenSearch at {_hosts(self.config)}: {reason}")
        return [_hit(hit) for hit in response["hits"]["hits"]]

    def _msearch(self, bodies: list[dict]) -> list[list[Hit]]:
        results: list[list[Hit]] = []
        size = self.config.search_batch
        for start in range(0, len(bodies), size):
            lines = msearch_body(self.config.index_name, bodies[start : start + size])
            response = _call(self.config, self.client.msearch, body=lines)
            results += [self._hits(r) for r in response["responses"]]
        return results

    def search_bm25(self, queries: list[str], k: int) -> list[list[Hit]]:
        return self._msearch([bm25_query(q, k) for q in queries])

    def search_knn(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        return self._msearch([knn_query([float(x) for x in v], k) for v in vectors])
