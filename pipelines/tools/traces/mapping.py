"""What is read from a trace: the question, the answer, the retrieved contexts in rank order, the reference
and the system, as one row of the outputs table (tasks/outputs.py), or the reason the trace cannot be used.

Defaults (TraceMapping with no field set): the question from the root span's inputs (the inputs themselves
when they are text, else the first of QUESTION_KEYS or `messages` that holds text or a chat list, whose last
user turn is taken, else the first text input); the answer from the root span's outputs (text, else the
first of ANSWER_KEYS, an OpenAI-style `choices[0].message.content`, a chat list's last assistant turn); the
contexts from every RETRIEVER span in the order the spans started, each span's Documents in rank order
(`page_content`); the reference from the trace's `expected_response` expectation. A mapping file (YAML, the
fields of TraceMapping) names other spans, input keys and output fields for apps shaped otherwise.

Spans an app sent through OpenTelemetry (OTLP to the MLflow server) are read the same way, following the
GenAI semantic conventions as MLflow stores them: the root span's `gen_ai.input.messages` and
`gen_ai.output.messages` are its inputs and outputs (MLflow's translation), messages hold their text in
`parts` ({"type": "text", "content": ...}); a retrieval span is one whose `gen_ai.operation.name` is
`retrieval`, its documents the `gen_ai.retrieval.documents` attribute, each document's text its `content`.

Every trace becomes a row or a counted failure (FAILURE_REASONS), never nothing. A trace without a retriever
span is kept with no contexts, and counted under `no_retriever_span` in `warnings`, unless the run's
metrics need contexts (`needs_contexts`): then it is a failure.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from tasks.outputs import question_hash

if TYPE_CHECKING:
    from mlflow.entities import Span, Trace

QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt")
ANSWER_KEYS = ("answer", "output", "content", "response")
RETRIEVER_SPAN_TYPE = "RETRIEVER"  # mlflow.entities.SpanType.RETRIEVER
# OpenTelemetry GenAI semantic conventions (gen-ai/retrieval.md): a retrieval span and its documents
GENAI_OPERATION, GENAI_RETRIEVAL = "gen_ai.operation.name", "retrieval"
GENAI_DOCUMENTS, GENAI_DOCUMENT_TEXT = "gen_ai.retrieval.documents", "content"
# --system-from tag:NAME | metadata:NAME | attribute:NAME (an attribute of the root span, as OTel apps set)
SYSTEM_SOURCES = ("tag", "metadata", "attribute")

IN_PROGRESS, ERROR_STATE, NO_SPANS = "in_progress", "error_state", "no_spans"
UNREADABLE_INPUTS, NO_OUTPUT, UNREADABLE_OUTPUT = "unreadable_inputs", "no_output", "unreadable_output"
NO_RETRIEVER, UNREADABLE_CONTEXTS = "no_retriever_span", "unreadable_contexts"
NO_SYSTEM, REPEATED_QUESTION, REFERENCE_DIFFERS = "no_system", "repeated_question", "reference_differs"
FAILURE_REASONS = {
    IN_PROGRESS: "the trace is still in progress (state IN_PROGRESS)",
    ERROR_STATE: "the app failed (state ERROR)",
    NO_SPANS: "the store returned the trace without spans",
    UNREADABLE_INPUTS: "no question the mapping can read in the inputs",
    NO_OUTPUT: "the answer span has no outputs",
    UNREADABLE_OUTPUT: "no answer the mapping can read in the outputs",
    NO_RETRIEVER: "no retriever span (a failure only where the metrics need contexts)",
    UNREADABLE_CONTEXTS: "a retriever span's outputs are not a list of documents with text",
    NO_SYSTEM: "the tag, metadata or root span attribute named by --system-from is missing",
    REPEATED_QUESTION: "the system answered the same question in an earlier selected trace (kept)",
}
WARNINGS = {NO_RETRIEVER: "kept without contexts: no retriever span",
            REFERENCE_DIFFERS: "another trace of the question holds a different reference; the earliest kept"}
FAILED_COLUMNS = ("trace_id", "system", "reason", "detail")


class TraceInputError(ValueError):
    """A selection, mapping or store that cannot give traces; the message is one line."""


class Unusable(Exception):
    """A trace that cannot be a row, with its reason (FAILURE_REASONS) and what was found."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class TraceMapping(BaseModel):
    """Where a trace's question, answer and contexts are; None everywhere: the defaults (module doc).
    Paths are dotted: `request.query`, `choices.0.message.content` (a number indexes a list, -1 the last)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_span: str | None = None  # the span whose inputs hold the question; None: the root span
    question_key: str | None = None  # the path to the question in those inputs
    answer_span: str | None = None  # the span whose outputs hold the answer; None: the root span
    answer_field: str | None = None  # the path to the answer in those outputs
    retriever_spans: list[str] | None = None  # the names of the retriever spans; None: every RETRIEVER span
    context_field: str = "page_content"  # the text of each retrieved document (a plain string is its text)
    reference_expectation: str = "expected_response"  # the expectation holding the reference answer

    @classmethod
    def from_file(cls, path: str | Path) -> TraceMapping:
        import yaml

        path = Path(path)
        try:
            content = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise TraceInputError(f"--mapping {path}: cannot read it: {str(exc).splitlines()[0]}") from exc
        if not isinstance(content, dict):
            raise TraceInputError(f"--mapping {path}: expected a mapping of fields, got "
                                  f"{type(content).__name__}")
        try:
            return cls(**content)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise TraceInputError(f"--mapping {path}: {'.'.join(map(str, first['loc']))}: {first['msg']} "
                                  f"(fields: {', '.join(cls.model_fields)})") from exc


def system_source(system_from: str | None) -> tuple[str, str] | None:
    """`tag:NAME` / `metadata:NAME` / `attribute:NAME` -> (kind, NAME); None -> None (one system)."""
    if system_from is None:
        return None
    kind, _, name = system_from.partition(":")
    if kind not in SYSTEM_SOURCES or not name.strip():
        raise ValueError(f"--system-from must be tag:NAME, metadata:NAME or attribute:NAME, "
                         f"got {system_from!r}")
    return kind, name.strip()


class Selection(Protocol):
    """What trace_rows reads of a selection (select.TraceSelection)."""

    experiment: str
    system_from: str | None
    mapping: TraceMapping


@dataclass(frozen=True)
class TraceRows:
    """`rows`: the outputs table (question_id, system, question, answer, contexts where any trace has a
    retriever span, reference where any has one) with each row's `trace_id`; `failed`: one row per trace
    that is not a row (FAILED_COLUMNS); `warnings`: rows kept with a caveat, counted by WARNINGS key."""

    rows: pd.DataFrame
    failed: pd.DataFrame
    warnings: dict[str, int] = field(default_factory=dict)

    @property
    def trace_ids(self) -> dict[tuple[str, str], str]:
        """(question_id, system) -> the trace the row came from (write_back.write_feedback's input)."""
        return {(q, s): t for q, s, t in zip(self.rows["question_id"], self.rows["system"],
                                              self.rows["trace_id"])}

    @property
    def failure_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.failed["reason"].value_counts().sort_index().items()}

    def summary(self) -> dict[str, Any]:
        return {"traces": len(self.rows) + len(self.failed), "rows": len(self.rows),
                "failed": self.failure_counts, "warnings": dict(sorted(self.warnings.items())),
                "systems": {str(k): int(v) for k, v in
                            self.rows["system"].value_counts().sort_index().items()}}


def trace_rows(traces: Sequence[Trace], selection: Selection, *, experiment_name: str | None = None,
               needs_contexts: bool = False) -> TraceRows:
    """The traces as outputs rows, in the order they started. One system named `experiment_name` (else the
    selection's experiment) unless the selection's `system_from` names a tag or metadata key."""
    mapping, source = selection.mapping, system_source(selection.system_from)
    default_system = experiment_name or selection.experiment
    rows, failed, warnings = [], [], {}
    for trace in sorted(traces, key=lambda t: (t.info.request_time, t.info.trace_id)):
        system = _system(trace, source, default_system)
        try:
            _usable_state(trace)
            if system is None:
                raise Unusable(NO_SYSTEM, f"{source[0]} {source[1]!r} not set")
            rows.append(_row(trace, mapping, system, needs_contexts, warnings))
        except Unusable as unusable:
            failed.append((trace.info.trace_id, system, unusable.reason, unusable.detail))
    rows, repeated = _first_of_repeats(rows)
    failed += repeated
    table = _table(rows, warnings)
    return TraceRows(table, pd.DataFrame(failed, columns=list(FAILED_COLUMNS)), warnings)


def _system(trace: Trace, source: tuple[str, str] | None, default: str) -> str | None:
    if source is None:
        return default
    kind, name = source
    if kind == "attribute":
        roots = [s for s in trace.data.spans or [] if s.parent_id is None]
        value = roots[0].get_attribute(name) if roots else None
    else:
        value = ((trace.info.tags if kind == "tag" else trace.info.trace_metadata) or {}).get(name)
    return str(value).strip() if value is not None and str(value).strip() else None


def _usable_state(trace: Trace) -> None:
    """A trace still running, failed or without spans is counted as such before anything is read of it
    (an unfinished OTel trace has no root span yet, so no system either)."""
    state = str(trace.info.state)
    if state == "IN_PROGRESS":
        raise Unusable(IN_PROGRESS)
    if state == "ERROR":
        raise Unusable(ERROR_STATE, _error_of(trace))
    if not trace.data.spans:
        raise Unusable(NO_SPANS)


def _row(trace: Trace, mapping: TraceMapping, system: str, needs_contexts: bool,
         warnings: dict[str, int]) -> dict[str, Any]:
    question = question_of(trace, mapping)
    answer = answer_of(trace, mapping)
    contexts = contexts_of(trace, mapping)
    if contexts is None:
        if needs_contexts:
            raise Unusable(NO_RETRIEVER)
        warnings[NO_RETRIEVER] = warnings.get(NO_RETRIEVER, 0) + 1
    return {"question_id": question_hash(question), "system": system, "question": question, "answer": answer,
            "contexts": contexts, "reference": reference_of(trace, mapping), "trace_id": trace.info.trace_id}


def _error_of(trace: Trace) -> str:
    for span in trace.data.spans or []:
        message = getattr(span.status, "description", "") or ""
        if message:
            return message.splitlines()[0][:200]
    return ""


def _span(trace: Trace, name: str | None, reason: str) -> Span:
    spans = sorted(trace.data.spans, key=lambda s: s.start_time_ns or 0)
    found = [s for s in spans if (s.parent_id is None if name is None else s.name == name)]
    if not found:
        raise Unusable(reason, "no root span" if name is None else f"no span named {name!r}")
    return found[0]


def _at(value: Any, path: str) -> Any:
    """The value at a dotted path (None where a step is missing)."""
    for step in path.split("."):
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _message_text(content: Any) -> str | None:
    """A chat message's content: text, or the text parts of a list of parts (OpenAI's `{"type": "text",
    "text": ...}`, the GenAI semantic conventions' `{"type": "text", "content": ...}`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", p.get("content")) for p in content
                 if isinstance(p, dict) and p.get("type", "text") == "text"]
        parts = [p for p in parts if isinstance(p, str)]
        return "\n".join(parts) if parts else None
    return None


def _last_turn(messages: Any, role: str) -> str | None:
    if not isinstance(messages, list):
        return None
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") == role]
    return _message_text(turns[-1].get("content", turns[-1].get("parts"))) if turns else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def question_of(trace: Trace, mapping: TraceMapping) -> str:
    inputs = _span(trace, mapping.question_span, UNREADABLE_INPUTS).inputs
    if mapping.question_key is not None:
        value = _at(inputs, mapping.question_key)
        found = _text(value) or _text(_last_turn(value, "user"))
    else:
        found = _default_question(inputs)
    if found is None:
        where = f"input {mapping.question_key!r}" if mapping.question_key else "the inputs"
        raise Unusable(UNREADABLE_INPUTS, f"no question text in {where}: {_preview(inputs)}")
    return found.strip()


def _default_question(inputs: Any) -> str | None:
    if not isinstance(inputs, dict):
        return _text(inputs) or _text(_last_turn(inputs, "user"))
    for key in (*QUESTION_KEYS, "messages"):
        found = _text(inputs.get(key)) or _text(_last_turn(inputs.get(key), "user"))
        if found:
            return found
    return next((value for value in inputs.values() if _text(value)), None)


def answer_of(trace: Trace, mapping: TraceMapping) -> str:
    outputs = _span(trace, mapping.answer_span, NO_OUTPUT).outputs
    if outputs is None:
        raise Unusable(NO_OUTPUT)
    value = _at(outputs, mapping.answer_field) if mapping.answer_field else _default_answer(outputs)
    if not isinstance(value, str):
        where = f"output field {mapping.answer_field!r}" if mapping.answer_field else "the outputs"
        raise Unusable(UNREADABLE_OUTPUT, f"no answer text in {where}: {_preview(outputs)}")
    return value


def _default_answer(outputs: Any) -> Any:
    if isinstance(outputs, list):
        return _last_turn(outputs, "assistant")
    if not isinstance(outputs, dict):
        return outputs
    for key in ANSWER_KEYS:
        if isinstance(outputs.get(key), str):
            return outputs[key]
    return (_message_text(_at(outputs, "choices.0.message.content"))
            or _last_turn(outputs.get("messages"), "assistant"))


def contexts_of(trace: Trace, mapping: TraceMapping) -> list[str] | None:
    """The retrieved texts in rank order, span after span; None where the trace has no retriever span."""
    names = mapping.retriever_spans
    spans = [s for s in sorted(trace.data.spans, key=lambda s: s.start_time_ns or 0)
             if (s.name in names if names is not None else _is_retriever(s))]
    if not spans:
        return None
    return [text for span in spans for text in _documents(span, mapping.context_field)]


def _is_retriever(span: Span) -> bool:
    return span.span_type == RETRIEVER_SPAN_TYPE or span.get_attribute(GENAI_OPERATION) == GENAI_RETRIEVAL


def _documents(span: Span, text_field: str) -> list[str]:
    documents = span.outputs
    if documents is None and span.get_attribute(GENAI_DOCUMENTS) is not None:
        documents = span.get_attribute(GENAI_DOCUMENTS)
        text_field = GENAI_DOCUMENT_TEXT if text_field == TraceMapping().context_field else text_field
    if documents is None:
        documents = []
    if isinstance(documents, str):  # a JSON string where the exporter could not send a structured value
        try:
            documents = json.loads(documents)
        except ValueError:
            pass
    if not isinstance(documents, list):
        raise Unusable(UNREADABLE_CONTEXTS, f"span {span.name!r}: outputs {_preview(documents)}")
    texts = [doc if isinstance(doc, str) else _at(doc, text_field) for doc in documents]
    if not all(isinstance(text, str) for text in texts):
        raise Unusable(UNREADABLE_CONTEXTS, f"span {span.name!r}: a document without text field "
                                            f"{text_field!r}: {_preview(documents)}")
    return texts


def reference_of(trace: Trace, mapping: TraceMapping) -> str:
    """The newest valid expectation named `reference_expectation`, as text ("" where none)."""
    found = trace.search_assessments(mapping.reference_expectation, type="expectation")
    if not found:
        return ""
    value = max(found, key=lambda a: a.create_time_ms or 0).value
    return value if isinstance(value, str) else json.dumps(value)


def _preview(value: Any) -> str:
    return json.dumps(value, default=str)[:120]


def _first_of_repeats(rows: list[dict]) -> tuple[list[dict], list[tuple]]:
    """A system answers each question once in the outputs table: its earliest trace of a question is the
    row, the later ones are counted failures naming it."""
    first: dict[tuple[str, str], str] = {}
    kept, repeated = [], []
    for row in rows:
        key = (row["question_id"], row["system"])
        if key in first:
            repeated.append((row["trace_id"], row["system"], REPEATED_QUESTION, f"first in {first[key]}"))
        else:
            first[key] = row["trace_id"]
            kept.append(row)
    return kept, repeated


def _table(rows: list[dict], warnings: dict[str, int]) -> pd.DataFrame:
    """The rows as the outputs table: `contexts` only where some trace has a retriever span, `reference`
    only where some trace has one, one reference per question (the earliest trace's)."""
    columns = ["question_id", "system", "question", "answer", "contexts", "reference", "trace_id"]
    table = pd.DataFrame(rows, columns=columns)
    if table["contexts"].isna().all():
        table = table.drop(columns="contexts")
    else:
        table["contexts"] = [c if isinstance(c, list) else [] for c in table["contexts"]]
    given = table[table["reference"].fillna("") != ""]
    if given.empty:
        return table.drop(columns="reference")
    earliest = given.drop_duplicates("question_id").set_index("question_id")["reference"]
    differs = int((given["reference"] != given["question_id"].map(earliest)).sum())
    if differs:
        warnings[REFERENCE_DIFFERS] = differs
    table["reference"] = table["question_id"].map(earliest).fillna("")
    return table
