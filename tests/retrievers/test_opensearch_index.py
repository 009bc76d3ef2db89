"""OpenSearch backend. Live tests run against osmem-server (an in-memory OpenSearch-compatible server) on
a free loopback port; osmem has no k-NN search, so k-NN request bodies are checked as JSON shapes against
OpenSearch's documented query DSL, and against osmem only for its explicit refusal."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from retrievers import opensearch_index as osi
from retrievers.backends import build_index, open_index
from retrievers.config import IndexConfig, OpenSearchConfig
from retrievers.types import IndexBackendError


@pytest.fixture(scope="module")
def opensearch_url():
    from osmem_server import OsmemServer

    server = OsmemServer.start(freeze=False, japanese=False, addr="127.0.0.1:0")
    yield server.url
    server.close()


def _config(url: str, name: str, **kwargs) -> OpenSearchConfig:
    return OpenSearchConfig(hosts=[url], index_name=name, timeout_s=10, **kwargs)


# ---------------------------------------------------------------- request shapes (no server)


def test_index_body_shape():
    config = OpenSearchConfig(bm25_k1=0.9, bm25_b=0.4, knn_engine="lucene", knn_space_type="cosinesimil",
                              hnsw_m=24)
    body = osi.index_body(config, 384)
    assert body["settings"]["index"]["knn"] is True
    assert body["settings"]["index"]["similarity"] == {"ccrs_bm25": {"type": "BM25", "k1": 0.9, "b": 0.4}}
    properties = body["mappings"]["properties"]
    assert properties["text"] == {"type": "text", "analyzer": "english", "similarity": "ccrs_bm25"}
    assert properties["chunk_id"] == {"type": "keyword"} and properties["doc_id"] == {"type": "keyword"}
    assert properties["embedding"] == {
        "type": "knn_vector",
        "dimension": 384,
        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil",
                   "parameters": {"m": 24, "ef_construction": 128}},
    }
    assert "embedding" not in osi.index_body(config, None)["mappings"]["properties"]


def test_knn_query_follows_the_documented_dsl():
    body = osi.knn_query([0.1, 0.2, 0.3], 20)
    assert body["size"] == 20
    assert body["query"] == {"knn": {"embedding": {"vector": [0.1, 0.2, 0.3], "k": 20}}}
    assert set(body) == {"size", "query", "_source"}


def test_bm25_query_shape():
    body = osi.bm25_query("Concizumab is used for which diseases?", 20)
    assert body["size"] == 20
    assert body["query"] == {"match": {"text": {"query": "Concizumab is used for which diseases?"}}}
    assert osi.msearch_body("ix", [body, body]) == [{"index": "ix"}, body, {"index": "ix"}, body]


def test_bulk_actions_use_chunk_ids(sample_chunks):
    vectors = np.ones((sample_chunks.num_rows, 4), dtype=np.float32)
    actions = list(osi.bulk_actions("ix", sample_chunks.slice(0, 3), vectors))
    assert [a["_id"] for a in actions] == sample_chunks.column("chunk_id").to_pylist()[:3]
    assert actions[0]["_op_type"] == "index" and actions[0]["_index"] == "ix"
    assert actions[0]["_source"]["embedding"] == [1.0, 1.0, 1.0, 1.0]
    assert actions[0]["_source"]["text"] == sample_chunks.column("text")[0].as_py()


# ---------------------------------------------------------------- auth and secrets (no server)


def client_kwargs_under(monkeypatch, env: dict[str, str], **fields):
    """The config of `fields` and its client kwargs, read with the variables of `env` set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = OpenSearchConfig(**fields)
    return config, osi.client_kwargs(config)


def test_basic_auth_from_env_is_never_shown(monkeypatch):
    config, kwargs = client_kwargs_under(monkeypatch, {"OS_U": "admin", "OS_P": "s3cr3t-pw"}, auth="basic",
                                         username_env="OS_U", password_env="OS_P",
                                         hosts=["https://admin:s3cr3t-pw@search.example:9200"])
    assert kwargs["http_auth"] == ("admin", "s3cr3t-pw") and kwargs["use_ssl"] is True
    assert "s3cr3t-pw" not in repr(osi.resolve_credentials(config))
    assert "s3cr3t-pw" not in repr(config) and "s3cr3t-pw" not in str(IndexConfig(opensearch=config))


def test_basic_auth_without_env_names_the_variables(monkeypatch):
    monkeypatch.delenv("OPENSEARCH_USER", raising=False)
    monkeypatch.delenv("OPENSEARCH_PASSWORD", raising=False)
    with pytest.raises(IndexBackendError, match="OPENSEARCH_USER"):
        osi.client_kwargs(OpenSearchConfig(auth="basic"))


def test_sigv4_uses_boto3_session_credentials(monkeypatch):
    from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection

    aws = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
    config, kwargs = client_kwargs_under(monkeypatch, aws, auth="sigv4", aws_region="eu-west-1",
                                         aws_service="es",
                                         hosts=["https://search-domain.eu-west-1.es.amazonaws.com"])
    assert isinstance(kwargs["http_auth"], AWSV4SignerAuth)
    signed = kwargs["http_auth"].signer.sign("GET", config.hosts[0] + "/_search", None, {})
    assert signed["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/es/aws4_request" in signed["Authorization"]
    assert kwargs["connection_class"] is RequestsHttpConnection
    with pytest.raises(IndexBackendError, match="aws_region"):
        osi.client_kwargs(OpenSearchConfig(auth="sigv4"))


def test_unreachable_server_names_the_host(sample_chunks):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(IndexBackendError, match=f"OpenSearch at {url} is unreachable"):
        osi.build_opensearch(OpenSearchConfig(hosts=[url], timeout_s=2), sample_chunks, None)


# ---------------------------------------------------------------- live: osmem-server


@pytest.fixture(scope="module")
def built(opensearch_url, sample_chunks):
    config = IndexConfig(backend="opensearch",
                         opensearch=_config(opensearch_url, "ccrs-test", bm25_k1=1.1, bm25_b=0.7))
    vectors = np.random.default_rng(0).normal(size=(sample_chunks.num_rows, 16)).astype(np.float32)
    summary = build_index(config, sample_chunks, vectors, None)
    return config, summary


def test_live_index_creation_and_bulk(built, sample_chunks):
    config, summary = built
    assert summary == {"index_name": "ccrs-test", "n_indexed": sample_chunks.num_rows, "dimension": 16}
    client = osi.make_client(config.opensearch)
    mapping = client.indices.get_mapping(index="ccrs-test")["ccrs-test"]["mappings"]["properties"]
    assert mapping["embedding"]["type"] == "knn_vector" and mapping["embedding"]["dimension"] == 16
    assert mapping["text"]["similarity"] == "ccrs_bm25"
    settings = client.indices.get_settings(index="ccrs-test")["ccrs-test"]["settings"]["index"]
    assert settings["knn"] == "true"
    assert settings["similarity"]["ccrs_bm25"] == {"type": "BM25", "k1": "1.1", "b": "0.7"}
    assert client.count(index="ccrs-test")["count"] == sample_chunks.num_rows


def test_live_reindexing_is_idempotent(built, sample_chunks):
    config, _ = built
    build_index(config, sample_chunks, None, None)
    client = osi.make_client(config.opensearch)
    assert client.count(index="ccrs-test")["count"] == sample_chunks.num_rows
    build_index(config, sample_chunks, np.zeros((sample_chunks.num_rows, 16), dtype=np.float32), None)


def test_live_bm25_search(built, sample_dataset):
    config, _ = built
    index = open_index(config, None)
    queries = sample_dataset.queries.to_pylist()[:8]
    results = index.search_bm25([q["text"] for q in queries], 20)
    assert len(results) == 8
    found = 0
    for query, hits in zip(queries, results):
        assert 0 < len(hits) <= 20
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        found += any(h.doc_id in query["relevant_doc_ids"] for h in hits)
    assert found >= 6  # real BioASQ questions find their own snippets lexically


def test_live_knn_refusal_is_a_clear_error(built):
    config, _ = built
    with pytest.raises(IndexBackendError, match=r"\[knn\] query is not supported"):
        open_index(config, None).search_knn(np.ones((1, 16), dtype=np.float32), 5)


def test_live_search_on_a_missing_index(opensearch_url):
    config = IndexConfig(backend="opensearch", opensearch=_config(opensearch_url, "no-such-index"))
    with pytest.raises(IndexBackendError, match="no-such-index|no such index|index_not_found"):
        open_index(config, None).search_bm25(["concizumab"], 5)
