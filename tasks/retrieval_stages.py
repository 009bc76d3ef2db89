"""Retrieval stages on Ray: ingest -> chunk -> embed -> index -> retrieve -> retrieval_metrics.

Every stage is content-keyed through tasks/runtime/stage.py (a rerun skips finished stages) and writes its
outputs
under `run_dir/<stage>/`. Single units of work (ingest, index build) are Ray tasks; sharded work (chunk
shards, embedding pieces, query shards) goes to a pool of actors that load their tokenizer, model or index
once: `ordered_map` keeps one call per actor in flight (so at most `max_parallel` / `num_workers` at once),
returns the results in input order and sends a call lost with its worker or node again (Ray restarts the
actor: a lost node costs the calls in flight there, not the stage). Arrow tables and numpy arrays go
through the object store; the driver writes the Parquet files. The embedded index is written by its Ray
task straight into the run directory, so with that backend the run directory must be visible to the workers
(one node, or a shared file system); the OpenSearch backend has no such need.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import ray

from infra.ray_runtime import ensure_ray
from retrievers.backends import build_index, check_index_reachable, index_is_built, open_index
from retrievers.chunking import chunk_passages
from retrievers.config import (
    ChunkingConfig, DatasetConfig, EmbedderConfig, IndexConfig, RetrievalConfig, RetrievalSpec,
)
from retrievers.embedders import load_embedder
from retrievers.loaders import LoadedDataset, load_dataset
from retrievers.methods import RetrievalMethod, needs_vectors, retrieval_method
from retrievers.metrics import DIVERSITY_LAMBDA, per_query_diversity, per_query_metrics, summarize
from retrievers.schema import CHUNKS_SCHEMA, METRICS_SCHEMA, RETRIEVED_SCHEMA
from retrievers.tokenization import load_tokenizer
from retrievers.types import Hit, SearchIndex
from tasks.runtime.stage import (
    StageResult,
    code_version,
    file_fingerprint,
    read_manifest,
    run_stage,
    stage_key,
)
from tasks.runtime.fanout import PlacementWatch, get_placed, lost_worker_errors, resource_shape, wait_any
from tasks.runtime.layout import (
    CHUNK_STAGE,
    CHUNKS_FILE,
    EMBED_STAGE,
    INDEX_STAGE,
    INGEST_STAGE,
    PASSAGES_FILE,
    QUERIES_FILE,
    RETRIEVAL_METRICS_FILE,
    RETRIEVAL_METRICS_STAGE,
    RETRIEVE_STAGE,
    RETRIEVED_FILE,
    VECTORS_FILE,
    QUERY_VECTORS_FILE,
    RunLayout,
)

CODE_VERSION = code_version(__name__)
LIMIT_NAME = "retrieval.schedule_timeout_s"  # named in the one-line failure of an unplaced task or actor
EMBED_PIECE = 1024  # texts per embedding call sent to an actor (progress granularity)
WORKER_CPUS = 1  # logical CPUs of each stage task and actor (docs/cluster.md sizes a head by them)


@dataclass
class RetrievalOutputs:
    queries_path: Path
    passages_path: Path
    chunks_path: Path
    retrieved_path: Path
    retrieval_metrics_path: Path
    metrics_summary: dict[str, dict[str, float]]
    stages: list[StageResult] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- Ray work units (defined once)


@ray.remote(num_cpus=WORKER_CPUS)
def _ingest_task(dataset: DatasetConfig) -> LoadedDataset:
    return load_dataset(dataset)


@ray.remote(num_cpus=WORKER_CPUS)
def _build_index_task(
    index: IndexConfig, chunks: pa.Table, vectors: np.ndarray | None, directory: str
) -> dict:
    return build_index(index, chunks, vectors, Path(directory))


@ray.remote(num_cpus=WORKER_CPUS)
class ChunkerActor:
    """Chunks shards of passages; loads the tokenizer once, on its first shard."""

    def __init__(self, tokenizer: str, size: int, overlap: int) -> None:
        self.tokenizer_spec, self.size, self.overlap = tokenizer, size, overlap
        self.tokenizer = None

    def chunk(self, passages: pa.Table) -> pa.Table:
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_spec)
        return chunk_passages(passages, self.tokenizer, self.size, self.overlap)


@ray.remote(num_cpus=WORKER_CPUS)
class EmbedderActor:
    """Embeds pieces of texts; loads the model once, when the actor starts."""

    def __init__(self, config: EmbedderConfig) -> None:
        self.embedder = load_embedder(config)

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        if kind == "query":
            return self.embedder.embed_queries(texts)
        return self.embedder.embed_passages(texts)


@ray.remote(num_cpus=WORKER_CPUS)
class SearcherActor:
    """Searches shards of queries; opens the index once, on its first shard (so an index that cannot be
    opened fails that call with the backend's own error)."""

    def __init__(self, index: IndexConfig, directory: str) -> None:
        self.config, self.directory = index, directory
        self.index: SearchIndex | None = None

    def search(
        self, method: RetrievalMethod, queries: list[str], vectors: np.ndarray | None, k: int
    ) -> list[list[Hit]]:
        if self.index is None:
            self.index = open_index(self.config, Path(self.directory))
        return method.search(self.index, queries, vectors, k)


# ---------------------------------------------------------------- helpers


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    from infra.console import progress_stream

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, file=progress_stream())


ACTOR_RESTARTS = 3  # an actor whose worker or node dies is restarted (elsewhere) this many times
CALL_ATTEMPTS = 6  # times one item is sent before its stage fails
RESEND_PAUSE_S = 0.5  # after a call was lost with its actor, doubled at each attempt: Ray restarts it


class Actors(list):
    """A pool's actor handles, and what each asks Ray for (`asks`: what ordered_map's wait looks for in the
    cluster's unplaced demand)."""

    def __init__(self, handles: Iterable, asks: dict[str, float], limit_s: float | None = None):
        super().__init__(handles)
        self.asks, self.limit_s = asks, limit_s


@contextmanager
def actor_pool(actor_class, n_actors: int, *args, limit_s: float | None = None, **options) -> Iterator[list]:
    """`n_actors` actors of `actor_class(*args)` started with `options`; killed on exit. The actors hold
    nothing but what they load themselves, so Ray restarts one whose worker or node died (max_restarts).
    `limit_s`: how long their calls may wait for resources Ray cannot place (default SCHEDULE_TIMEOUT_S)."""
    resilient = {"max_restarts": ACTOR_RESTARTS, **options}
    asks = resource_shape(WORKER_CPUS, options.get("num_gpus", 0), options.get("resources"))
    actors = Actors((actor_class.options(**resilient).remote(*args) for _ in range(n_actors)), asks, limit_s)
    try:
        yield actors
    finally:
        for actor in actors:
            ray.kill(actor)


def ordered_map(
    actors: list, call: Callable[[Any, Any], Any], items: Sequence, desc: str, progress: bool
) -> list:
    """`call(actor, item)` for every item with one call per actor in flight (Ray's ActorPool.map, plus
    what it lacks: a call lost with its actor's worker or node is sent again, to an actor Ray restarted
    or another one, up to CALL_ATTEMPTS times; the calls are pure, so a resent one gives the same
    result); results in input order, a progress step per result. Actors that Ray cannot place stop it
    in one line after the pool's limit_s (PlacementWatch: `actors` from actor_pool carry what each asks for
    and how long they may wait)."""
    lost_actor = lost_worker_errors()
    watch = PlacementWatch(f"{desc} actors", getattr(actors, "asks", {}), getattr(actors, "limit_s", None),
                           limit_name=LIMIT_NAME)
    results: list = [None] * len(items)
    queue, idle = deque(range(len(items))), list(actors)
    pending: dict[Any, tuple[int, Any]] = {}
    attempts = [0] * len(items)
    with _progress(len(items), desc, progress) as bar:
        while queue or pending:
            while queue and idle:
                index, actor = queue.popleft(), idle.pop()
                attempts[index] += 1
                pending[call(actor, items[index])] = (index, actor)
            done = wait_any(list(pending), watch)
            index, actor = pending.pop(done[0])
            try:
                results[index] = ray.get(done[0])
            except lost_actor:
                if attempts[index] >= CALL_ATTEMPTS:
                    raise
                idle.insert(0, actor)  # the other actors are asked first while Ray restarts this one
                queue.appendleft(index)
                time.sleep(RESEND_PAUSE_S * 2 ** (attempts[index] - 1))
                continue
            idle.append(actor)
            bar.update(1)
    return results


def _slices(table_or_list, size: int) -> list:
    n = table_or_list.num_rows if isinstance(table_or_list, pa.Table) else len(table_or_list)
    return [table_or_list[start : start + size] for start in range(0, n, size)]


def _n_shards(n_items: int, size: int) -> int:
    return -(-n_items // size)


def gpus_per_embedder(config: EmbedderConfig) -> float:
    """The configured GPUs, else one GPU for a vLLM embedder where the cluster has any (vLLM's CPU build
    runs without)."""
    if config.num_gpus is not None:
        return config.num_gpus
    has_gpus = ray.cluster_resources().get("GPU", 0) > 0
    return 1.0 if config.backend == "vllm" and has_gpus else 0.0


def embed_texts(config: EmbedderConfig, texts: list[str], kind: str, desc: str, progress: bool,
                limit_s: float | None = None) -> np.ndarray:
    """Embeds pieces of `EMBED_PIECE` texts over `config.num_workers` embedder actors."""
    if not texts:
        raise ValueError(f"nothing to embed ({desc}): no texts")
    pieces = _slices(texts, EMBED_PIECE)
    n_actors = min(config.num_workers, len(pieces))
    gpus = gpus_per_embedder(config)
    with actor_pool(EmbedderActor, n_actors, config, num_gpus=gpus, limit_s=limit_s) as pool:
        parts = ordered_map(
            pool, lambda actor, piece: actor.embed.remote(piece, kind), pieces, desc, progress
        )
    return np.concatenate(parts).astype(np.float32)


def chunk_with_ray(passages: pa.Table, chunking: ChunkingConfig, progress: bool,
                   limit_s: float | None = None) -> pa.Table:
    """Chunks shards of `chunking.shard_size` passages over `chunking.max_parallel`
    chunker actors; the chunks come back in passage order."""
    shards = _slices(passages, chunking.shard_size)
    if not shards:
        return CHUNKS_SCHEMA.empty_table()
    n_actors = min(chunking.max_parallel, len(shards))
    args = (chunking.tokenizer, chunking.chunk_tokens, chunking.overlap_tokens)
    with actor_pool(ChunkerActor, n_actors, *args, limit_s=limit_s) as pool:
        tables = ordered_map(pool, lambda actor, shard: actor.chunk.remote(shard), shards, "chunk", progress)
    return pa.concat_tables(tables)


def _embedder_key_config(config: EmbedderConfig) -> dict:
    # Parallelism and placement do not change the vectors.
    return config.model_dump(mode="json", exclude={"num_workers", "num_gpus"})


# ---------------------------------------------------------------- stages


def ingest_stage(run_dir: Path, dataset: DatasetConfig, force: bool,
                 limit_s: float | None = None) -> StageResult:
    path = Path(dataset.path)
    fingerprint = file_fingerprint(path) if path.exists() else "missing"
    key = stage_key(INGEST_STAGE, {"format": dataset.format, "data": fingerprint}, [], CODE_VERSION)

    def work(out: Path) -> dict:
        task = _ingest_task.remote(dataset.model_copy(update={"path": str(path.resolve())}))
        loaded = get_placed(task, "ingest task", resource_shape(WORKER_CPUS), limit_s, LIMIT_NAME)
        pq.write_table(loaded.passages, out / PASSAGES_FILE)
        pq.write_table(loaded.queries, out / QUERIES_FILE)
        return loaded.counts

    return run_stage(run_dir, INGEST_STAGE, key, work, force)


def chunk_stage(
    run_dir: Path, ingest: StageResult, chunking: ChunkingConfig, force: bool, progress: bool,
    limit_s: float | None = None,
) -> StageResult:
    params = chunking.model_dump(mode="json", exclude={"shard_size", "max_parallel"})
    key = stage_key(CHUNK_STAGE, params, [ingest.key], CODE_VERSION)

    def work(out: Path) -> dict:
        passages = pq.read_table(ingest.out_dir / PASSAGES_FILE, columns=["doc_id", "text"])
        chunks = chunk_with_ray(passages, chunking, progress, limit_s)
        _check_unique(chunks.column("chunk_id").to_pylist(), "chunk_id")
        pq.write_table(chunks, out / CHUNKS_FILE)
        return {"n_chunks": chunks.num_rows, "n_shards": _n_shards(passages.num_rows, chunking.shard_size)}

    return run_stage(run_dir, CHUNK_STAGE, key, work, force)


def _check_unique(ids: list[str], name: str) -> None:
    if len(set(ids)) != len(ids):
        duplicates = pd.Series(ids)[pd.Series(ids).duplicated()].unique()[:5]
        raise ValueError(f"duplicate {name}s: {list(duplicates)}")


def embed_stage(
    run_dir: Path, chunk: StageResult, embedder: EmbedderConfig, force: bool, progress: bool,
    limit_s: float | None = None,
) -> StageResult:
    key = stage_key(EMBED_STAGE, _embedder_key_config(embedder), [chunk.key], CODE_VERSION)

    def work(out: Path) -> dict:
        texts = pq.read_table(chunk.out_dir / CHUNKS_FILE, columns=["text"]).column("text").to_pylist()
        vectors = embed_texts(embedder, texts, "passage", "embed", progress, limit_s)
        np.save(out / VECTORS_FILE, vectors)
        return {"n_vectors": int(vectors.shape[0]), "dimension": int(vectors.shape[1])}

    return run_stage(run_dir, EMBED_STAGE, key, work, force)


def index_stage(
    run_dir: Path, chunk: StageResult, embed: StageResult | None, index: IndexConfig, force: bool,
    limit_s: float | None = None,
) -> StageResult:
    upstream = [chunk.key] + ([embed.key] if embed else [])
    key = stage_key(INDEX_STAGE, index, upstream, CODE_VERSION)

    def work(out: Path) -> dict:
        chunks = pq.read_table(chunk.out_dir / CHUNKS_FILE)
        vectors = np.load(embed.out_dir / VECTORS_FILE) if embed else None
        # The task writes into the stage's temporary folder, renamed to run_dir/index when done.
        task = _build_index_task.remote(index, chunks, vectors, str(out.resolve()))
        return get_placed(task, "index build task", resource_shape(WORKER_CPUS), limit_s, LIMIT_NAME)

    index_dir = RunLayout(run_dir).index_dir
    manifest = read_manifest(index_dir)
    if manifest and manifest.get("key") == key and not index_is_built(index, index_dir, manifest["summary"]):
        # e.g. the OpenSearch index was deleted since: rebuild instead of reusing a stale manifest
        force = True
    return run_stage(run_dir, INDEX_STAGE, key, work, force)


def _limited_queries(ingest: StageResult, limit: int | None) -> pa.Table:
    queries = pq.read_table(ingest.out_dir / QUERIES_FILE)
    return queries.slice(0, limit) if limit else queries


def _hit_rows(query_ids: list[str], method: RetrievalMethod, hits: list[list[Hit]]) -> list[dict]:
    return [
        {"query_id": qid, "retriever": method.name, "rank": rank, "chunk_id": h.chunk_id, "doc_id": h.doc_id,
         "score": h.score, "text": h.text}
        for qid, query_hits in zip(query_ids, hits)
        for rank, h in enumerate(query_hits, start=1)
    ]


def search_with_ray(
    pool: list, method: RetrievalMethod, texts: list[str], vectors: np.ndarray | None,
    retrieval: RetrievalConfig, progress: bool,
) -> list[list[Hit]]:
    """Top-k hits per query, in query order: shards of `query_shard_size` queries over the searcher pool."""
    size = retrieval.query_shard_size

    def call(actor, start: int):
        shard_vectors = None if vectors is None else vectors[start : start + size]
        return actor.search.remote(method, texts[start : start + size], shard_vectors, retrieval.top_k)

    starts = list(range(0, len(texts), size))
    shards = ordered_map(pool, call, starts, f"retrieve {method.name}", progress)
    return [hits for shard in shards for hits in shard]


def retrieve_stage(run_dir: Path, ingest: StageResult, index_result: StageResult, spec: RetrievalSpec,
                   force: bool, progress: bool) -> StageResult:
    dataset, embedder, retrieval = spec.dataset, spec.embedder, spec.retrieval
    limit_s = retrieval.schedule_timeout_s
    params = {"limit": dataset.limit, "retrievers": retrieval.retrievers, "top_k": retrieval.top_k,
              "embedder": _embedder_key_config(embedder) if needs_vectors(retrieval.retrievers) else None}
    key = stage_key(RETRIEVE_STAGE, params, [ingest.key, index_result.key], CODE_VERSION)

    def work(out: Path) -> dict:
        queries = _limited_queries(ingest, dataset.limit)
        pq.write_table(queries, out / QUERIES_FILE)
        query_ids = queries.column("query_id").to_pylist()
        texts = queries.column("text").to_pylist()
        methods = [retrieval_method(name) for name in retrieval.retrievers]
        query_vectors = None
        if any(method.needs_vectors for method in methods):
            query_vectors = embed_texts(embedder, texts, "query", "embed queries", progress, limit_s)
            np.save(out / QUERY_VECTORS_FILE, query_vectors)
        rows: list[dict] = []
        n_actors = min(retrieval.max_parallel, _n_shards(len(texts), retrieval.query_shard_size))
        index_dir = str(index_result.out_dir)
        with actor_pool(SearcherActor, n_actors, spec.index, index_dir, limit_s=limit_s) as pool:
            for method in methods:
                vectors = query_vectors if method.needs_vectors else None
                hits = search_with_ray(pool, method, texts, vectors, retrieval, progress)
                rows += _hit_rows(query_ids, method, hits)
        pq.write_table(pa.Table.from_pylist(rows, schema=RETRIEVED_SCHEMA), out / RETRIEVED_FILE)
        return {"n_queries": len(query_ids), "n_retrieved": len(rows)}

    return run_stage(run_dir, RETRIEVE_STAGE, key, work, force)


def metrics_stage(
    run_dir: Path, retrieve: StageResult, retrieval: RetrievalConfig, force: bool,
    chunk: StageResult | None = None, embed: StageResult | None = None,
) -> StageResult:
    """ir-measures against the relevant documents, and (where the run embedded its chunks and queries, i.e.
    a dense retriever ran) the GQM thesis' semantic diversity of each query's top-k chunks."""
    upstream = [retrieve.key] + ([embed.key] if embed else [])
    key = stage_key(RETRIEVAL_METRICS_STAGE, {"top_k": retrieval.top_k, "diversity_lambda": DIVERSITY_LAMBDA},
                    upstream, CODE_VERSION)

    def work(out: Path) -> dict:
        queries = pq.read_table(retrieve.out_dir / QUERIES_FILE).to_pandas()
        retrieved = pq.read_table(retrieve.out_dir / RETRIEVED_FILE).to_pandas()
        per_query = per_query_metrics(queries, retrieved, retrieval.top_k, list(retrieval.retrievers))
        n_judged = int(per_query["query_id"].nunique())
        diversity = _diversity(queries, retrieved, retrieve, chunk, embed, retrieval)
        per_query = pd.concat([per_query, diversity], ignore_index=True) if len(diversity) else per_query
        table = pa.Table.from_pandas(per_query, schema=METRICS_SCHEMA, preserve_index=False)
        pq.write_table(table, out / RETRIEVAL_METRICS_FILE)
        return {"summary": summarize(per_query), "n_judged_queries": n_judged,
                "semantic_diversity": "computed" if len(diversity) else "no embeddings (no dense retriever)"}

    return run_stage(run_dir, RETRIEVAL_METRICS_STAGE, key, work, force)


def _diversity(queries: pd.DataFrame, retrieved: pd.DataFrame, retrieve: StageResult,
               chunk: StageResult | None, embed: StageResult | None,
               retrieval: RetrievalConfig) -> pd.DataFrame:
    """Semantic diversity rows, from the embed stage's chunk vectors (memory-mapped: only the retrieved
    rows are read) and the retrieve stage's query vectors; empty where either is absent."""
    query_file = retrieve.out_dir / QUERY_VECTORS_FILE
    if chunk is None or embed is None or not query_file.exists():
        return pd.DataFrame(columns=["query_id", "retriever", "measure", "value"])
    chunk_ids = pq.read_table(chunk.out_dir / CHUNKS_FILE, columns=["chunk_id"])["chunk_id"].to_pylist()
    vectors = np.load(embed.out_dir / VECTORS_FILE, mmap_mode="r")
    query_vectors = dict(zip(queries["query_id"].astype(str), np.load(query_file)))
    rows = {str(c): i for i, c in enumerate(chunk_ids)}
    return per_query_diversity(query_vectors, retrieved, vectors, rows, retrieval.top_k,
                               list(retrieval.retrievers))


# ---------------------------------------------------------------- entry point


@dataclass
class IndexOutputs:
    passages_path: Path
    chunks_path: Path
    index_dir: Path
    stages: list[StageResult]
    counts: dict[str, int]


def _index_stages(run_dir: Path, spec: RetrievalSpec, force: bool, progress: bool) -> list:
    """The stages before retrieve (Ray started when it is not), in `run_dir`."""
    ensure_ray()
    run_dir.mkdir(parents=True, exist_ok=True)
    limit_s = spec.retrieval.schedule_timeout_s
    ingest = ingest_stage(run_dir, spec.dataset, force, limit_s)
    chunk = chunk_stage(run_dir, ingest, spec.chunking, force, progress, limit_s)
    vectors = needs_vectors(spec.retrieval.retrievers)
    embed = embed_stage(run_dir, chunk, spec.embedder, force, progress, limit_s) if vectors else None
    built = index_stage(run_dir, chunk, embed, spec.index, force, limit_s)
    return [ingest, chunk, embed, built]


def build_retrieval_index(run_dir: Path, spec: RetrievalSpec, force: bool = False,
                          progress: bool = True) -> IndexOutputs:
    """Ingest, chunk, embed (when a retriever needs vectors, e.g. k-NN) and index; finished stages are
    reused."""
    run_dir = Path(run_dir)
    ingest, chunk, embed, built = _index_stages(run_dir, spec, force, progress)
    counts = {**ingest.summary, "n_chunks": chunk.summary["n_chunks"]}
    stages = [s for s in (ingest, chunk, embed, built) if s is not None]
    layout = RunLayout(run_dir)
    return IndexOutputs(layout.passages, layout.chunks, layout.index_dir, stages, counts)


def retrieve_texts(run_dir: Path, spec: RetrievalSpec, texts: list[str], top_k: int,
                   progress: bool = True) -> dict[str, list[list[Hit]]]:
    """A run's own retrievers on query texts of the caller's (not the dataset's questions): the index
    stages as the run builds them (finished ones reused), the queries embedded by the run's embedder when
    a method needs vectors, then each configured method's top-k per text, by method name. VERA topicality
    (pipelines/tools/vera/topicality.py) retrieves its query sets through it."""
    if not texts:
        raise ValueError("retrieve_texts: no query texts")
    built = build_retrieval_index(run_dir, spec, progress=progress)
    methods = [retrieval_method(name) for name in spec.retrieval.retrievers]
    vectors = None
    if any(method.needs_vectors for method in methods):
        vectors = embed_texts(spec.embedder, texts, "query", "embed queries", progress,
                              spec.retrieval.schedule_timeout_s)
    search = spec.retrieval.model_copy(update={"top_k": top_k})
    n_actors = min(search.max_parallel, _n_shards(len(texts), search.query_shard_size))
    with actor_pool(SearcherActor, n_actors, spec.index, str(built.index_dir),
                    limit_s=spec.retrieval.schedule_timeout_s) as pool:
        return {method.name: search_with_ray(pool, method, texts, vectors if method.needs_vectors else None,
                                             search, progress)
                for method in methods}


def preflight_index(index: IndexConfig) -> None:
    """Before any work: the index service answers (OpenSearch), else a clear error naming its address."""
    check_index_reachable(index)


def run_retrieval(run_dir: Path, spec: RetrievalSpec, force: bool = False,
                  progress: bool = True) -> RetrievalOutputs:
    """Ingest, chunk, embed, index, retrieve top-k and score retrieval; finished stages are reused."""
    run_dir = Path(run_dir)
    ingest, chunk, embed, built = _index_stages(run_dir, spec, force, progress)
    retrieve = retrieve_stage(run_dir, ingest, built, spec, force, progress)
    metrics = metrics_stage(run_dir, retrieve, spec.retrieval, force, chunk, embed)
    stages = [s for s in (ingest, chunk, embed, built, retrieve, metrics) if s is not None]
    counts = {
        **ingest.summary,
        "n_queries_total": ingest.summary.get("n_queries", 0),
        "n_queries": retrieve.summary["n_queries"],
        "n_chunks": chunk.summary["n_chunks"],
        "n_retrieved": retrieve.summary["n_retrieved"],
        "n_judged_queries": metrics.summary["n_judged_queries"],
    }
    layout = RunLayout(run_dir)
    return RetrievalOutputs(
        queries_path=retrieve.out_dir / QUERIES_FILE,
        passages_path=layout.passages,
        chunks_path=layout.chunks,
        retrieved_path=retrieve.out_dir / RETRIEVED_FILE,
        retrieval_metrics_path=layout.retrieval_metrics,
        metrics_summary=metrics.summary["summary"],
        stages=stages,
        counts=counts,
    )
