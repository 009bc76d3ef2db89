"""Judgments written back onto their traces as MLflow feedback, read back from a real store; a rerun adds
none."""
from __future__ import annotations

import pandas as pd
import pytest

from judges.suite import Judgment
from pipelines.tools.traces.mapping import trace_rows
from pipelines.tools.traces.select import TraceSelection, select_traces
from pipelines.tools.traces.write_back import RATIONALE_CHARS, write_feedback
from tests.pipelines.tools.traces.app import EXPERIMENT

JUDGE = "smollm2-135m-instruct"
RUN = "run-1"


def _rows(store):
    selection = TraceSelection(experiment=EXPERIMENT, tracking_uri=store.uri, system_from="tag:variant")
    return trace_rows(select_traces(selection).traces, selection)


def _judgments(rows, prompt_version="v1", failed=1) -> pd.DataFrame:
    """Two metrics a row: a 1-5 mark (faithfulness), and a share without a mark (context_precision), the
    last `failed` of them failed."""
    records = []
    for index, (qid, system) in enumerate(zip(rows.rows["question_id"], rows.rows["system"])):
        records.append(Judgment(query_id=qid, system=system, suite="ccrs", metric="faithfulness",
                                score=(index % 5) / 4, llm_score=index % 5 + 1, status="ok",
                                raw=f"Reasoning for {qid}. Score: {index % 5 + 1}",
                                prompt_version=prompt_version, judge_model=JUDGE).record())
        records.append(Judgment(query_id=qid, system=system, suite="ccrs", metric="context_precision",
                                score=0.5, status="ok", raw="2 of 4 relevant", prompt_version=prompt_version,
                                judge_model=JUDGE).record())
    for record in records[-failed:] if failed else []:
        record.update(status="failed", score=None, llm_score=None, reason="request failed: timeout")
    return pd.DataFrame(records)


def _feedback(store, trace_id):
    from mlflow import MlflowClient

    trace = MlflowClient(store.uri).get_trace(trace_id)
    return sorted(trace.search_assessments(type="feedback"), key=lambda a: a.name)


def test_each_judgment_is_feedback_on_its_trace(writable_store):
    rows = _rows(writable_store)
    judgments = _judgments(rows)
    summary = write_feedback(judgments, rows.trace_ids, writable_store.uri, RUN, JUDGE,
                             {"faithfulness": "v1"})
    assert summary.as_dict() == {"written": len(judgments) - 1, "already_present": 0,
                                 "not_written": {"failed": 1}, "no_trace": 0, "traces": len(rows.rows),
                                 "errors": []}
    trace_id = writable_store.good[1, "B"]
    row = rows.rows.set_index("trace_id").loc[trace_id]
    mine = judgments[(judgments["query_id"] == row["question_id"]) & (judgments["system"] == "B")]
    mark = mine.set_index("metric").loc["faithfulness"]
    faithfulness, precision = (_feedback(writable_store, trace_id)[1], _feedback(writable_store, trace_id)[0])
    assert (faithfulness.name, faithfulness.value, faithfulness.rationale) == (
        "ccrs/faithfulness", mark["llm_score"], mark["raw"])
    assert (faithfulness.source.source_type, faithfulness.source.source_id) == ("LLM_JUDGE", JUDGE)
    assert faithfulness.metadata | {"score": None} == {
        "run_id": RUN, "metric": "faithfulness", "suite": "ccrs", "prompt_version": "v1", "repeat": "",
        "question_id": row["question_id"], "system": "B", "score": None}
    assert float(faithfulness.metadata["score"]) == pytest.approx(mark["score"])
    assert (precision.name, precision.value) == ("ccrs/context_precision", 0.5)  # no mark: the [0, 1] share


def test_a_rerun_writes_no_second_copy_and_a_new_setting_writes_anew(writable_store):
    from mlflow import MlflowClient

    rows = _rows(writable_store)
    judgments = _judgments(rows)
    write_feedback(judgments, rows.trace_ids, writable_store.uri, RUN, JUDGE)
    again = write_feedback(judgments, rows.trace_ids, writable_store.uri, "run-2", JUDGE)
    assert (again.written, again.already_present) == (0, len(judgments) - 1)
    traces = MlflowClient(writable_store.uri).search_traces(locations=[writable_store.experiment_id])
    assert sum(len(t.search_assessments(type="feedback")) for t in traces) == len(judgments) - 1
    # the judge's prompt changed: its marks are other judgments, beside the first ones
    changed = write_feedback(_judgments(rows, "v2", failed=0), rows.trace_ids, writable_store.uri, RUN, JUDGE)
    assert (changed.written, changed.already_present) == (len(judgments), 0)


def test_judgments_without_a_trace_and_long_replies(writable_store):
    rows = _rows(writable_store)
    judgments = _judgments(rows, failed=0).iloc[:2].assign(raw="x" * (RATIONALE_CHARS * 2))
    stray = judgments.iloc[:1].assign(query_id="q-unknown")
    summary = write_feedback(pd.concat([judgments, stray]), rows.trace_ids, writable_store.uri, RUN, JUDGE)
    assert (summary.written, summary.no_trace) == (2, 1)
    trace_id = rows.trace_ids[judgments.iloc[0]["query_id"], judgments.iloc[0]["system"]]
    rationale = _feedback(writable_store, trace_id)[0].rationale
    assert len(rationale) == RATIONALE_CHARS and rationale.endswith(" [... cut]")


def test_a_trace_that_cannot_take_feedback_is_one_error_line(writable_store):
    rows = _rows(writable_store)
    judgments = _judgments(rows, failed=0).iloc[:1]
    key = (judgments.iloc[0]["query_id"], judgments.iloc[0]["system"])
    summary = write_feedback(judgments, {key: "tr-00000000000000000000000000000000"}, writable_store.uri,
                             RUN, JUDGE)
    assert summary.written == 0 and len(summary.errors) == 1
    assert summary.errors[0].startswith("trace tr-00000000000000000000000000000000: ")
