"""Each judgment of a run logged on the trace its answer came from, as MLflow feedback, so the trace view
shows the marks beside the spans.

One feedback per judgment (per repeat where judge.repeats.k > 1): name `ccrs/<metric>`; value the judge's
mark on the metric's own scale (`llm_score`, e.g. 1-5), or the [0, 1] score for metrics that have no mark
(a share of verdicts); the [0, 1] score that feeds the statistics in the metadata beside the run id, prompt
version, metric, suite and repeat; rationale the judge's reply (cut at RATIONALE_CHARS); source LLM_JUDGE
with the judge model as its id.

A judgment whose status is not `ok` (failed, empty_response, skipped) or that has no value writes nothing:
it is counted in the summary by status, and the run's own failure table says why. A feedback already on
the trace with the same name, judge model, prompt version, repeat and value is not written again, so a
rerun over the same traces adds nothing; a different value (another judge setting, a changed answer) is
a new feedback beside the old one.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

FEEDBACK_PREFIX = "ccrs/"
RATIONALE_CHARS = 4000
CUT_MARK = " [... cut]"
WRITTEN_STATUS = "ok"
MAX_WORKERS = 4  # traces written at once on a tracking server; a SQLite store takes one writer at a time


@dataclass
class WriteBackSummary:
    """written: feedbacks logged; already_present: judgments whose feedback was on the trace already;
    not_written: judgments with no value, by status; no_trace: judgments whose (question, system) came from
    no trace; errors: one line per trace whose feedback could not be read or written."""

    written: int = 0
    already_present: int = 0
    not_written: dict[str, int] = field(default_factory=dict)
    no_trace: int = 0
    traces: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "already_present": self.already_present,
                "not_written": dict(sorted(self.not_written.items())), "no_trace": self.no_trace,
                "traces": self.traces, "errors": list(self.errors)}


@dataclass(frozen=True)
class _Feedback:
    name: str
    value: float | int
    rationale: str | None
    judge_model: str
    metadata: dict[str, str]

    @property
    def key(self) -> tuple:
        return _key(self.name, self.judge_model, self.metadata, self.value)


def write_feedback(judgments: pd.DataFrame, trace_ids: Mapping[tuple[str, str], str],
                   tracking_uri: str | None, run_id: str | None, judge_model: str | None = None,
                   prompt_versions: Mapping[str, str] | None = None, max_workers: int = MAX_WORKERS
                   ) -> WriteBackSummary:
    """Log the judgments (the judgments table, judges/suite.py Judgment.COLUMNS) on their traces
    (`trace_ids`: (question_id, system) -> trace id, mapping.TraceRows.trace_ids). `judge_model` and
    `prompt_versions` ({metric: version}) stand in where a judgment's own column is empty."""
    from mlflow.tracing.client import TracingClient

    summary = WriteBackSummary()
    per_trace: dict[str, list[_Feedback]] = {}
    for record in judgments.to_dict("records"):
        trace_id = trace_ids.get((str(record["query_id"]), str(record["system"])))
        feedback = _feedback(record, run_id, judge_model, prompt_versions or {})
        if trace_id is None:
            summary.no_trace += 1
        elif feedback is None:
            status = str(record.get("status") or "no value")
            summary.not_written[status] = summary.not_written.get(status, 0) + 1
        else:
            per_trace.setdefault(trace_id, []).append(feedback)
    client = TracingClient(tracking_uri)
    workers = 1 if client.tracking_uri.startswith("sqlite:") else max(1, max_workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ccrs-write-back") as pool:
        outcomes = list(pool.map(lambda item: _write_trace(client, *item), per_trace.items()))
    for written, present, error in outcomes:
        summary.written += written
        summary.already_present += present
        summary.errors += [error] if error else []
    summary.traces = len(per_trace)
    return summary


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _value(record: Mapping[str, Any]) -> float | int | None:
    """The mark on the metric's scale, else the [0, 1] score; integral marks as int."""
    value = record.get("llm_score")
    value = record.get("score") if _missing(value) else value
    if _missing(value):
        return None
    value = float(value)
    return int(value) if value.is_integer() and not _missing(record.get("llm_score")) else value


def _feedback(record: Mapping[str, Any], run_id: str | None, judge_model: str | None,
              prompt_versions: Mapping[str, str]) -> _Feedback | None:
    value = _value(record)
    if record.get("status") != WRITTEN_STATUS or value is None:
        return None
    metric = str(record["metric"])
    metadata = {"run_id": run_id or "", "metric": metric, "suite": str(record.get("suite") or ""),
                "prompt_version": _text(record.get("prompt_version")) or prompt_versions.get(metric, ""),
                "score": "" if _missing(record.get("score")) else f"{float(record['score']):.6g}",
                "repeat": "" if _missing(record.get("repeat")) else str(int(record["repeat"])),
                "question_id": str(record["query_id"]), "system": str(record["system"])}
    return _Feedback(FEEDBACK_PREFIX + metric, value, _rationale(record),
                     _text(record.get("judge_model")) or judge_model or "unknown", metadata)


def _text(value: Any) -> str | None:
    return None if _missing(value) or not str(value).strip() else str(value)


def _rationale(record: Mapping[str, Any]) -> str | None:
    text = _text(record.get("raw")) or _text(record.get("reason"))
    if text is None or len(text) <= RATIONALE_CHARS:
        return text
    return text[:RATIONALE_CHARS - len(CUT_MARK)] + CUT_MARK


def _key(name: str, judge_model: str | None, metadata: Mapping[str, str] | None, value: Any) -> tuple:
    """What makes two feedbacks the same judgment: the judge's settings and the value, not the run."""
    metadata = metadata or {}
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    number = round(float(value), 6) if numeric else value
    return (name, judge_model, metadata.get("prompt_version", ""), metadata.get("repeat", ""), number)


def _present(client, trace_id: str) -> set[tuple]:
    """The keys of the ccrs feedbacks already on the trace (valid ones: an overridden one is not there)."""
    from mlflow.entities import Feedback

    return {_key(a.name, a.source.source_id if a.source else None, a.metadata, a.value)
            for a in client.get_trace_info(trace_id).assessments
            if isinstance(a, Feedback) and a.name.startswith(FEEDBACK_PREFIX) and a.valid in (True, None)}


def _write_trace(client, trace_id: str, feedbacks: list[_Feedback]) -> tuple[int, int, str | None]:
    """(written, already present, error line or None) for one trace."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.exceptions import MlflowException

    written = present = 0
    try:
        seen = _present(client, trace_id)
        for feedback in feedbacks:
            if feedback.key in seen:
                present += 1
                continue
            client.log_assessment(trace_id, Feedback(
                name=feedback.name, value=feedback.value, rationale=feedback.rationale,
                metadata=feedback.metadata, source=AssessmentSource(
                    source_type=AssessmentSourceType.LLM_JUDGE, source_id=feedback.judge_model)))
            seen.add(feedback.key)
            written += 1
    except MlflowException as exc:
        first = (str(getattr(exc, "message", "")) or str(exc)).splitlines()[0][:200]
        return written, present, f"trace {trace_id}: {first}"
    return written, present, None
