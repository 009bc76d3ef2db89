"""A RAG app in production, logging to a real `mlflow server`: real BioASQ sample questions, a real BM25
retriever (retrievers' embedded index) over the sample's snippets, two variants that are asked different
questions (production users ask each variant other things: the comparison is unpaired), and one trace of
each bad kind. Logged twice: with MLflow Tracing (`@mlflow.trace`, a `variant` tag, RETRIEVER spans of
Documents, `expected_response` expectations) and with the OpenTelemetry SDK alone (OTLP over HTTP to the
server's /v1/traces, the GenAI semantic conventions, the variant a root span attribute).

Variant A answers with the question's ideal answer, variant B with its top passage; a `broken` release
answers nothing (empty text: a generator that broke)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.shared import bioasq_questions, sample_field

VARIANT_QUESTIONS = 16  # per variant, none shared: 32 answered traces, the sample's 32 questions
TOP_K = 3
REPEATS = 2  # questions each variant is asked again (a later trace of an answered question)
OTEL_VARIANT = "app.variant"  # the OTel app's root span attribute naming its variant


@dataclass(frozen=True)
class Question:
    body: str
    ideal: str


@dataclass
class Logged:
    """What one app logged into one experiment: the traces that become rows, and the others by kind."""

    experiment_id: str
    answered: dict[str, str] = field(default_factory=dict)  # trace id -> variant, the rows
    bad: dict[str, str] = field(default_factory=dict)  # failure reason -> trace id
    repeated: list[str] = field(default_factory=list)  # later askings of an answered question

    @property
    def traces(self) -> int:
        return len(self.answered) + len(self.bad) + len(self.repeated)


def questions() -> list[Question]:
    found = []
    for raw in bioasq_questions():
        ideal = sample_field(raw["ideal_answer"])
        found.append(Question(raw["body"], ideal[0] if isinstance(ideal, list) else str(ideal)))
    return found


def asked(variant: str, start: int = 0) -> list[Question]:
    """The questions a variant is asked: A the first VARIANT_QUESTIONS, B the next ones."""
    offset = start + (0 if variant == "A" else VARIANT_QUESTIONS)
    return questions()[offset:offset + VARIANT_QUESTIONS]


class Retriever:
    """BM25 over every snippet of the sample (685 passages), as the product's embedded index builds it."""

    def __init__(self, directory: Path):
        import pyarrow as pa

        from retrievers.config import IndexConfig
        from retrievers.indexes import EmbeddedIndex, build_embedded

        texts = sorted({s["text"] for raw in bioasq_questions() for s in sample_field(raw["snippets"])})
        chunks = pa.table({"chunk_id": [f"s{i}" for i in range(len(texts))],
                           "doc_id": [f"s{i}" for i in range(len(texts))], "text": texts})
        build_embedded(IndexConfig(), chunks, None, directory)
        self.index = EmbeddedIndex(IndexConfig(), directory)

    def search(self, query: str) -> list[tuple[str, float, str]]:
        return [(hit.chunk_id, hit.score, hit.text) for hit in self.index.search_bm25([query], TOP_K)[0]]


def answer_of(question: Question, passages: list[tuple[str, float, str]], variant: str, broken: bool) -> str:
    if broken:
        return ""
    return question.ideal if variant == "A" else passages[0][2]


def log_mlflow_app(url: str, experiment: str, retriever: Retriever, *, variants: str = "AB", first: int = 0,
                   broken: bool = False, bad: bool = True, references: bool = True) -> Logged:
    """The app traced with `@mlflow.trace`; the caller sets and restores MLflow's global state. `first`:
    where the variants' questions start (asked); `broken`: every answer empty; `bad`: the bad traces too."""
    import mlflow
    from mlflow.entities import Document, SpanType

    mlflow.set_tracking_uri(url)
    logged = Logged(mlflow.set_experiment(experiment).experiment_id)

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(query: str) -> list[Document]:
        return [Document(page_content=text, metadata={"score": score}, id=chunk)
                for chunk, score, text in retriever.search(query)]

    @mlflow.trace
    def rag(question: str, question_data: Question, variant: str | None, reply: bool = True):
        if variant is not None:
            mlflow.update_current_trace(tags={"variant": variant})
        passages = [(d.id, d.metadata["score"], d.page_content) for d in retrieve(question)]
        return {"answer": answer_of(question_data, passages, variant or "A", broken)} if reply else None

    @mlflow.trace
    def failing(question: str):
        mlflow.update_current_trace(tags={"variant": "B"})
        raise RuntimeError("the reader timed out")

    @mlflow.trace(span_type=SpanType.RETRIEVER, name="retrieve")
    def odd_retrieve(query: str):
        return {"hits": 3}

    @mlflow.trace
    def odd(question: str):
        mlflow.update_current_trace(tags={"variant": "A"})
        odd_retrieve(question)
        return {"answer": "something"}

    @mlflow.trace
    def opaque(payload: dict):
        mlflow.update_current_trace(tags={"variant": "B"})
        return {"answer": "something"}

    for variant in variants:
        for question in asked(variant, first):
            rag(question.body, question, variant)
            trace_id = mlflow.get_last_active_trace_id()
            logged.answered[trace_id] = variant
            if references and variant == "A":
                mlflow.log_expectation(trace_id=trace_id, name="expected_response", value=question.ideal)
        for question in asked(variant, first)[:REPEATS]:
            rag(question.body, question, variant)
            logged.repeated.append(mlflow.get_last_active_trace_id())
    if bad:
        extra = questions()[0]
        _log_bad(logged, lambda: rag(extra.body, extra, "B", reply=False), "no_output")
        _log_bad(logged, lambda: rag(extra.body, extra, None), "no_system")
        _log_bad(logged, lambda: failing(extra.body), "error_state")
        _log_bad(logged, lambda: opaque({"ids": [1, 2]}), "unreadable_inputs")
        _log_bad(logged, lambda: odd(extra.body), "unreadable_contexts")
        logged.bad["in_progress"] = _in_progress(url, logged.experiment_id)
    return logged


def _log_bad(logged: Logged, call, reason: str) -> None:
    import mlflow

    try:
        call()
    except RuntimeError:
        pass
    logged.bad[reason] = mlflow.get_last_active_trace_id()


def _in_progress(url: str, experiment_id: str) -> str:
    """A trace the store holds as started and not finished (an app still running, or one that died)."""
    import time
    import uuid

    from mlflow.entities import TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.client import TracingClient

    trace_id = "tr-" + uuid.uuid4().hex
    TracingClient(url).start_trace(TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=int(time.time() * 1000), state=TraceState.IN_PROGRESS, tags={"variant": "A"}))
    return trace_id


def otlp_exporter(url: str, experiment_id: str):
    """The OpenTelemetry SDK's OTLP/HTTP (protobuf) exporter, sending to the MLflow server's /v1/traces,
    the experiment in the `x-mlflow-experiment-id` header."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"x-mlflow-experiment-id": experiment_id})


def log_otel_app(exporter, experiment_id: str, retriever: Retriever) -> Logged:
    """The same app instrumented with the OpenTelemetry SDK only: a root `invoke_workflow` span holding
    the question and answer as `gen_ai.input.messages` / `gen_ai.output.messages`, a `retrieval` span
    with `gen_ai.retrieval.documents` (id, score, content), a `chat` span for the reader; its variant the
    root span's OTEL_VARIANT attribute. `exporter`: otlp_exporter(...), or any SpanExporter."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "bioasq-rag"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("bioasq-rag")
    logged = Logged(experiment_id)
    try:
        for variant in "AB":
            for question in asked(variant):
                logged.answered[_otel_rag(tracer, retriever, question, variant)] = variant
            for question in asked(variant)[:REPEATS]:
                logged.repeated.append(_otel_rag(tracer, retriever, question, variant))
        extra = questions()[0]
        logged.bad["no_output"] = _otel_rag(tracer, retriever, extra, "B", reply=False)
        logged.bad["error_state"] = _otel_rag(tracer, retriever, extra, "B", fail=True)
        logged.bad["no_system"] = _otel_rag(tracer, retriever, extra, None)
        logged.bad["unreadable_inputs"] = _otel_rag(tracer, retriever, extra, "A", ask=False)
        running = tracer.start_span("invoke_workflow bioasq-rag")  # a request still running: its root
        with tracer.start_as_current_span("retrieval bm25", context=_context_of(running)):  # not ended
            pass
        logged.bad["in_progress"] = "tr-" + format(running.get_span_context().trace_id, "032x")
        provider.force_flush()
    finally:
        provider.shutdown()
    return logged


def _context_of(span):
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _otel_rag(tracer, retriever: Retriever, question: Question, variant: str | None, *, reply: bool = True,
              fail: bool = False, ask: bool = True) -> str:
    """One request; returns the MLflow trace id the server gives it (`tr-` and the OTel trace id)."""
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span("invoke_workflow bioasq-rag") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_workflow")
        if ask:
            root.set_attribute("gen_ai.input.messages", _messages("user", question.body))
        if variant is not None:
            root.set_attribute(OTEL_VARIANT, variant)
        with tracer.start_as_current_span("retrieval bm25") as span:
            passages = retriever.search(question.body)
            span.set_attribute("gen_ai.operation.name", "retrieval")
            span.set_attribute("gen_ai.retrieval.query.text", question.body)
            span.set_attribute("gen_ai.retrieval.documents", json.dumps(
                [{"id": chunk, "score": score, "content": text} for chunk, score, text in passages]))
        answer = answer_of(question, passages, variant or "A", broken=False)
        with tracer.start_as_current_span("chat reader") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", "extractive-reader")
            if fail:
                span.set_status(Status(StatusCode.ERROR, "the reader timed out"))
                root.set_status(Status(StatusCode.ERROR, "the reader timed out"))
            else:
                span.set_attribute("gen_ai.output.messages", _messages("assistant", answer))
        if reply and not fail:
            root.set_attribute("gen_ai.output.messages", _messages("assistant", answer))
        return "tr-" + format(root.get_span_context().trace_id, "032x")
