"""Node loss on a real multi-node Ray cluster, run in a process of its own (a driver joins one Ray cluster
at a time, and the test session's Ray holds the CPU LLM server):

    python -m tests.tasks.multinode_scenario WORK_DIR   (writes WORK_DIR/judge.json, WORK_DIR/retrieval.json)

The cluster is a head (0 CPUs) and two worker nodes on this machine (`ray.cluster_utils.Cluster`: a raylet
each, each worker with its own CPU count and a custom resource), started once for both scenarios (its start
is seconds of a 2-core CI machine). `judge`: the judge stage, with shards asking for the workers' resource,
against the SIMULATED judge of benchmarks/llm_simulator.py (the CPU model server cannot fit in a second Ray
cluster beside the session's; the simulator answers each request with a score derived from its body, so two
runs must agree exactly) runs undisturbed, then again while one worker node is removed a third into the
second of its three batches. `retrieval`, on the surviving worker and a new one added in place of the
removed one: the chunk stage's actors (spread over both workers) chunks the BioASQ sample undisturbed, then
again while the node of some of its actors is removed mid-map. Each writes what its test checks.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import ray
from ray.cluster_utils import Cluster

REPO = Path(__file__).resolve().parents[2]
WORKER_RESOURCE = "ccrs_test_worker"
SYSTEMS = ("bm25", "knn")


# The GCS declares a node dead after this many failed health checks, one a second (Ray's default: 5, one
# every 3 s): a removed node's shards are sent again seconds after it went, not ~15 s (CI time). A check
# fails at once on a node whose raylet is gone; a live but busy one has Ray's 10 s per check to answer.
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


def start_cluster() -> tuple[Cluster, list]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "_system_config": HEALTH_CHECKS})
    forget_cluster_address()
    workers = [cluster.add_node(num_cpus=4, resources={WORKER_RESOURCE: 100}) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster, workers


def forget_cluster_address() -> None:
    """Cluster records its address in /tmp/ray/ray_current_cluster, where any `ray.init()` on this machine
    would find it and join this test cluster (a test session's own Ray start among them): removed at once,
    the driver here connects by the address it holds."""
    from ray._common.utils import reset_ray_address

    reset_ray_address()


def start_simulator(work: Path, latency_ms: float) -> tuple[subprocess.Popen, str]:
    port_file = work / "simulator.port"
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "llm_simulator.py"),
                             "--latency-ms", str(latency_ms), "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text()):
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the LLM simulator did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


def judge_inputs(directory: Path) -> tuple[Path, Path, Path]:
    """12 real BioASQ questions, their gold snippets as both retrievers' chunks, and 6 systems' answers
    (3 extractive readers of 1-3 sentences x 2 retrievers)."""
    from judges.readers import extractive_answer
    from tasks.generate import system_label
    from tests.conftest import write_bioasq_inputs

    queries_path, retrieved_path = write_bioasq_inputs(directory, limit=12, chunks_per_query=3)
    queries, retrieved = pd.read_parquet(queries_path), pd.read_parquet(retrieved_path)
    rows = []
    for reader in range(3):
        for retriever in SYSTEMS:
            for query in queries.itertuples():
                mine = (retrieved.query_id == query.query_id) & (retrieved.retriever == retriever)
                chunks = retrieved[mine]
                rows.append({"query_id": query.query_id, "system": system_label(reader, retriever),
                             "retriever": retriever, "reader": f"extractive-{reader + 1}",
                             "answer": extractive_answer(query.text, list(chunks.text), reader + 1),
                             "n_chunks_used": len(chunks), "status": "ok", "error": None})
    generations_path = directory / "generations.parquet"
    pd.DataFrame(rows).to_parquet(generations_path, index=False)
    return queries_path, retrieved_path, generations_path


class NodeRemover(threading.Thread):
    """Removes `node` from the cluster once `threshold` judgments are checkpointed under `run_dir`."""

    def __init__(self, cluster: Cluster, node, run_dir: Path, threshold: int):
        super().__init__(daemon=True)
        self.cluster, self.node, self.run_dir, self.threshold = cluster, node, run_dir, threshold
        self.removed_at: int | None = None

    def checkpointed(self) -> int:
        return sum(f.read_bytes().count(b"\n") for f in self.run_dir.glob(".*.partial/**/*.jsonl"))

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            seen = self.checkpointed()
            if seen >= self.threshold:
                self.cluster.remove_node(self.node, allow_graceful=False)
                self.removed_at = seen
                return
            time.sleep(0.02)


def judge_scenario(work: Path, cluster: Cluster, workers: list) -> dict:
    from judges.config import ClientConfig, JudgeConfig
    from tasks.judge import run_judging
    from judges.suite import metric_order, suite_membership
    from tasks.reduce import run_reduce

    # answers in 100 ms: a shard (one question x retriever: 15 judgments, 2 at a time) takes ~1 s, so shards
    # are in flight on the node when it goes (300 ms: ~2.4 s a shard, CI time)
    simulator, base_url = start_simulator(work, latency_ms=100)
    try:
        inputs = judge_inputs(work / "inputs")
        judge = JudgeConfig(model="simulated-judge", cache=False)
        client = ClientConfig(max_concurrency=12, shard_size=6, max_shards_in_flight=6, batch_samples=24,
                              shard_resources={WORKER_RESOURCE: 1})
        runs = {}
        for name in ("calm", "storm"):
            remover = None
            if name == "storm":
                # a third into the second of three batches of 120 judgments: shards are in flight
                remover = NodeRemover(cluster, workers[0], work / name, threshold=150)
                remover.start()
            out = run_judging(work / name, "ccrs", *inputs, judge, client, base_url, top_k=3, progress=False)
            if remover is not None:
                remover.join()
            stats = run_reduce(work / name, [out.scores_path], b=200, seed=0, alpha=0.05,
                               metric_order=metric_order(), suites=suite_membership())
            runs[name] = {"summary": out.summary, "judgments": pd.read_parquet(out.judgments_path),
                          "stats": json.loads((stats.out_dir / "stats.json").read_text())["per_metric"]}
        keys = ["query_id", "system", "metric", "status", "llm_score", "score"]
        calm, storm = runs["calm"]["judgments"][keys], runs["storm"]["judgments"][keys]
        return {
            "worker_nodes": [node.node_id for node in workers],
            "removed_node": workers[0].node_id,
            "removed_at_records": remover.removed_at,
            "requests": {name: run["summary"]["requests"] for name, run in runs.items()},
            "batches": runs["storm"]["summary"]["batches"],
            "rows": len(storm),
            "duplicated": int(storm.duplicated(["query_id", "system", "metric"]).sum()),
            "ok": int((storm["status"] == "ok").sum()),
            "same_judgments": calm.equals(storm),
            "same_stats": runs["calm"]["stats"] == runs["storm"]["stats"],
            "stats": runs["storm"]["stats"],
        }
    finally:
        simulator.terminate()


def retrieval_scenario(cluster: Cluster, workers: list) -> dict:
    from retrievers.config import ChunkingConfig, DatasetConfig
    from retrievers.loaders import load_dataset
    from tasks.retrieval_stages import ChunkerActor, _slices, actor_pool, chunk_with_ray, ordered_map

    passages = load_dataset(DatasetConfig(path=str(REPO / "data" / "bioasq-sample"))).passages
    chunking = ChunkingConfig(shard_size=10, max_parallel=4)
    calm = chunk_with_ray(passages, chunking, progress=False)
    shards = _slices(passages, chunking.shard_size)
    args = (chunking.tokenizer, chunking.chunk_tokens, chunking.overlap_tokens)
    with actor_pool(ChunkerActor, 4, *args, scheduling_strategy="SPREAD") as pool:
        actors = pool
        homes = ray.get([a.__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id())
                         for a in actors])
        calls = []

        def call(actor, shard):
            calls.append(1)
            if len(calls) == len(shards) // 3:
                cluster.remove_node(workers[0], allow_graceful=False)
            return actor.chunk.remote(shard)

        storm = pd.concat([t.to_pandas() for t in ordered_map(pool, call, shards, "chunk", False)])
    return {
        "shards": len(shards),
        "actors_on_removed_node": homes.count(workers[0].node_id),
        "actors_on_other_worker": homes.count(workers[1].node_id),
        "same_chunks": calm.to_pandas().reset_index(drop=True).equals(storm.reset_index(drop=True)),
        "chunks": len(storm),
    }


def main() -> int:
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    cluster, workers = start_cluster()
    try:
        judge = judge_scenario(work, cluster, workers)
        (work / "judge.json").write_text(json.dumps(judge, indent=2, default=str))
        # the judge scenario removed workers[0]: a new worker node takes its place (the first removed here)
        workers = [cluster.add_node(num_cpus=4, resources={WORKER_RESOURCE: 100}), workers[1]]
        cluster.wait_for_nodes()
        retrieval = retrieval_scenario(cluster, workers)
        (work / "retrieval.json").write_text(json.dumps(retrieval, indent=2, default=str))
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
