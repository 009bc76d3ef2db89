"""Paper-scale orchestration of the judge stage, against a SIMULATED judge (benchmarks/llm_simulator.py).

    .venv/bin/python benchmarks/bench_orchestration.py --requests 141570 707850 [--nodes 1 3] --json OUT
        [--latency-ms 0]

What runs is the real judge stage (`tasks.judge.run_judging`: planning, judgment cache, Ray fan-out with
bounded concurrency, per-shard `StageCheckpoint`, output writing and the completeness check); only the
endpoint is simulated, so the figures are the cost of our orchestration, not of a model. Inputs are the
paper's proportions: N/5 (question, system) samples = questions x 6 systems (3 readers x 2 retrievers),
5 CCRS metrics each, top-20 contexts of ~300-token chunks, built from the real BioASQ 12b golden files
(/work/shared/data/bioasq-12b, or the committed sample): question copies beyond the 255 real ones get
other chunks, so every prompt (and cache key) is distinct. Judge and client settings are those of
configs/paper-bioasq.yaml (the 70B judge's tokenizer is not available offline, so prompt lengths use the
stage's character estimate, as a run of that config does here).

For each size (`--requests N ...`) and cluster size (`--nodes K ...`), in turn, two runs of the stage, each
in its own process (own Ray) and with an empty judgment cache:
1. uninterrupted: wall time, requests/s, peak RSS of the driver and of the Ray workers;
2. killed with SIGKILL (its whole process group: driver, raylets, workers) once ~50% of the requests are
   checkpointed, then resumed: `resume_s` is the resumed process's wall time; the output is checked
   for lost and duplicated judgments (exactly one row per (query, system, metric)), and its scores
   against the uninterrupted run's.
With K > 1 the stage's process starts a Ray cluster of a head and K - 1 worker nodes on this machine
(`ray.cluster_utils.Cluster`: one raylet each), and the shards ask for a resource only the worker nodes
offer (ClientConfig.shard_resources), so the fan-out runs on them; `shards_by_node` counts where.
`--json OUT` writes {"runs": [one entry per size x K, the contract's keys first], plus the first run's
figures at the top level}.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from shared import BIOASQ_SAMPLE, sample_field  # noqa: E402 - the sample and its literal fields, as the tests read them
BIOASQ_DIRS = (Path("/work/shared/data/bioasq-12b"), REPO.parent / "shared" / "data" / "bioasq-12b")
PAPER_REQUESTS = 4719 * 6 * 5
TOP_K = 20
CHUNK_CHARS = 900  # ~300 tokens by the stage's estimate (3 characters a token)
CORPUS_CHUNKS = 40221
STAGE_NAME = "judge_ccrs"


# --- inputs ------------------------------------------------------------------------------------------

def _bioasq_questions() -> list[dict]:
    for directory in BIOASQ_DIRS:
        files = sorted(directory.glob("*.json")) if directory.is_dir() else []
        if files:
            return [q for f in files for q in json.loads(f.read_text())["questions"]]
    return json.loads(BIOASQ_SAMPLE.read_text())["questions"]


def _chunk_pool(questions: list[dict], size: int) -> list[str]:
    """`size` distinct ~300-token chunks (about the 40,221 passages of rag-mini-bioasq): real snippets
    joined until CHUNK_CHARS, starting at every snippet in turn, then in rotated order."""
    snippets = [s["text"] for q in questions for s in sample_field(q.get("snippets") or [])]
    pool: list[str] = []
    for rotation in range(math.ceil(size / len(snippets))):
        for start in range(len(snippets)):
            parts, length, j = [], 0, start
            while length < CHUNK_CHARS:
                parts.append(snippets[j % len(snippets)])
                length += len(parts[-1]) + 1
                j += 1
            k = rotation % len(parts)
            pool.append(" ".join(parts[k:] + parts[:k]))
            if len(pool) == size:
                return pool
    return pool


def build_inputs(directory: Path, requests: int, metrics: int) -> tuple[Path, Path, Path, int]:
    """queries, retrieved and generations parquet files for `requests` judge requests (rounded up to
    whole (question, system) samples); returns the paths and the exact number of requests."""
    import pandas as pd

    from tasks.generate import RETRIEVER_ORDER, system_label

    real = _bioasq_questions()
    pool = _chunk_pool(real, CORPUS_CHUNKS)
    readers = 3
    samples = math.ceil(requests / metrics)
    n_questions = math.ceil(samples / (readers * len(RETRIEVER_ORDER)))
    queries, retrieved, generations = [], [], []
    for i in range(n_questions):
        question, copy = real[i % len(real)], i // len(real)
        qid = f"{question['id']}-{copy}"
        ideal = sample_field(question.get("ideal_answer"))
        answer = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in sample_field(question.get("snippets") or [])] or [answer]
        queries.append({"query_id": qid, "text": question["body"], "answer": answer,
                        "exact_answer": json.dumps(sample_field(question.get("exact_answer"))),
                        "qtype": question["type"]})
        for r, retriever in enumerate(RETRIEVER_ORDER):
            start = (i * 7919 + r * 104729) % len(pool)
            for rank in range(1, TOP_K + 1):
                chunk = pool[(start + rank) % len(pool)]
                retrieved.append({"query_id": qid, "retriever": retriever, "rank": rank,
                                  "chunk_id": f"c{(start + rank) % len(pool)}", "doc_id": qid,
                                  "score": 1.0 / rank, "text": chunk})
        responses = (answer, snippets[0], " ".join(snippets[:2]))
        for reader in range(readers):
            for retriever in RETRIEVER_ORDER:
                generations.append({"query_id": qid, "system": system_label(reader, retriever),
                                    "retriever": retriever, "reader": f"reader{reader}",
                                    "answer": responses[reader], "n_chunks_used": TOP_K, "status": "ok",
                                    "error": None})
    generations = generations[:samples]
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / "queries.parquet", directory / "retrieved.parquet",
             directory / "generations.parquet")
    for frame, path in zip((queries, retrieved, generations), paths):
        pd.DataFrame(frame).to_parquet(path, index=False)
    return *paths, samples * metrics


def paper_configs():
    """Judge and client settings of configs/paper-bioasq.yaml."""
    import yaml

    from judges.config import ClientConfig, JudgeConfig

    raw = yaml.safe_load((REPO / "configs" / "paper-bioasq.yaml").read_text())
    return JudgeConfig(**raw["judge"]), ClientConfig(**raw["client"])


# --- the stage, in a child process --------------------------------------------------------------------

def stage_main(args: argparse.Namespace) -> int:
    """Child: one run of the real judge stage; prints a JSON line with its timings."""
    started = time.perf_counter()
    from tasks.judge import run_judging

    judge, client = paper_configs()
    if args.tokenizer:
        judge = judge.model_copy(update={"tokenizer": args.tokenizer})
    cluster = None
    if args.nodes > 1:
        client = client.model_copy(update={"shard_resources": {WORKER_RESOURCE: 1}})
        cluster = start_cluster(args.nodes)
    inputs = Path(args.inputs)
    out = run_judging(Path(args.run_dir), "ccrs", inputs / "queries.parquet", inputs / "retrieved.parquet",
                      inputs / "generations.parquet", judge, client, args.base_url, top_k=TOP_K,
                      progress=False)
    print("STAGE " + json.dumps({"process_s": time.perf_counter() - started,
                                 "stage_s": out.summary.get("seconds"),
                                 "resumed": out.summary.get("resumed"),
                                 "judge_requests": out.summary.get("judge_requests"),
                                 "shards": out.summary.get("requests", {}).get("shards"),
                                 "shards_by_node": out.summary.get("requests", {}).get("shards_by_node"),
                                 "batches": out.summary.get("batches")}), flush=True)
    import ray

    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()
    return 0


WORKER_RESOURCE = "bench_worker_node"


def start_cluster(nodes: int):
    """A head and nodes - 1 worker nodes on this machine; the driver joins it (ensure_ray then finds Ray
    initialised). The workers offer WORKER_RESOURCE, the head does not."""
    import ray
    from ray.cluster_utils import Cluster

    from infra.ray_runtime import local_num_cpus

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    from ray._common.utils import reset_ray_address

    reset_ray_address()  # else any `ray.init()` on this machine would join this cluster until it ends
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=local_num_cpus(), resources={WORKER_RESOURCE: 1000})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster


class TreeMonitor:
    """Peak RSS of a process tree, polled: the driver (the child), Ray workers, and the rest (raylet,
    GCS ...). RSS counts pages shared between processes (the object store) in each of them."""

    def __init__(self, pid: int):
        import psutil

        self.root = psutil.Process(pid)
        self.peak = {"driver_mb": 0.0, "workers_sum_mb": 0.0, "worker_max_mb": 0.0, "ray_other_mb": 0.0,
                     "tree_mb": 0.0, "workers": 0}
        self.cpu_s: dict[int, tuple[str, float]] = {}  # pid -> (kind, user + system seconds last seen)

    def cpu(self) -> dict[str, float]:
        """CPU seconds used by the tree's processes, by kind (as last polled)."""
        totals = {"driver": 0.0, "workers": 0.0, "ray_other": 0.0}
        for kind, seconds in self.cpu_s.values():
            totals[kind] += seconds
        return {k: round(v, 1) for k, v in totals.items()}

    def poll(self) -> None:
        import psutil

        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        driver = workers = other = worker_max = 0.0
        n_workers = 0
        for proc in procs:
            try:
                rss = proc.memory_info().rss / 2**20
                name = " ".join(proc.cmdline()[:3]) if proc is not self.root else ""
                times = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if proc is self.root:
                driver, kind = rss, "driver"
            elif "default_worker" in name or name.startswith("ray::"):
                workers += rss
                worker_max = max(worker_max, rss)
                n_workers += 1
                kind = "workers"
            else:
                other += rss
                kind = "ray_other"
            self.cpu_s[proc.pid] = (kind, times.user + times.system)
        for key, value in (("driver_mb", driver), ("workers_sum_mb", workers), ("worker_max_mb", worker_max),
                           ("ray_other_mb", other), ("tree_mb", driver + workers + other),
                           ("workers", n_workers)):
            self.peak[key] = max(self.peak[key], value)


class CheckpointWatch:
    """(records, bytes) of the stage's checkpoint files (one per batch), read incrementally (only what was
    appended since the last look), so that watching costs the measured run next to nothing."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.offsets, self.records = run_dir, {}, 0

    def __call__(self) -> tuple[int, int]:
        for file in self.run_dir.glob(".*.partial/**/*.jsonl"):
            offset = self.offsets.get(file, 0)
            with open(file, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
            self.records += data.count(b"\n")
            self.offsets[file] = offset + len(data)
        return self.records, sum(self.offsets.values())


def run_child(args, run_dir: Path, inputs: Path, base_url: str, cache_dir: Path, nodes: int,
              kill_at: int | None = None) -> dict:
    """Run the stage in a new process group; with `kill_at`, SIGKILL the group once that many records
    are checkpointed. Returns timings, peak memory and checkpoint size."""
    env = {**os.environ, "CCRS_JUDGE_CACHE": str(cache_dir), "HF_HUB_OFFLINE": "1",
           "RAY_DEDUP_LOGS": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", "--run-dir", str(run_dir),
           "--inputs", str(inputs), "--base-url", base_url, "--nodes", str(nodes)]
    if args.tokenizer:
        cmd += ["--tokenizer", args.tokenizer]
    log = open(run_dir.parent / f"{run_dir.name}.log", "ab")  # noqa: SIM115
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
                            cwd=REPO)
    CHILDREN.append(proc)
    monitor, checkpoint_state = TreeMonitor(proc.pid), CheckpointWatch(run_dir)
    killed, records, ckpt_bytes, polls = False, 0, 0, 0
    while proc.poll() is None:
        monitor.poll()
        polls += 1
        if polls % 2 == 0 or kill_at is not None:
            seen, size = checkpoint_state()
            if size >= ckpt_bytes:
                records, ckpt_bytes = seen, size
            if kill_at is not None and seen >= kill_at:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                killed = True
                break
        time.sleep(0.25)
    wall = time.perf_counter() - started
    out = proc.stdout.read().decode() if proc.stdout else ""
    log.close()
    stage = next((json.loads(line[6:]) for line in out.splitlines() if line.startswith("STAGE ")), {})
    if not killed and proc.returncode != 0:
        raise RuntimeError(f"stage process failed (rc {proc.returncode}); see {log.name}")
    return {"wall_s": wall, "killed": killed, "rc": proc.returncode, "stage": stage,
            "memory": monitor.peak, "cpu_s": monitor.cpu(), "checkpoint_records_seen": records,
            "checkpoint_bytes_seen": ckpt_bytes}


CHILDREN: list[subprocess.Popen] = []  # stage processes (own process groups), ended if we are stopped


def _end_children() -> None:
    for proc in CHILDREN:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- the simulator -----------------------------------------------------------------------------------

def start_simulator(work: Path, latency_ms: float) -> tuple[subprocess.Popen, str]:
    port_file = work / "simulator.port"
    port_file.unlink(missing_ok=True)  # a previous simulator's port would be read before the new one writes
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "llm_simulator.py"),
                             "--latency-ms", str(latency_ms), "--port-file", str(port_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the LLM simulator did not start")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


def stop_simulator(proc: subprocess.Popen) -> tuple[int, float]:
    """Stop the simulator; returns how many completions it served and its CPU seconds."""
    import psutil

    times = psutil.Process(proc.pid).cpu_times()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0].decode()
    served = [line for line in out.splitlines() if "served" in line]
    return (int(served[-1].split("served")[1].split()[0]) if served else -1,
            round(times.user + times.system, 1))


# --- checks ------------------------------------------------------------------------------------------

def audit(run_dir: Path, generations_path: Path, metrics: tuple[str, ...]) -> dict:
    """Lost and duplicated judgments in the stage's output: exactly one row per (query, system, metric)."""
    import pandas as pd

    from tasks.runtime.layout import JUDGMENTS_FILE

    frame = pd.read_parquet(run_dir / STAGE_NAME / JUDGMENTS_FILE,
                            columns=["query_id", "system", "metric", "score", "status"])
    generations = pd.read_parquet(generations_path, columns=["query_id", "system"])
    expected = {(q, s, m) for q, s in zip(generations["query_id"], generations["system"]) for m in metrics}
    keys = list(zip(frame["query_id"], frame["system"], frame["metric"]))
    present = set(keys)
    return {"rows": len(frame), "lost": len(expected - present), "duplicated": len(keys) - len(present),
            "unexpected": len(present - expected), "not_ok": int((frame["status"] != "ok").sum()),
            "scores": frame.set_index(["query_id", "system", "metric"])["score"]}


# --- main --------------------------------------------------------------------------------------------

def measure(args, work: Path, requests_wanted: int, nodes: int) -> dict:
    """One size on one cluster size: inputs, the uninterrupted run, the killed and resumed run, audits."""
    judge, _ = paper_configs()
    metrics = tuple(judge.ccrs.metrics)
    label = f"{requests_wanted}-k{nodes}"
    t0 = time.perf_counter()
    inputs = work / f"inputs-{requests_wanted}"
    if not (inputs / "generations.parquet").exists():
        build_inputs(inputs, requests_wanted, len(metrics))
    requests = len(metrics) * _samples(inputs)
    print(f"inputs: {requests} requests ({requests // len(metrics)} samples), {nodes} node(s), in "
          f"{time.perf_counter() - t0:.1f}s under {work}", flush=True)
    simulator, base_url = start_simulator(work, args.latency_ms)
    try:
        full_dir, full_cache = work / f"run_full-{label}", work / f"cache_full-{label}"
        full = run_child(args, full_dir, inputs, base_url, full_cache, nodes)
        print(f"uninterrupted: {full['wall_s']:.1f}s, peak {full['memory']}", flush=True)
        served_full = stop_simulator(simulator)
        simulator, base_url = start_simulator(work, args.latency_ms)
        kill_at = max(1, int(requests * args.kill_at))
        resume_dir, resume_cache = work / f"run_resume-{label}", work / f"cache_resume-{label}"
        killed = run_child(args, resume_dir, inputs, base_url, resume_cache, nodes, kill_at=kill_at)
        print(f"killed after {killed['wall_s']:.1f}s with {killed['checkpoint_records_seen']} records "
              f"checkpointed", flush=True)
        resumed = run_child(args, resume_dir, inputs, base_url, resume_cache, nodes)
    finally:
        _end_children()
        served_resume = stop_simulator(simulator)
    generations = inputs / "generations.parquet"
    full_audit = audit(full_dir, generations, metrics)
    resume_audit = audit(resume_dir, generations, metrics)
    resumed_scores = resume_audit.pop("scores")
    same = full_audit.pop("scores").reindex(resumed_scores.index)
    mismatched = int(((same != resumed_scores) & ~(same.isna() & resumed_scores.isna())).sum())
    memory = full["memory"]
    return {
        "requests": requests,
        "nodes": nodes,
        "wall_s": round(full["wall_s"], 2),
        "requests_per_s": round(requests / full["wall_s"], 1),
        "peak_driver_rss_mb": round(memory["driver_mb"], 1),
        "peak_worker_rss_mb": round(memory["worker_max_mb"], 1),
        "lost": resume_audit["lost"],
        "duplicated": resume_audit["duplicated"],
        "resume_s": round(resumed["wall_s"], 2),
        "peak_rss_mb": round(memory["tree_mb"], 1),
        "peak_rss_mb_is": "peak of the summed RSS of the stage's whole process tree (driver + Ray workers "
                          "+ raylets/GCS), polled every 0.25 s; peak_worker_rss_mb: the largest Ray worker",
        "memory_mb": {k: round(v, 1) for k, v in memory.items()},
        "stage_s": full["stage"].get("stage_s"),
        "stage_requests_per_s": round(requests / full["stage"]["stage_s"], 1)
        if full["stage"].get("stage_s") else None,
        "shards": full["stage"].get("shards"),
        "shards_by_node": full["stage"].get("shards_by_node"),
        "batches": full["stage"].get("batches"),
        "checkpoint_bytes": full["checkpoint_bytes_seen"],
        "checkpoint_records": full["checkpoint_records_seen"],
        "checkpoint_bytes_per_record": round(full["checkpoint_bytes_seen"]
                                             / max(1, full["checkpoint_records_seen"]), 1),
        "killed_at_records": killed["checkpoint_records_seen"],
        "killed_after_s": round(killed["wall_s"], 2),
        "resumed_items": resumed["stage"].get("resumed"),
        "resume_requests": resumed["stage"].get("judge_requests"),
        "resume_memory_mb": {k: round(v, 1) for k, v in resumed["memory"].items()},
        "uninterrupted_audit": full_audit,
        "resumed_audit": resume_audit,
        "scores_differing_from_uninterrupted": mismatched,
        "simulator_completions": {"uninterrupted": served_full[0], "killed_plus_resumed": served_resume[0]},
        "cpu_s": {**full["cpu_s"], "simulator": served_full[1]},
        "requests_per_cpu_s": round(requests / max(1e-9, sum(full["cpu_s"].values())), 1),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "latency_ms": args.latency_ms,
        "cpus": os.cpu_count(),
    }


def _samples(inputs: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(inputs / "generations.parquet").metadata.num_rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[PAPER_REQUESTS])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1],
                        help="Ray nodes (K > 1: a head and K - 1 worker nodes on this machine)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated judge latency")
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of requests checkpointed at kill")
    parser.add_argument("--tokenizer", help="judge.tokenizer (e.g. a local HF folder) instead of the "
                        "paper config's (unavailable offline: character estimate)")
    parser.add_argument("--work-dir", type=Path, help="default: a temporary folder, removed afterwards")
    parser.add_argument("--stage", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        args.nodes = args.nodes[0]
        return stage_main(args)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-orch-"))
    work.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` ends what we started
    runs = []
    for requests in args.requests:
        for nodes in args.nodes:
            runs.append(measure(args, work, requests, nodes))
            print(json.dumps({k: runs[-1][k] for k in CONTRACT_KEYS}), flush=True)
            if args.json:  # after every run: a long benchmark that is stopped keeps what it measured
                args.json.write_text(json.dumps({**runs[0], "runs": runs}, indent=2))
    print(json.dumps({"runs": [{k: run[k] for k in CONTRACT_KEYS} for run in runs]}, indent=2))
    if len(runs) > 1:
        print(f"driver peak ratio, largest / smallest size: "
              f"{runs[-1]['peak_driver_rss_mb'] / runs[0]['peak_driver_rss_mb']:.2f}")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    clean = all(r["lost"] == 0 and r["duplicated"] == 0 and r["scores_differing_from_uninterrupted"] == 0
                for r in runs)
    return 0 if clean else 1


CONTRACT_KEYS = ("requests", "nodes", "wall_s", "requests_per_s", "peak_driver_rss_mb", "peak_worker_rss_mb",
                 "lost", "duplicated", "resume_s")


if __name__ == "__main__":
    sys.exit(main())
