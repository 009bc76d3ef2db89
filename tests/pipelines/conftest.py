"""End-to-end fixtures: a real `mlflow server` on loopback and one pipeline run of the shipped CPU demo
config against it (reusing the session's real CPU LLM stack from tests/conftest.py)."""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from pipelines.config import DEFAULT_CONFIG, load_config
from tests.conftest import copy_empty_mlflow_db, process_state_restored, write_bioasq_subset

# 2, not 3: the demo's expected marks cost 3x the judging time of integer ones (CI time)
E2E_QUESTIONS = 2
# 3 chunks a context, not the demo's 5: every judge and reader prompt about 40% shorter (CI time; the
# prompt's prefill is most of a CPU judgment's time); no test here reads the context's length
E2E_TOP_K = 3
# The corpus: the snippets of the sample's first 4 questions (67 snippets: the asked questions' own and
# two others' as distractors). All 32 questions' 685 took 37 s of k-NN embedding in every run folder, the
# first 8 questions' 189 about 14 s; `make demo` runs the whole sample.
E2E_CORPUS_QUESTIONS = 4
# Planted for the end-to-end run, in the environment and (the last two) in a chmod-600 secrets file; none
# may reach MLflow (tests/pipelines/test_e2e.py).
PLANTED_SECRETS = {"CCRS_LLM_API_KEY": "sk-e2e-planted-9f1c27",
                   "OPENSEARCH_PASSWORD": "os-e2e-planted-4b8d11",
                   "AWS_SECRET_ACCESS_KEY": "aws-e2e-planted-77ae03"}
FILE_SECRETS = ("OPENSEARCH_PASSWORD", "AWS_SECRET_ACCESS_KEY")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# MLflow 3's `mlflow server` also starts a job runner and seven huey consumer processes (MLflow's GenAI jobs,
# which no test uses): about 2 GB and tens of CPU seconds at every start of a test server.
MLFLOW_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f}s")


@pytest.fixture(scope="session")
def s3_endpoint():
    """A loopback S3 (moto's server, real HTTP + boto3) holding the `ccrs-artifacts` bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    credentials = {"AWS_ACCESS_KEY_ID": "moto-test", "AWS_SECRET_ACCESS_KEY": "moto-test",
                   "AWS_DEFAULT_REGION": "us-east-1"}
    boto3.client("s3", endpoint_url=url, aws_access_key_id="moto-test", aws_secret_access_key="moto-test",
                 region_name="us-east-1").create_bucket(Bucket="ccrs-artifacts")
    try:
        yield url, credentials
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory, s3_endpoint, empty_mlflow_db):
    """Remote mode as deployed: `mlflow server` with a database backend (SQLite) and S3 artifacts
    (proxied; boto3 talks to the loopback S3), bound to 127.0.0.1. Its new store is a copy of the
    session's empty one, the Default experiment's artifacts proxied as the server makes it
    (mlflow-artifacts:/0)."""
    s3_url, credentials = s3_endpoint
    root = tmp_path_factory.mktemp("mlflow-server")
    copy_empty_mlflow_db(empty_mlflow_db, root / "mlflow.db", "mlflow-artifacts:/")
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port),
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination", "s3://ccrs-artifacts/mlflow", "--workers", "1",
    ]
    env = {**os.environ, **credentials, **MLFLOW_SERVER_ENV, "MLFLOW_S3_ENDPOINT_URL": s3_url}
    log = open(root / "server.log", "wb")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health", 180)
        yield url
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def e2e_config(run_dir: Path, llm_base_url: str, tracking_uri: str, experiment: str = "ccrs-e2e",
               overrides: dict | None = None):
    """The shipped demo config, on the first few questions of a smaller corpus (E2E_CORPUS_QUESTIONS; the
    same files, so the same stage keys, next to every run folder) with top-3 contexts (E2E_TOP_K), against
    an already running LLM endpoint."""
    corpus = write_bioasq_subset(Path(run_dir).parent / "bioasq-corpus", E2E_CORPUS_QUESTIONS)
    return load_config(DEFAULT_CONFIG, {
        "name": "e2e",
        "run_dir": str(run_dir),
        "dataset.path": str(corpus),
        "dataset.limit": E2E_QUESTIONS,
        "retrieval.top_k": E2E_TOP_K,
        "serving": {"profile": "external", "base_url": llm_base_url},
        "stats.b": 1000,
        "mlflow.tracking_uri": tracking_uri,
        "mlflow.experiment": experiment,
        **(overrides or {}),
    })


# The session run also asks for the judge bias probes (docs/probes.md) on two answers of the extractive
# top-1 reader (C: its answers are never empty): the probe stage, its verdict section and MLflow logging.
# One kind (order: 2 x 4 new judgments, the clean ones come from the judge stage's cache); verbosity runs
# on the real judge (with injection) in tests/pipelines/test_probe_cmd.py.
E2E_PROBES = {"kinds": ["order"], "questions": 2, "system": "C", "b": 200}


@pytest.fixture(scope="session")
def e2e_run(llm_endpoint, mlflow_server, tmp_path_factory, judge_cache_dir):
    from infra.secrets import load_secrets
    from pipelines.pipeline import run_pipeline

    root = tmp_path_factory.mktemp("e2e")
    config = e2e_config(root / "run", llm_endpoint.base_url, mlflow_server, overrides={"probes": E2E_PROBES})
    secrets_file = root / "secrets.env"
    secrets_file.write_text("".join(f"{name}={PLANTED_SECRETS[name]}\n" for name in FILE_SECRETS))
    secrets_file.chmod(0o600)
    # The planted secrets, and what the run sets (MLFLOW_TRACKING_URI, MLflow's global URI and experiment),
    # are gone once the run is over: a session fixture is outside the per-test restore.
    with process_state_restored():
        for name in PLANTED_SECRETS:
            os.environ.pop(name, None)
        os.environ.update({k: v for k, v in PLANTED_SECRETS.items() if k not in FILE_SECRETS})
        assert sorted(load_secrets(secrets_file)) == sorted(FILE_SECRETS)
        result = run_pipeline(config, keep_serving=True)
    return config, result


BIN = Path(sys.executable).parent


@dataclass
class RayHead:
    dashboard: str  # http://127.0.0.1:<port>, for `ray job submit --address`
    gcs: str  # 127.0.0.1:<port>, for a driver's RAY_ADDRESS
    env: dict  # a client's: the head's token and what docs/cluster.md's `ray job submit` line sets


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory):
    """A separate Ray head on loopback, started with the `ray start --head` line of docs/cluster.md (the
    README's) plus `--block`, loopback addresses, free ports and its own temp folder; token authentication
    left as Ray 2.60 sets it (on: the head finds a token). Its token comes from RAY_AUTH_TOKEN, one of the
    places Ray reads it from, not ~/.ray/auth_token (shared by every Ray on the machine). It runs in its own
    process group, stopped by killing that group (`ray stop` would kill every Ray on the machine, the
    session's LLM stack included); shared by the tests that submit to a cluster (ray job submit, the cron
    recipe, a Serve app too large for the head)."""
    from tests.cluster_doc import head_start_words, submit_env

    dashboard_port, gcs_port = free_port(), free_port()
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", RAY_AUTH_TOKEN=token)
    temp_dir = Path("/tmp") / f"ccrs-ray-{dashboard_port}"
    start = [str(BIN / "ray"), *head_start_words()[1:], "--block", "--node-ip-address=127.0.0.1",
             f"--port={gcs_port}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
             "--disable-usage-stats", f"--temp-dir={temp_dir}",
             # Every agent port explicit: the defaults (e.g. 52365) are taken by the session's own Ray.
             f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
             f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]
    log = tmp_path_factory.mktemp("ray-head") / "ray_head.log"
    head = subprocess.Popen(start, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    address = f"http://127.0.0.1:{dashboard_port}"
    try:
        wait_http(f"{address}/api/authentication_mode", 180)  # a route open without the token
        yield RayHead(address, f"127.0.0.1:{gcs_port}", {**env, **submit_env()})
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:  # a head that has not stopped within 2 s is killed (its own shutdown took ~40 s here, so a
            head.wait(timeout=2)  # longer wait only delayed the kill: 10 s a session)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


def write_labeled_run(root: Path, questions: int = 3, metrics: tuple[str, ...] = ("CC", "QR")) -> Path:
    """A small finished run folder for human labels (`ccrs label`, the PPI++ statistics), no LLM: the
    first `questions` real BioASQ questions, their gold snippets as the retrieved chunks
    (tests.conftest.write_bioasq_inputs), three systems (A: the ideal answer over BM25's top 3, B: the
    first snippet over kNN's top 2, C: the last sentence of the ideal answer over BM25's top 1, whose
    generation failed on the first question) and judge scores of `metrics` (registered judge metrics) for
    every answered (question, system), as their suites' judge stages write them."""
    import pandas as pd

    from judges.suite import all_metrics
    from tasks.runtime.layout import RunLayout
    from tests.conftest import write_bioasq_inputs

    layout = RunLayout(root)
    queries_path, retrieved_path = write_bioasq_inputs(layout.queries.parent, limit=questions)
    queries, retrieved = pd.read_parquet(queries_path), pd.read_parquet(retrieved_path)
    systems = {"A": ("bm25", 3), "B": ("knn", 2), "C": ("bm25", 1)}
    rows = []
    for i, query in enumerate(queries.itertuples(index=False)):
        own = retrieved[retrieved.query_id == query.query_id]
        first_snippet = own[own["rank"] == 1].text.iloc[0]
        answers = {"A": query.answer, "B": first_snippet, "C": query.answer.split(". ")[-1]}
        for system, (retriever, used) in systems.items():
            failed = system == "C" and i == 0
            rows.append({"query_id": query.query_id, "system": system, "retriever": retriever,
                         "reader": f"reader-{system}", "answer": None if failed else answers[system],
                         "n_chunks_used": 0 if failed else used, "status": "failed" if failed else "ok",
                         "error": "planted failure" if failed else None})
    generations = pd.DataFrame(rows)
    layout.generations.parent.mkdir(parents=True, exist_ok=True)
    generations.to_parquet(layout.generations, index=False)
    answered = generations[generations.status == "ok"]
    suites = {metric.name: metric.suite for metric in all_metrics()}
    for suite in dict.fromkeys(suites[metric] for metric in metrics):
        scores = pd.DataFrame([{"query_id": row.query_id, "system": row.system, "metric": metric,
                                "score": (i + j) % 5 / 4}
                               for i, row in enumerate(answered.itertuples(index=False))
                               for j, metric in enumerate(metrics) if suites[metric] == suite])
        layout.judge_dir(suite).mkdir(parents=True, exist_ok=True)
        scores.to_parquet(layout.scores(suite), index=False)
    return root
