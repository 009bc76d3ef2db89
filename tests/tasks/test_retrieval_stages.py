from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from retrievers.config import (
    ChunkingConfig, DatasetConfig, EmbedderConfig, IndexConfig, OpenSearchConfig, RetrievalConfig,
    RetrievalSpec,
)
from retrievers.schema import CHUNKS_SCHEMA, QUERIES_SCHEMA, RETRIEVED_SCHEMA, DatasetError
from tasks.retrieval_stages import build_retrieval_index, run_retrieval
from tests.conftest import write_bioasq_subset

# the shipped sample's first 8 questions and their snippets (all 32: 685 passages, 3.6x the embedding)
QUESTIONS, PASSAGES = 8, 189
SAMPLE: Path | None = None  # their dataset folder, written once for the module (_sample)
MEASURES = {"R@20", "P@20", "RR@20", "nDCG@20"}


@pytest.fixture(scope="module", autouse=True)
def _sample(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "SAMPLE",
                      write_bioasq_subset(tmp_path_factory.mktemp("sample"), QUESTIONS))
        yield


def sample_spec(**blocks) -> RetrievalSpec:
    """The default retrieval over the shipped BioASQ sample, with the blocks given replaced."""
    return RetrievalSpec(**{"dataset": DatasetConfig(path=str(SAMPLE)), **blocks})


def _run(run_dir, force=False, **blocks):
    return run_retrieval(run_dir, sample_spec(**blocks), force=force, progress=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, ray_session) -> Path:
    return tmp_path_factory.mktemp("retrieval-run")


@pytest.fixture(scope="module")
def first_run(run_dir):
    outputs = _run(run_dir)
    # A copy of the retrieved rows: later tests rerun `retrieve` in the same run directory.
    return outputs, pd.read_parquet(outputs.retrieved_path)


@pytest.fixture(scope="module")
def first(first_run):
    return first_run[0]


@pytest.fixture(scope="module")
def first_retrieved(first_run) -> pd.DataFrame:
    return first_run[1]


def test_outputs(first):
    queries = pq.read_table(first.queries_path)
    assert queries.schema == QUERIES_SCHEMA and queries.num_rows == QUESTIONS
    assert pq.read_table(first.chunks_path).schema == CHUNKS_SCHEMA
    retrieved = pq.read_table(first.retrieved_path)
    assert retrieved.schema == RETRIEVED_SCHEMA
    frame = retrieved.to_pandas()
    assert set(frame.retriever) == {"bm25", "knn"}
    for (_, retriever), group in frame.groupby(["query_id", "retriever"]):
        assert list(group["rank"]) == list(range(1, len(group) + 1))
        # k-NN ranks the whole corpus; BM25 only passages sharing a term with the question (score > 0)
        assert len(group) == 20 if retriever == "knn" else 0 < len(group) <= 20 and group["score"].gt(0).all()
        assert group["score"].is_monotonic_decreasing
    metrics = pd.read_parquet(first.retrieval_metrics_path)
    assert list(metrics.columns) == ["query_id", "retriever", "measure", "value"]
    assert len(metrics) == QUESTIONS * 2 * 5  # four ir-measures and the semantic diversity (k-NN ran)
    assert set(first.metrics_summary) == {"bm25", "knn"}
    assert set(first.metrics_summary["knn"]) == MEASURES | {"SD@20"}
    assert all(0.0 <= v <= 1.0 for values in first.metrics_summary.values() for v in values.values())
    assert first.counts["n_queries"] == QUESTIONS and first.counts["n_passages"] == PASSAGES
    assert first.counts["n_empty_skipped"] == 0 and first.counts["n_chunks"] >= PASSAGES
    assert [s.name for s in first.stages] == [
        "ingest", "chunk", "embed", "index", "retrieve", "retrieval_metrics"
    ]


def test_retrieval_finds_relevant_snippets(first):
    # Both retrievers find most of the questions' own snippets among the corpus of all their snippets.
    for retriever in ("bm25", "knn"):
        assert first.metrics_summary[retriever]["RR@20"] > 0.5


def test_rerun_reuses_every_stage(run_dir, first):
    again = _run(run_dir)
    assert all(stage.reused for stage in again.stages)
    assert again.metrics_summary == first.metrics_summary


def test_limit_reruns_only_retrieval(run_dir, first, tmp_path):
    import shutil

    # on a copy: the module's run folder (and `first`'s files in it) stay as the other tests expect them
    run_dir = shutil.copytree(run_dir, tmp_path / "run")
    limited = _run(run_dir, dataset=DatasetConfig(path=str(SAMPLE), limit=4))
    reused = {stage.name: stage.reused for stage in limited.stages}
    assert reused == {"ingest": True, "chunk": True, "embed": True, "index": True, "retrieve": False,
                      "retrieval_metrics": False}
    assert pq.read_table(limited.queries_path).num_rows == 4
    assert limited.counts["n_passages"] == first.counts["n_passages"]  # distractors stay
    retrieved = pd.read_parquet(limited.retrieved_path)
    assert retrieved.query_id.nunique() == 4
    assert json.loads((run_dir / "retrieve" / "_STAGE.json").read_text())["summary"]["n_queries"] == 4


def test_bm25_only_skips_embedding_and_chunk_ids_are_stable(tmp_path, first, ray_session):
    built = build_retrieval_index(tmp_path, sample_spec(retrieval=RetrievalConfig(retrievers=["bm25"])),
                                  progress=False)
    assert [s.name for s in built.stages] == ["ingest", "chunk", "index"]
    assert pq.read_table(built.chunks_path).equals(pq.read_table(first.chunks_path))


def test_many_shards_over_actor_pools_keep_input_order(tmp_path, first, first_retrieved, ray_session):
    """Chunk shards of 100 passages and query shards of 5 over two actors each: ordered_map returns the
    shards in input order, so chunks and retrieved rows equal the one-shard run's."""
    sharded = _run(
        tmp_path, chunking=ChunkingConfig(shard_size=100, max_parallel=2),
        retrieval=RetrievalConfig(retrievers=["bm25"], query_shard_size=5, max_parallel=2),
    )
    assert sharded.stages[1].summary == {"n_chunks": first.counts["n_chunks"], "n_shards": 2}
    assert pq.read_table(sharded.chunks_path).equals(pq.read_table(first.chunks_path))
    retrieved = pd.read_parquet(sharded.retrieved_path)
    expected = first_retrieved[first_retrieved.retriever == "bm25"].reset_index(drop=True)
    pd.testing.assert_frame_equal(retrieved, expected)
    # the same ir-measures; SD@20 needs embeddings, which only the first run (with k-NN) made
    assert sharded.metrics_summary["bm25"] == {m: v for m, v in first.metrics_summary["bm25"].items()
                                               if not m.startswith("SD@")}


def test_embedding_pieces_over_two_actors_keep_input_order(first, ray_session, monkeypatch):
    import numpy as np

    import tasks.retrieval_stages as stages

    texts = pq.read_table(first.chunks_path, columns=["text"]).column("text").to_pylist()[:96]
    monkeypatch.setattr(stages, "EMBED_PIECE", 16)
    vectors = stages.embed_texts(EmbedderConfig(num_workers=2), texts, "passage", "embed", progress=False)
    reference = np.load(first.chunks_path.parents[1] / "embed" / stages.VECTORS_FILE)[:96]
    assert vectors.dtype == np.float32 and vectors.shape == reference.shape
    np.testing.assert_allclose(vectors, reference, atol=1e-5)


def test_force_recomputes(tmp_path, ray_session):
    retrieval = RetrievalConfig(retrievers=["bm25"], top_k=5)
    _run(tmp_path, retrieval=retrieval)
    forced = _run(tmp_path, retrieval=retrieval, force=True)
    assert not any(stage.reused for stage in forced.stages)


def test_opensearch_backend_bm25_against_osmem(tmp_path, ray_session):
    from osmem_server import OsmemServer

    with OsmemServer.start(freeze=False, japanese=False, addr="127.0.0.1:0") as server:
        index = IndexConfig(backend="opensearch",
                            opensearch=OpenSearchConfig(hosts=[server.url], index_name="ccrs-stage"))
        outputs = _run(tmp_path, index=index, retrieval=RetrievalConfig(retrievers=["bm25"]))
        server.request("DELETE", "/ccrs-stage")
        rebuilt = _run(tmp_path, index=index, retrieval=RetrievalConfig(retrievers=["bm25"]))
    # The index vanished from the server: the rerun rebuilt it instead of trusting the manifest.
    assert {s.name: s.reused for s in rebuilt.stages}["index"] is False
    retrieved = pd.read_parquet(outputs.retrieved_path)
    assert set(retrieved.retriever) == {"bm25"} and retrieved.query_id.nunique() == QUESTIONS
    assert outputs.metrics_summary["bm25"]["RR@20"] > 0.5


def test_dataset_errors_surface(tmp_path, ray_session):
    bad = tmp_path / "bad.json"
    bad.write_text('{"questions": [{"id": "x"}]}')
    with pytest.raises(DatasetError, match="bad.json, question 0: missing field 'body'"):
        _run(tmp_path / "run", dataset=DatasetConfig(path=str(bad)))


def test_gpus_per_embedder(ray_session):
    import ray

    from tasks.retrieval_stages import gpus_per_embedder

    has_gpus = ray.cluster_resources().get("GPU", 0) > 0
    assert gpus_per_embedder(EmbedderConfig()) == 0.0
    assert gpus_per_embedder(EmbedderConfig(backend="vllm")) == (1.0 if has_gpus else 0.0)
    assert gpus_per_embedder(EmbedderConfig(backend="vllm", num_gpus=0.5)) == 0.5


def test_opensearch_down_at_start_is_named_before_any_work(tmp_path):
    import socket

    from retrievers.types import IndexBackendError
    from tasks.retrieval_stages import preflight_index

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    index = IndexConfig(backend="opensearch", opensearch=OpenSearchConfig(hosts=[url], timeout_s=2))
    with pytest.raises(IndexBackendError, match=f"OpenSearch at {url} is unreachable"):
        preflight_index(index)
    preflight_index(IndexConfig())  # the embedded index has nothing to reach


def test_opensearch_down_mid_run_keeps_finished_stages_and_the_rerun_rebuilds(
    tmp_path, ray_session, monkeypatch, request
):
    """The server dies after the index is built: the search fails naming the address, the finished
    ingest/chunk/index stages stay on disk; a new (empty, in-memory) server on the same address gets the
    index rebuilt on the rerun, which then finishes with the same retrieval results."""
    from osmem_server import OsmemServer

    import tasks.retrieval_stages as stages
    from retrievers.types import IndexBackendError

    server = OsmemServer.start(freeze=False, japanese=False, addr="127.0.0.1:0")
    request.addfinalizer(server.close)  # stopped even when the test fails before the planned outage
    address = server.url.removeprefix("http://")
    index = IndexConfig(backend="opensearch",
                        opensearch=OpenSearchConfig(hosts=[server.url], index_name="ccrs-outage",
                                                    timeout_s=5))
    retrieval = RetrievalConfig(retrievers=["bm25"])
    real_index_stage = stages.index_stage

    def index_then_outage(*args, **kwargs):
        result = real_index_stage(*args, **kwargs)
        server.close()
        return result

    monkeypatch.setattr(stages, "index_stage", index_then_outage)
    with pytest.raises(IndexBackendError, match=f"OpenSearch at {server.url}"):
        _run(tmp_path, dataset=DatasetConfig(path=str(SAMPLE), limit=4), index=index, retrieval=retrieval)
    for name in ("ingest", "chunk", "index"):
        assert (tmp_path / name / "_STAGE.json").exists()
    assert not (tmp_path / "retrieve").exists()
    monkeypatch.undo()

    with OsmemServer.start(freeze=False, japanese=False, addr=address):
        rerun = _run(tmp_path, dataset=DatasetConfig(path=str(SAMPLE), limit=4), index=index,
                     retrieval=retrieval)
    reused = {s.name: s.reused for s in rerun.stages}
    assert reused["ingest"] and reused["chunk"] and not reused["index"]
    retrieved = pd.read_parquet(rerun.retrieved_path)
    assert retrieved.query_id.nunique() == 4 and set(retrieved.retriever) == {"bm25"}


def test_retrieve_texts_searches_other_queries_with_the_runs_own_retrievers(run_dir, first, first_retrieved):
    """VERA topicality's path: texts that are not the dataset's questions go through the run's index and
    methods (index stages reused); a dataset question gets exactly the retrieve stage's top-k."""
    from tasks.retrieval_stages import retrieve_texts

    question = pq.read_table(first.queries_path).slice(0, 1).to_pylist()[0]
    texts = [question["text"], "Who won the 1998 FIFA World Cup final?"]
    manifest = (run_dir / "index" / "_STAGE.json").read_text()
    hits = retrieve_texts(run_dir, sample_spec(), texts, 3, progress=False)
    assert (run_dir / "index" / "_STAGE.json").read_text() == manifest  # the run's index, not a new one
    assert list(hits) == ["bm25", "knn"] and all(len(rows) == 2 for rows in hits.values())
    for retriever, rows in hits.items():
        expected = first_retrieved[(first_retrieved.query_id == question["query_id"])
                                   & (first_retrieved.retriever == retriever)].head(3)
        assert [h.chunk_id for h in rows[0]] == expected["chunk_id"].tolist()
        assert len(rows[1]) == 3
    # the off-topic query is farther from the repository than the question (cosine of the k-NN hits)
    assert hits["knn"][1][0].score < hits["knn"][0][0].score


def test_a_stage_whose_actors_ray_cannot_place_stops_at_retrieval_schedule_timeout_s(tmp_path, ray_session,
                                                                                     monkeypatch):
    """The retrieval stages wait on their actors for `retrieval.schedule_timeout_s`, named in the one line:
    chunk actors asking for a resource no node has stay unplaced."""
    from tasks import retrieval_stages as stages
    from tasks.runtime import fanout

    monkeypatch.setattr(fanout, "WAIT_REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(fanout, "DEMAND_READ_EVERY_S", 0.5)
    monkeypatch.setattr(fanout, "_say", lambda text: None)
    real_pool = stages.actor_pool
    monkeypatch.setattr(stages, "actor_pool", lambda *args, **options: real_pool(
        *args, **{**options, "resources": {"no_such_node": 1}}))
    spec = sample_spec(retrieval=RetrievalConfig(retrievers=["bm25"], schedule_timeout_s=3))
    with pytest.raises(fanout.UnplacedTasksError, match=r"within retrieval\.schedule_timeout_s=3s"):
        build_retrieval_index(tmp_path / "unplaced", spec, progress=False)
