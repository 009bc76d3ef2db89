"""A tiny traced RAG app over real BioASQ sample questions, logged to a real (SQLite) MLflow store: two
variants tagged `variant`, a RETRIEVER span of Documents (the question's gold snippets; variant B ranks them
in reverse), an `expected_response` expectation on some, and one trace of each bad kind."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.shared import bioasq_questions, sample_field

EXPERIMENT, SHAPED_EXPERIMENT, EMPTY_EXPERIMENT = "rag-app", "shaped-app", "no-traces"
QUESTIONS = 4  # each asked of both variants: 8 good traces
SNIPPETS = 3


@dataclass(frozen=True)
class Question:
    body: str
    ideal: str
    snippets: list[str]


@dataclass
class AppStore:
    """What the app logged: the store, and the trace ids by what they are."""

    uri: str
    root: Path
    experiment_id: str = ""
    good: dict[tuple[int, str], str] = field(default_factory=dict)  # (question index, variant) -> trace id
    referenced: set[str] = field(default_factory=set)  # trace ids with an expected_response
    bad: dict[str, str] = field(default_factory=dict)  # failure reason -> trace id
    shaped: str = ""  # the trace of the app shaped otherwise (SHAPED_EXPERIMENT)


def questions() -> list[Question]:
    found = []
    for raw in bioasq_questions(QUESTIONS + 1):
        ideal = sample_field(raw["ideal_answer"])
        found.append(Question(raw["body"], ideal[0] if isinstance(ideal, list) else str(ideal),
                              [s["text"] for s in sample_field(raw["snippets"])][:SNIPPETS]))
    return found


def log_app(root: Path) -> AppStore:
    """Logs every trace; the caller sets and restores MLflow's global state (the tracing API uses it)."""
    import mlflow

    store = AppStore(f"sqlite:///{root / 'mlflow.db'}", root)
    mlflow.set_tracking_uri(store.uri)
    client = mlflow.MlflowClient(store.uri)
    for name in (EXPERIMENT, SHAPED_EXPERIMENT, EMPTY_EXPERIMENT):
        client.create_experiment(name, artifact_location=(root / name).as_uri())
    store.experiment_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    mlflow.set_experiment(EXPERIMENT)
    _log_variants(store, questions())
    mlflow.set_experiment(SHAPED_EXPERIMENT)
    store.shaped = _log_shaped(questions()[0])
    return store


def _app():
    import mlflow
    from mlflow.entities import Document, SpanType

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(query: str, snippets: list[str], variant: str) -> list[Document]:
        ranked = snippets if variant == "A" else snippets[::-1]
        return [Document(page_content=text, metadata={"rank": rank}, id=f"d{rank}")
                for rank, text in enumerate(ranked, 1)]

    @mlflow.trace
    def answer(question: str, question_data: Question, variant: str | None, retrieval: bool = True,
               reply: bool = True):
        if variant is not None:
            mlflow.update_current_trace(tags={"variant": variant})
        if retrieval:
            retrieve(question, question_data.snippets, variant or "A")
        if not reply:
            return None
        return {"answer": question_data.ideal if variant == "A" else question_data.snippets[0]}

    @mlflow.trace
    def failing(question: str):
        mlflow.update_current_trace(tags={"variant": "B"})
        raise RuntimeError("the reader timed out")

    @mlflow.trace
    def opaque(payload: dict):
        mlflow.update_current_trace(tags={"variant": "B"})
        return {"answer": "something"}

    return answer, failing, opaque


def _log_variants(store: AppStore, found: list[Question]) -> None:
    import mlflow

    answer, failing, opaque = _app()
    for index, question in enumerate(found[:QUESTIONS]):
        for variant in "AB":
            answer(question.body, question, variant)
            trace_id = mlflow.get_last_active_trace_id()
            store.good[index, variant] = trace_id
            if index == 0 or (index == 1 and variant == "A"):
                mlflow.log_expectation(trace_id=trace_id, name="expected_response", value=question.ideal)
                store.referenced.add(trace_id)
    extra = found[QUESTIONS]
    answer(extra.body, extra, "A", retrieval=False)
    store.bad["no_retriever_span"] = mlflow.get_last_active_trace_id()
    answer(extra.body, extra, "B", reply=False)
    store.bad["no_output"] = mlflow.get_last_active_trace_id()
    answer(extra.body, extra, None)
    store.bad["no_system"] = mlflow.get_last_active_trace_id()
    try:
        failing(extra.body)
    except RuntimeError:
        pass
    store.bad["error_state"] = mlflow.get_last_active_trace_id()
    opaque({"ids": [1, 2]})
    store.bad["unreadable_inputs"] = mlflow.get_last_active_trace_id()
    time.sleep(0.01)  # later than the first asking, to the millisecond
    answer(found[0].body, found[0], "A")
    store.bad["repeated_question"] = mlflow.get_last_active_trace_id()
    store.bad["in_progress"] = _in_progress(store)


def _in_progress(store: AppStore) -> str:
    """A trace the store holds as started and not finished (an app still running, or one that died)."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.client import TracingClient

    trace_id = "tr-" + uuid.uuid4().hex
    TracingClient(store.uri).start_trace(TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(store.experiment_id),
        request_time=int(time.time() * 1000), state=TraceState.IN_PROGRESS, tags={"variant": "A"}))
    return trace_id


def _log_shaped(question: Question) -> str:
    """An app whose question is nested in a request, whose answer is under result.text and whose search
    is a TOOL span named `search` returning {"text": ...} records."""
    import mlflow
    from mlflow.entities import SpanType

    @mlflow.trace(name="search", span_type=SpanType.TOOL)
    def search(terms: str) -> list[dict]:
        return [{"text": text, "score": 1.0 / rank} for rank, text in enumerate(question.snippets, 1)]

    @mlflow.trace
    def handle(request: dict, user: str):
        search(request["q"])
        return {"result": {"text": question.ideal}}

    handle({"q": question.body, "lang": "en"}, "someone")
    return mlflow.get_last_active_trace_id()
