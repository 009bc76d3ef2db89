"""Shared fixtures.

`llm_endpoint` (session scope) starts the real CPU stack ONCE per test session: Ray (in this process),
Ray Serve LLM and vLLM (CPU build) serving SmolLM2-135M-Instruct, on a free local port. Every test marked
`llm` that needs a server reuses it. Set CCRS_TEST_LLM_BASE_URL to point the tests at an endpoint that is
already running instead (e.g. one started with `ccrs serve up`).
"""
from __future__ import annotations

import gc
import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks.shared import BIOASQ_SAMPLE, bioasq_questions, sample_field  # noqa: F401 - for the tests
from infra.process import configure_process

REPO = Path(__file__).resolve().parents[1]
# The test process's start: the settings `ccrs` makes at its start, and no test ever asks the Hub (a `ccrs`
# subprocess inherits both).
configure_process()
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Time the session spends in full garbage collections, printed at its end: over a heap holding torch, Ray
# and MLflow each one costs seconds, so a library that calls gc.collect() in a loop shows up here.
_FULL_GC = {"started": 0.0, "count": 0, "seconds": 0.0}


def _time_full_collections(phase: str, info: dict) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        _FULL_GC["started"] = time.perf_counter()
    else:
        _FULL_GC["count"] += 1
        _FULL_GC["seconds"] += time.perf_counter() - _FULL_GC["started"]


gc.callbacks.append(_time_full_collections)


def pytest_collection_finish(session) -> None:
    """What collection imported (torch, Ray, MLflow, vLLM's client side: most of the heap) is set aside from
    later full collections, which then scan only what the tests made (gc.freeze: reference counting still
    frees those objects; only a cycle among them would outlive the session)."""
    gc.collect()
    gc.freeze()


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.write_line(f"full garbage collections: {_FULL_GC['count']}, "
                                f"{_FULL_GC['seconds']:.1f} s in all")


@dataclass
class LLMEndpoint:
    base_url: str
    models: list[str]
    judge_model: str
    reader_models: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def llm_endpoint():
    external = os.environ.get("CCRS_TEST_LLM_BASE_URL")
    model = "smollm2-135m-instruct"
    if external:
        yield LLMEndpoint(external.rstrip("/"), [model], model, [model])
        return
    from infra.serving import ServingConfig, start_serve_app, stop_serve_app

    cfg = ServingConfig.for_profile("cpu", port=_free_port(), ready_timeout_s=420)
    cfg.models[0].engine_kwargs["enable_prefix_caching"] = True
    # owned_elsewhere: a pipeline under test calling stop_serve_app() must not stop the session's server
    base_url = start_serve_app(cfg, owned_elsewhere=True)
    try:
        yield LLMEndpoint(base_url, cfg.model_ids(), model, [model])
    finally:
        import ray

        stop_serve_app(cfg)
        ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def judge_cache_dir(tmp_path_factory):
    """Judgment cache isolated per test session (never the user's ~/.cache/ccrs), for every test whatever
    the order (autouse: a `ccrs run` subprocess inherits it too); the variable is restored at session end."""
    path = tmp_path_factory.mktemp("judge_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CCRS_JUDGE_CACHE", str(path))
        yield path


def _mlflow_globals() -> tuple | None:
    """MLflow's process-wide fluent state (None when MLflow is not imported: its defaults)."""
    import sys

    if "mlflow" not in sys.modules:
        return None
    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils

    return utils._tracking_uri, fluent._active_experiment_id


def _restore_mlflow_globals(saved: tuple | None) -> None:
    import sys

    if "mlflow" not in sys.modules:
        return
    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils

    utils._tracking_uri, fluent._active_experiment_id = saved or (None, None)


@contextmanager
def process_state_restored():
    """Whatever runs inside leaves the process as it found it: every environment variable (mlflow's
    set_tracking_uri / set_experiment also write MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_ID there, and
    a `ccrs run` subprocess started later would inherit them), MLflow's global tracking URI and active
    experiment, and the working directory. Yields a list that names, on exit, what had to be restored."""
    env, cwd, mlflow_state = dict(os.environ), os.getcwd(), _mlflow_globals()
    restored: list[str] = []
    try:
        yield restored
    finally:
        if _mlflow_globals() != mlflow_state:
            restored.append("MLflow's tracking URI / active experiment")
        _restore_mlflow_globals(mlflow_state)
        if os.getcwd() != cwd:
            restored.append("working directory")
            os.chdir(cwd)
        if dict(os.environ) != env:
            changed = {k for k in env.keys() | os.environ.keys() if env.get(k) != os.environ.get(k)}
            restored.append(f"environment variables {', '.join(sorted(changed))}")
            os.environ.clear()
            os.environ.update(env)


@pytest.fixture(autouse=True)
def _restore_process_state():
    """Each test leaves no process state behind for the next one (see process_state_restored). Session
    fixtures are set up before it, so what they set lives until the end of the session."""
    with process_state_restored():
        yield


@pytest.fixture(scope="session", autouse=True)
def _restore_session_state():
    """At the end of the session: the environment and working directory as they were before the first
    fixture, and a Ray started by a test or by `ray_session` shut down (llm_endpoint, torn down before
    this, shuts down the Ray it shares)."""
    import sys

    ray_was_up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    with process_state_restored():
        yield
        if not ray_was_up and "ray" in sys.modules and sys.modules["ray"].is_initialized():
            sys.modules["ray"].shutdown()


def write_bioasq_subset(directory: Path, questions: int) -> Path:
    """A BioASQ dataset folder of the shipped sample's first `questions` questions, in the official JSON
    format: their snippets are the whole corpus (the sample's 32 give 685 passages, whose embedding is most of
    a k-NN retrieval's time on these CPUs)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / BIOASQ_SAMPLE.name).write_text(json.dumps({"questions": bioasq_questions(questions)}))
    return directory


def bioasq_sample(snippets: int = 3):
    """A judge `Sample` of the first BioASQ question: its ideal answer as both the response and the ground
    truth, its first gold snippets as the context (system "A")."""
    from judges.suite import Sample

    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    answer = ideal[0] if isinstance(ideal, list) else str(ideal)
    context = [s["text"] for s in sample_field(question["snippets"])][:snippets]
    return Sample(question["id"], "A", question["body"], answer, answer, context)


def write_bioasq_inputs(directory: Path, limit: int = 4, chunks_per_query: int = 5) -> tuple[Path, Path]:
    """queries.parquet and retrieved.parquet in the retrieval stage's schema, from real BioASQ questions.

    The 'retrieved' chunks are the question's gold snippets: bm25 in their file order, knn reversed. A
    stand-in for the retrieval stage so the reader/judge stages can be tested on real text alone."""
    import pandas as pd

    queries, retrieved = [], []
    for question in bioasq_questions(limit):
        ideal = sample_field(question.get("ideal_answer"))
        queries.append({
            "query_id": question["id"], "text": question["body"],
            "answer": ideal[0] if isinstance(ideal, list) else str(ideal),
            "exact_answer": json.dumps(sample_field(question.get("exact_answer"))), "qtype": question["type"],
        })
        snippets = [s["text"] for s in sample_field(question["snippets"])][:chunks_per_query]
        for retriever, ordered in (("bm25", snippets), ("knn", snippets[::-1])):
            for rank, text in enumerate(ordered, 1):
                retrieved.append({"query_id": question["id"], "retriever": retriever, "rank": rank,
                                  "chunk_id": f"{question['id']}-{snippets.index(text)}",
                                  "doc_id": question["id"], "score": 1.0 / rank, "text": text})
    directory.mkdir(parents=True, exist_ok=True)
    queries_path, retrieved_path = directory / "queries.parquet", directory / "retrieved.parquet"
    pd.DataFrame(queries).to_parquet(queries_path, index=False)
    pd.DataFrame(retrieved).to_parquet(retrieved_path, index=False)
    return queries_path, retrieved_path


@pytest.fixture
def bioasq_inputs(tmp_path) -> tuple[Path, Path]:
    return write_bioasq_inputs(tmp_path / "inputs")


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory) -> Path:
    """An MLflow SQLite store as MLflow leaves a new one at its first connection (the installed version's
    schema, the Default experiment, no runs), made once a session: a new store runs MLflow's Alembic
    migrations, 2-4 s on the CI's CPUs. Made from the repository root, as the tests that copy it run (the
    Default experiment's artifact location is the working directory's mlruns/0, as in a new store there)."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("empty-mlflow") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_db(tmp_path, empty_mlflow_db) -> str:
    """The URI of a new, empty MLflow SQLite store at tmp_path/mlflow.db: a copy of `empty_mlflow_db`, what
    MLflow itself would create there from the working directory, minus its seconds (copy_empty_mlflow_db)."""
    return copy_empty_mlflow_db(empty_mlflow_db, tmp_path / "mlflow.db")


def copy_empty_mlflow_db(empty_mlflow_db: Path, path: Path,
                         default_artifact_root: str | Path = "mlruns") -> str:
    """The URI of a new, empty MLflow SQLite store at `path`, made as a copy of `empty_mlflow_db`, whose
    Default experiment (0) gets the artifact location MLflow gives it in a new store: default_artifact_root/0
    (MLflow's own resolution; a local path is absolute from the working directory now). Pass what the first
    process to open the store would use: ./mlruns of its working directory for a client (the default: this
    process, here), "mlflow-artifacts:/" for `mlflow server` with proxied artifacts."""
    import shutil
    import sqlite3
    from contextlib import closing

    from mlflow.utils.uri import append_to_uri_path, resolve_uri_if_local

    shutil.copyfile(empty_mlflow_db, path)
    location = append_to_uri_path(resolve_uri_if_local(str(default_artifact_root)), "0")
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0", (location,))
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def ray_session():
    """Ray for the stage tests, started once per session; never shut down here (other session fixtures,
    such as llm_endpoint, may share it; llm_endpoint shuts Ray down at the end of the session)."""
    from infra.ray_runtime import ensure_ray

    ensure_ray()
    yield


class RagService:
    """A small real RAG service on loopback, speaking the endpoint-system protocol (docs/evaluate.md):
    POST {"question_id", "question"} -> {"answer", "contexts"}. It retrieves the question's BioASQ gold
    snippets (the first three) and answers with the extractive reader's best sentence. While `failing`
    holds question ids, those get HTTP 503 (an outage of part of the service); `requests` counts posts."""

    def __init__(self):
        from judges.readers import extractive_answer
        from tests.loopback import JsonHandler, LoopbackServer

        snippets = {q["body"]: [s["text"] for s in sample_field(q["snippets"])][:3]
                    for q in bioasq_questions()}
        self.failing: set[str] = set()
        self.requests = 0
        self.headers_seen: list[dict] = []
        service = self

        class Handler(JsonHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.read_json()
                service.requests += 1
                service.headers_seen.append(dict(self.headers))
                if body["question_id"] in service.failing:
                    self.send_json(503, {"error": "index shard unavailable"})
                    return
                contexts = snippets.get(body["question"], [])
                self.send_json(200, {"answer": extractive_answer(body["question"], contexts, 1),
                                     "contexts": contexts})

        self.loopback = LoopbackServer(Handler, "/answer")
        self.url = self.loopback.url

    def close(self) -> None:
        self.loopback.close()


@pytest.fixture
def rag_service():
    service = RagService()
    try:
        yield service
    finally:
        service.close()
