"""Traces read into the outputs table: questions, answers, contexts in rank order, references, systems from
a tag, and every bad kind counted under its reason."""
from __future__ import annotations

import pandas as pd
import pytest

from pipelines.tools.traces.mapping import (
    NO_RETRIEVER,
    REFERENCE_DIFFERS,
    TraceInputError,
    TraceMapping,
    _default_answer,
    _default_question,
    trace_rows,
)
from pipelines.tools.traces.select import TraceSelection, select_traces
from tasks.outputs import question_hash, read_outputs
from tests.pipelines.tools.traces.app import EXPERIMENT, QUESTIONS, SHAPED_EXPERIMENT, questions

BAD_KINDS = {"in_progress", "error_state", "no_output", "unreadable_inputs", "no_system", "repeated_question"}


def _rows(store, needs_contexts=False, **options):
    selection = TraceSelection(experiment=options.pop("experiment", EXPERIMENT), tracking_uri=store.uri,
                               **options)
    selected = select_traces(selection)
    return trace_rows(selected.traces, selection, experiment_name=selected.experiment_name,
                      needs_contexts=needs_contexts)


def test_good_traces_become_rows_with_contexts_in_rank_order_and_references(app_store):
    rows = _rows(app_store, system_from="tag:variant")
    by_trace = rows.rows.set_index("trace_id")
    for (index, variant), trace_id in app_store.good.items():
        question, row = questions()[index], by_trace.loc[trace_id]
        assert row["system"] == variant and row["question"] == question.body
        assert row["question_id"] == question_hash(question.body)
        assert row["answer"] == (question.ideal if variant == "A" else question.snippets[0])
        assert row["contexts"] == (question.snippets if variant == "A" else question.snippets[::-1])
        # a question's reference is on every row of it, from whichever trace holds one
        assert row["reference"] == (question.ideal if index < 2 else "")
    assert rows.trace_ids[question_hash(questions()[1].body), "B"] == app_store.good[1, "B"]


def test_every_trace_is_a_row_or_a_failure_counted_under_its_reason(app_store):
    rows = _rows(app_store, system_from="tag:variant")
    failed = rows.failed.set_index("trace_id")["reason"].to_dict()
    assert failed == {trace_id: reason for reason, trace_id in app_store.bad.items() if reason in BAD_KINDS}
    assert rows.failure_counts == {reason: 1 for reason in BAD_KINDS}
    # no retriever span: kept without contexts (the metrics chosen need none), counted as a warning
    kept = rows.rows.set_index("trace_id").loc[app_store.bad[NO_RETRIEVER]]
    assert kept["contexts"] == [] and rows.warnings == {NO_RETRIEVER: 1}
    assert len(rows.rows) + len(rows.failed) == len(app_store.good) + len(app_store.bad)
    assert "the reader timed out" in rows.failed.set_index("reason").loc["error_state", "detail"]
    assert rows.summary()["systems"] == {"A": QUESTIONS + 1, "B": QUESTIONS}


def test_no_retriever_span_is_a_failure_where_the_metrics_need_contexts(app_store):
    rows = _rows(app_store, needs_contexts=True, system_from="tag:variant")
    assert rows.failure_counts[NO_RETRIEVER] == 1 and rows.warnings == {}
    assert app_store.bad[NO_RETRIEVER] not in set(rows.rows["trace_id"])


def test_one_system_named_after_the_experiment_by_default(app_store):
    rows = _rows(app_store, filter_string="tags.variant = 'A'")
    assert set(rows.rows["system"]) == {EXPERIMENT}
    # without --system-from the two variants' traces of a question are one system asking it twice
    assert "no_system" not in rows.failure_counts


def test_the_rows_are_outputs_that_read_outputs_accepts(app_store):
    rows = _rows(app_store, system_from="tag:variant")
    outputs = read_outputs(rows.rows)
    assert outputs.has_contexts and outputs.has_reference and outputs.systems == ["A", "B"]
    assert len(outputs.rows) == len(rows.rows)


def test_a_mapping_file_reads_an_app_shaped_otherwise(app_store, tmp_path):
    path = tmp_path / "mapping.yaml"
    path.write_text("question_key: request.q\nanswer_field: result.text\nretriever_spans: [search]\n"
                    "context_field: text\n")
    rows = _rows(app_store, experiment=SHAPED_EXPERIMENT, mapping=TraceMapping.from_file(path))
    row = rows.rows.iloc[0]
    assert (row["question"], row["answer"], row["contexts"]) == (
        questions()[0].body, questions()[0].ideal, questions()[0].snippets)
    assert row["system"] == SHAPED_EXPERIMENT and "reference" not in rows.rows.columns
    # the defaults read the question (the first text input) but not the nested answer, and find no retriever
    plain = _rows(app_store, experiment=SHAPED_EXPERIMENT)
    assert plain.failure_counts == {"unreadable_output": 1}


def test_a_bad_mapping_file_is_one_line(tmp_path):
    path = tmp_path / "mapping.yaml"
    path.write_text("question_field: q\n")
    with pytest.raises(TraceInputError, match=r"question_field: Extra inputs are not permitted \(fields: "):
        TraceMapping.from_file(path)
    with pytest.raises(TraceInputError, match="cannot read it"):
        TraceMapping.from_file(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("inputs", "question"), [
    ("plain text", "plain text"),
    ({"top_k": 3, "query": "q1"}, "q1"),
    ({"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                   {"role": "user", "content": [{"type": "text", "text": "last"}]}]}, "last"),
    ({"k": 3, "text": "any text"}, "any text"),
    ({"model": "m", "input": [{"role": "user", "content": "responses-style"}]}, "responses-style"),
    ({"k": 3}, None),
])
def test_default_question(inputs, question):
    assert _default_question(inputs) == question


@pytest.mark.parametrize(("outputs", "answer"), [
    ("text", "text"),
    ({"output": "o", "meta": 1}, "o"),
    ({"choices": [{"message": {"role": "assistant", "content": "c"}}]}, "c"),
    ({"result": {"text": "nested"}}, None),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "a"),
    ([{"role": "assistant", "content": "listed"}], "listed"),
    (42, 42),
])
def test_default_answer(outputs, answer):
    assert _default_answer(outputs) == answer


def test_a_differing_reference_keeps_the_earliest_and_is_counted():
    from pipelines.tools.traces.mapping import _table

    warnings = {}
    rows = [{"question_id": "q", "system": s, "question": "Q", "answer": "a", "contexts": None,
             "reference": ref, "trace_id": f"t{s}"} for s, ref in (("A", "one"), ("B", "two"))]
    table = _table(rows, warnings)
    assert list(table["reference"]) == ["one", "one"] and warnings == {REFERENCE_DIFFERS: 1}
    assert "contexts" not in table.columns and isinstance(table, pd.DataFrame)
