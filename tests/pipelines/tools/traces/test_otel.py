"""Traces an app sent through the OpenTelemetry SDK (the GenAI semantic conventions, no MLflow in the app)
read like MLflow's own: the question and answer from the root span's messages, the contexts from the
retrieval span's documents in rank order, the variant from a root span attribute, every bad kind counted.
The spans reach a SQLite store the way the MLflow server's /v1/traces stores them (the OTLP protobuf request,
`Span.from_otel_proto`, `log_spans`), without HTTP; tests/pipelines/test_traces_run.py sends them over
OTLP/HTTP to a real `mlflow server`."""
from __future__ import annotations

import pytest

from pipelines.tools.traces.mapping import trace_rows
from pipelines.tools.traces.select import TraceSelection, select_traces
from tests.conftest import copy_empty_mlflow_db, process_state_restored
from tests.pipelines.tools.traces.production_app import (
    OTEL_VARIANT,
    REPEATS,
    Retriever,
    answer_of,
    asked,
    log_otel_app,
)


class StoreExporter:
    """A SpanExporter logging to a tracking store as the MLflow server's OTLP endpoint does."""

    def __init__(self, uri: str, experiment_id: str):
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        self.store, self.experiment_id = SqlAlchemyStore(uri, "unused"), experiment_id

    def export(self, spans):
        from mlflow.entities import Span
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        request = encode_spans(spans)
        converted = [Span.from_otel_proto(span, resource=resource_spans.resource)
                     for resource_spans in request.resource_spans
                     for scope_spans in resource_spans.scope_spans for span in scope_spans.spans]
        self.store.log_spans(self.experiment_id, converted)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis: int = 0) -> bool:
        return True


@pytest.fixture(scope="module")
def otel_store(tmp_path_factory, empty_mlflow_db):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("otel-app")
    uri = copy_empty_mlflow_db(empty_mlflow_db, root / "mlflow.db")  # a new store, without its migrations
    with process_state_restored():
        experiment_id = MlflowClient(uri).create_experiment("otel-app", artifact_location=root.as_uri())
        retriever = Retriever(root / "index")
        logged = log_otel_app(StoreExporter(uri, experiment_id), experiment_id, retriever)
    return uri, logged, retriever


def _rows(uri: str, system_from: str | None = f"attribute:{OTEL_VARIANT}"):
    selection = TraceSelection(experiment="otel-app", tracking_uri=uri, system_from=system_from)
    selected = select_traces(selection)
    return trace_rows(selected.traces, selection, experiment_name=selected.experiment_name,
                      needs_contexts=True)


def test_otel_traces_become_rows_with_their_variant_and_ranked_documents(otel_store):
    uri, logged, retriever = otel_store
    rows = _rows(uri)
    assert dict(zip(rows.rows["trace_id"], rows.rows["system"])) == logged.answered
    by_question = rows.rows.set_index(["system", "question"])
    for variant in "AB":
        for question in asked(variant):
            row = by_question.loc[(variant, question.body)]
            passages = retriever.search(question.body)
            assert row["contexts"] == [text for _, _, text in passages]  # in rank order
            assert row["answer"] == answer_of(question, passages, variant, broken=False)
    assert "reference" not in rows.rows  # no expectation was logged


def test_every_otel_trace_is_a_row_or_counted_under_its_reason(otel_store):
    uri, logged, _ = otel_store
    rows = _rows(uri)
    failed = rows.failed.set_index("trace_id")["reason"].to_dict()
    assert {failed[trace_id]: trace_id for trace_id in logged.bad.values()} == logged.bad
    assert rows.failure_counts == {**{reason: 1 for reason in logged.bad}, "repeated_question": 2 * REPEATS}
    assert len(rows.rows) + len(rows.failed) == logged.traces
    assert "the reader timed out" in rows.failed.set_index("reason").loc["error_state", "detail"]


def test_without_system_from_the_otel_traces_are_one_system(otel_store):
    uri, logged, _ = otel_store
    rows = _rows(uri, system_from=None)
    assert set(rows.rows["system"]) == {"otel-app"}
    assert "no_system" not in rows.failure_counts
