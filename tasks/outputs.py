"""Outputs of the user's own RAG systems as the systems of a run (`ccrs evaluate`, `ccrs_eval.evaluate`).

One row = one system's answer to one question, in JSONL, CSV or Parquet (or a DataFrame / list of dicts).
Column names of the evaluation ecosystems are accepted as they are (RAGAS, DeepEval, MLflow, GroUSE,
BioASQ); see COLUMN_ALIASES. The system is the `system` column, else the file's stem.

The `outputs` stage turns them into the files the judge stage reads, in the run layout
(`RunLayout.queries`, `.retrieved`, `.generations` under `outputs/`): every answer becomes a generated
row whose own contexts ride along in a `contexts` column (a user's system retrieves for itself), so the
judge, reduce and track stages run unchanged. Bad input raises OutputsError, one line, before any work.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.runtime.layout import GENERATIONS_FILE, OUTPUTS_STAGE, QUERIES_FILE, RETRIEVED_FILE
from tasks.runtime.stage import code_version, run_stage, stage_key

# canonical field -> the column names accepted for it, in order of preference
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "input", "user_input", "query"),
    "answer": ("answer", "actual_output", "response"),
    "contexts": ("contexts", "references", "retrieved_contexts", "retrieval_context"),
    "reference": ("reference", "expected_output", "ground_truth", "ideal_answer"),
    "question_id": ("question_id", "id"),
    "exact_answers": ("exact_answers",),
    "system": ("system",),
    # the answer's id in the user's own system (a trace or request id): carried onto generations.parquet, so
    # what judged it can be written back where it came from (docs/traces.md)
    "answer_id": ("answer_id", "trace_id", "request_id"),
}
REQUIRED_FIELDS = ("question", "answer")
# the judge input (Metric.inputs) that each optional field provides
FIELD_INPUTS = {"question": "question", "answer": "response", "contexts": "context",
                "reference": "ground_truth"}
INPUT_FIELDS = {judge_input: name for name, judge_input in FIELD_INPUTS.items()}
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
OWN_RETRIEVAL = "own"  # the `retriever` of a user's system in generations.parquet: it retrieved itself
CODE_VERSION = code_version(__name__)


class OutputsError(ValueError):
    """Outputs that cannot be evaluated; the message is one line naming the file, row or column."""


@dataclass(frozen=True)
class Outputs:
    """Canonical rows (question_id, system, question, answer, contexts, reference, exact_answers, source)
    and what the inputs provide."""

    rows: pd.DataFrame
    has_contexts: bool
    has_reference: bool
    sources: tuple[str, ...]

    @property
    def systems(self) -> list[str]:
        return sorted(self.rows["system"].unique())

    @property
    def judge_inputs(self) -> set[str]:
        """The judge inputs (Metric.inputs names) every row provides."""
        fields = {"question", "answer"} | ({"contexts"} if self.has_contexts else set()) | (
            {"reference"} if self.has_reference else set())
        return {FIELD_INPUTS[name] for name in fields}


def accepted_columns_help() -> str:
    """The accepted column names, one line per field (for --help and the README)."""
    return "; ".join(f"{name}: {' | '.join(aliases)}" for name, aliases in COLUMN_ALIASES.items())


# --- reading ---------------------------------------------------------------------------------------------

def read_outputs(data: Any, limit: int | None = None) -> Outputs:
    """Paths (str/Path, or a list of them), a DataFrame or a list of dicts -> validated Outputs."""
    tables = [_canonical(frame, label, stem) for frame, label, stem in _tables(data)]
    rows = pd.concat([table for table, _, _ in tables], ignore_index=True)
    has_contexts = all(contexts for _, contexts, _ in tables)
    has_reference = all(reference for _, _, reference in tables)
    rows = _check_questions(rows)
    if limit is not None:
        if limit < 1:
            raise OutputsError(f"--limit must be at least 1, got {limit}")
        first = list(dict.fromkeys(rows["question_id"]))[:limit]
        rows = rows[rows["question_id"].isin(first)].reset_index(drop=True)
    return Outputs(rows, has_contexts, has_reference, tuple(dict.fromkeys(rows["source"])))


def _tables(data: Any) -> list[tuple[pd.DataFrame, str, str | None]]:
    """(frame, label for messages, system name when the frame has no system column)."""
    if isinstance(data, pd.DataFrame):
        return [(data, "the DataFrame", None)]
    if isinstance(data, (str, Path)):
        data = [data]
    if isinstance(data, Sequence) and data and all(isinstance(item, dict) for item in data):
        return [(pd.DataFrame(list(data)), "the list of records", None)]
    if not isinstance(data, Iterable) or isinstance(data, dict):
        raise OutputsError(f"outputs must be a path, a list of paths, a DataFrame or a list of dicts, got "
                           f"{type(data).__name__}")
    paths = [Path(item) for item in data]
    if not paths:
        raise OutputsError("no outputs given: name at least one JSONL, CSV or Parquet file")
    stems = [path.stem for path in paths]
    twice = sorted({stem for stem in stems if stems.count(stem) > 1})
    tables = [(_read_file(path), str(path), path.stem) for path in paths]
    if twice and any("system" not in frame.columns for frame, _, _ in tables):
        raise OutputsError(f"two files are named {twice[0]!r}: without a `system` column a file's stem names "
                           "its system; rename one or add the column")
    return tables


def _read_file(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise OutputsError(f"outputs file not found: {path}")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise OutputsError(f"{path}: unknown file type {path.suffix or '(none)'!r}; use JSONL (.jsonl), CSV "
                           "(.csv) or Parquet (.parquet)")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        if kind == "csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False)
        return _read_jsonl(path)
    except OutputsError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas/pyarrow raise many types for a broken file
        raise OutputsError(f"{path}: cannot read it as {kind}: {str(exc).splitlines()[0][:200]}") from exc


def _read_jsonl(path: Path) -> pd.DataFrame:
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise OutputsError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise OutputsError(f"{path}:{number}: each line must be a JSON object, got "
                                   f"{type(record).__name__}")
            records.append(record)
    if not records:
        raise OutputsError(f"{path}: no rows")
    return pd.DataFrame(records)


# --- one table -> canonical columns ------------------------------------------------------------------------

def _column(frame: pd.DataFrame, field: str, label: str) -> str | None:
    present = [name for name in COLUMN_ALIASES[field] if name in frame.columns]
    if len(present) > 1:
        raise OutputsError(f"{label}: columns {present} all mean {field}; keep one")
    return present[0] if present else None


def _canonical(frame: pd.DataFrame, label: str, stem: str | None) -> tuple[pd.DataFrame, bool, bool]:
    if frame.empty:
        raise OutputsError(f"{label}: no rows")
    columns = {field: _column(frame, field, label) for field in COLUMN_ALIASES}
    for field in REQUIRED_FIELDS:
        if columns[field] is None:
            raise OutputsError(f"{label}: no {field} column (accepted: {', '.join(COLUMN_ALIASES[field])}); "
                               f"found {list(frame.columns)}")
    if columns["system"] is None and stem is None:
        raise OutputsError(f"{label}: no system column; name each row's system in a `system` column")
    out = pd.DataFrame({
        "question": [_text(v, label, i, "question", required=True)
                     for i, v in enumerate(frame[columns["question"]])],
        "answer": [_text(v, label, i, "answer") for i, v in enumerate(frame[columns["answer"]])],
    })
    out["system"] = (_key_values(frame[columns["system"]], label, "system") if columns["system"]
                     else [stem] * len(frame))
    out["question_id"] = (_key_values(frame[columns["question_id"]], label, "question_id")
                          if columns["question_id"] else [question_hash(q) for q in out["question"]])
    out["contexts"] = ([_contexts(v, label, i, columns["contexts"]) for i, v in
                        enumerate(frame[columns["contexts"]])] if columns["contexts"] else [[]] * len(frame))
    out["reference"] = ([_text(v, label, i, "reference") for i, v in enumerate(frame[columns["reference"]])]
                        if columns["reference"] else [""] * len(frame))
    out["exact_answers"] = ([_exact(v, label, i) for i, v in enumerate(frame[columns["exact_answers"]])]
                            if columns["exact_answers"] else [[]] * len(frame))
    if columns["answer_id"]:
        out["answer_id"] = _key_values(frame[columns["answer_id"]], label, "answer_id")
    out["source"] = Path(label).name if stem is not None else label
    _reject_repeats(out, label)
    return out, columns["contexts"] is not None, columns["reference"] is not None


def question_hash(question: str) -> str:
    """A stable id for a question given without one: the same text gets the same id in every file."""
    return "q-" + hashlib.sha256(question.strip().encode()).hexdigest()[:12]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value: Any, label: str, row: int, field: str, required: bool = False) -> str:
    if _missing(value):
        value = ""
    if not isinstance(value, str):
        raise OutputsError(f"{label}: row {row}: {field} must be text, got {type(value).__name__}")
    if required and not value.strip():
        raise OutputsError(f"{label}: row {row}: empty {field}")
    return value


def _key_values(column: pd.Series, label: str, field: str) -> list[str]:
    values = []
    for row, value in enumerate(column):
        if _missing(value) or not str(value).strip():
            raise OutputsError(f"{label}: row {row}: empty {field}")
        values.append(str(value).strip())
    return values


def _parsed_list(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] == "[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value.tolist() if hasattr(value, "tolist") else value


def _contexts(value: Any, label: str, row: int, column: str) -> list[str]:
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        return []
    value = _parsed_list(value)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise OutputsError(f"{label}: row {row}: {column} must be a list of strings (in CSV: a JSON list), "
                           f"got {str(value)[:80]!r}")
    return value


def _exact(value: Any, label: str, row: int) -> list:
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        return []
    value = _parsed_list(value)
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise OutputsError(f"{label}: row {row}: exact_answers must be a list of accepted short answers, got "
                           f"{str(value)[:80]!r}")
    return value


def _reject_repeats(rows: pd.DataFrame, label: str) -> None:
    repeated = rows[rows.duplicated(["system", "question_id"], keep=False)]
    if not repeated.empty:
        first = repeated.iloc[0]
        at = repeated.index[(repeated["system"] == first["system"])
                            & (repeated["question_id"] == first["question_id"])].tolist()
        raise OutputsError(f"{label}: system {first['system']!r} answers question {first['question_id']!r} "
                           f"more than once (rows {', '.join(map(str, at[:5]))})")


def _check_questions(rows: pd.DataFrame) -> pd.DataFrame:
    """A question id means one question and one reference in every file; systems seen in two files are
    one system answering each question once."""
    _reject_repeats(rows, "the outputs (all files together)")
    for field in ("question", "reference"):
        texts = rows[rows[field].str.strip() != ""].groupby("question_id")[field].nunique()
        differing = texts[texts > 1]
        if not differing.empty:
            raise OutputsError(f"question {differing.index[0]!r} has {int(differing.iloc[0])} different "
                               f"{field} texts across rows; one question id must mean one {field}")
    reference = (rows[rows["reference"].str.strip() != ""].drop_duplicates("question_id")
                 .set_index("question_id")["reference"])
    rows["reference"] = [reference.get(question_id, "") for question_id in rows["question_id"]]
    return rows


def check_metric_inputs(outputs: Outputs, selected: dict[str, Sequence[Any]]) -> None:
    """Refuse, by name, the selected metrics ({suite: [Metric]}) whose inputs the outputs lack."""
    lacking = {}
    for suite, metrics in selected.items():
        for metric in metrics:
            missing = sorted(set(metric.inputs) - outputs.judge_inputs)
            if missing:
                lacking[f"{metric.name} ({suite})" if suite != "ccrs" else metric.name] = missing
    if lacking:
        fields = sorted({INPUT_FIELDS[name] for missing in lacking.values() for name in missing})
        accepted = "; ".join(f"{f}: {' | '.join(COLUMN_ALIASES[f])}" for f in fields)
        raise OutputsError(f"metric(s) {', '.join(lacking)} need {' and '.join(fields)}, which the outputs "
                           f"lack (columns {accepted}); add them, or choose metrics without them "
                           "(--metrics, --judges; `ccrs metrics` lists each metric's inputs)")


# --- the stage ---------------------------------------------------------------------------------------------

@dataclass
class OutputsStage:
    queries_path: Path
    retrieved_path: Path
    generations_path: Path
    summary: dict[str, Any]
    reused: bool
    key: str


def queries_frame(rows: pd.DataFrame) -> pd.DataFrame:
    first = rows.drop_duplicates("question_id")
    return pd.DataFrame({
        "query_id": first["question_id"].astype(str), "text": first["question"], "answer": first["reference"],
        "exact_answer": [json.dumps(list(v)) for v in first["exact_answers"]], "qtype": None,
    }).reset_index(drop=True)


def generations_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The generate stage's columns (tasks/generate.py), each answer an `ok` row with its own contexts (and
    its `answer_id` where the outputs give one)."""
    ids = [[f"{system}/{qid}/{rank}" for rank in range(1, len(contexts) + 1)]
           for system, qid, contexts in zip(rows["system"], rows["question_id"], rows["contexts"])]
    given = "answer_id" in rows and rows["answer_id"].notna().any()
    answer_ids = {"answer_id": rows["answer_id"]} if given else {}
    return pd.DataFrame({
        "query_id": rows["question_id"], "system": rows["system"], "retriever": OWN_RETRIEVAL,
        "reader": rows["source"], "prompt": None, "response_raw": rows["answer"], "answer": rows["answer"],
        "tagged": True, "n_chunks_used": [len(c) for c in rows["contexts"]], "n_chunks_truncated": 0,
        "chunk_ids": ids, "prompt_tokens": 0, "completion_tokens": 0, "status": "ok", "error": None,
        "contexts": rows["contexts"], **answer_ids,
    }).sort_values(["system", "query_id"]).reset_index(drop=True)


def outputs_summary(outputs: Outputs) -> dict[str, Any]:
    rows = outputs.rows
    per_system = rows.groupby("system")["question_id"].nunique()
    questions = rows["question_id"].nunique()
    answered_by_all = int((rows.groupby("question_id")["system"].nunique() == len(per_system)).sum())
    return {
        "rows": len(rows),
        "questions": int(questions),
        "systems": {system: {"source": ", ".join(sorted(set(rows.loc[rows["system"] == system, "source"]))),
                             "questions": int(per_system[system])} for system in per_system.index},
        "questions_answered_by_all": answered_by_all,
        "questions_left_out": int(questions - answered_by_all),
        "empty_answers": {k: int(v) for k, v in rows.assign(empty=rows["answer"].str.strip() == "")
                          .groupby("system")["empty"].sum().items() if v},
        "has_contexts": outputs.has_contexts,
        "has_reference": outputs.has_reference,
        "sources": list(outputs.sources),
    }


def run_outputs_stage(run_dir: Path, outputs: Outputs, force: bool = False) -> OutputsStage:
    queries, generations = queries_frame(outputs.rows), generations_frame(outputs.rows)
    content = hashlib.sha256(pd.util.hash_pandas_object(outputs.rows.astype(str), index=False)
                             .values.tobytes()).hexdigest()[:16]
    key = stage_key(OUTPUTS_STAGE, {"rows": content}, [], CODE_VERSION)

    def write(out_dir: Path) -> dict:
        queries.to_parquet(out_dir / QUERIES_FILE, index=False)
        empty_retrieval().to_parquet(out_dir / RETRIEVED_FILE, index=False)
        generations.to_parquet(out_dir / GENERATIONS_FILE, index=False)
        return outputs_summary(outputs)

    result = run_stage(run_dir, OUTPUTS_STAGE, key, write, force=force)
    return OutputsStage(result.out_dir / QUERIES_FILE, result.out_dir / RETRIEVED_FILE,
                        result.out_dir / GENERATIONS_FILE, result.summary, result.reused, key)


def empty_retrieval() -> pd.DataFrame:
    """retrieved.parquet with no rows: the systems' contexts are in generations.parquet."""
    return pd.DataFrame({"query_id": pd.Series(dtype=str), "retriever": pd.Series(dtype=str),
                         "rank": pd.Series(dtype="int64"), "chunk_id": pd.Series(dtype=str),
                         "doc_id": pd.Series(dtype=str), "score": pd.Series(dtype="float64"),
                         "text": pd.Series(dtype=str)})
