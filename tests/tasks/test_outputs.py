"""The user's outputs as systems (tasks/outputs.py): every accepted column name, every bad input as one
line, and the files the judge stage reads. Real data: the shipped RAGAS-named example (BioASQ questions
answered by two extractive systems) and the GroUSE-format unit tests of data/grouse-bioasq."""
import json
from pathlib import Path

import pandas as pd
import pytest

from judges.suite import get_suite
from tasks.runtime.judge_session import load_samples
from tasks.runtime.layout import RunLayout
from tasks.outputs import (
    COLUMN_ALIASES,
    OutputsError,
    check_metric_inputs,
    question_hash,
    read_outputs,
    run_outputs_stage,
)
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "ragas-two-systems.jsonl"
GROUSE_TESTS = REPO / "data" / "grouse-bioasq" / "test.jsonl"


def example_rows() -> list[dict]:
    return [json.loads(line) for line in EXAMPLE.read_text().splitlines()]


def grouse_file(path: Path, test_type: int) -> Path:
    """One GroUSE unit-test type (one answer per question) as a file of its own, public format unchanged."""
    tests = [json.loads(line) for line in GROUSE_TESTS.read_text().splitlines()]
    chosen = [t for t in tests if t["metadata"]["test_type"] == test_type]
    path.write_text("".join(json.dumps(t) + "\n" for t in chosen))
    return path


def ccrs_metrics(names=("CC", "QR", "ID", "AC", "IR")):
    suite = get_suite("ccrs")
    return {"ccrs": [suite.metrics[name] for name in names]}


def test_ragas_columns_are_read_as_they_are():
    outputs = read_outputs(EXAMPLE)
    assert outputs.systems == ["top1-sentence", "top3-sentences"]
    assert outputs.has_contexts and outputs.has_reference
    row = outputs.rows.iloc[0]
    source = example_rows()[0]
    assert row["question"] == source["user_input"] and row["answer"] == source["response"]
    assert row["contexts"] == source["retrieved_contexts"] and row["reference"] == source["reference"]
    assert row["question_id"] == question_hash(source["user_input"])
    check_metric_inputs(outputs, ccrs_metrics())  # every CCRS metric has its inputs


@pytest.mark.parametrize("field", ["question", "answer", "contexts", "reference", "question_id"])
def test_every_alias_of_a_field_is_accepted(tmp_path, field):
    canonical = {"question": "user_input", "answer": "response", "contexts": "retrieved_contexts",
                 "reference": "reference", "question_id": None}
    for alias in COLUMN_ALIASES[field]:
        rows = []
        for i, row in enumerate(example_rows()[:4]):
            row = dict(row)
            if field == "question_id":
                row[alias] = f"q{i // 2}"
            else:
                row[alias] = row.pop(canonical[field])
            rows.append(row)
        outputs = read_outputs(pd.DataFrame(rows))
        assert len(outputs.rows) == 4, alias


def test_two_grouse_files_without_a_system_column_are_two_systems_named_by_their_stems(tmp_path):
    first, second = grouse_file(tmp_path / "type1.jsonl", 1), grouse_file(tmp_path / "type4.jsonl", 4)
    outputs = read_outputs([first, second])
    assert outputs.systems == ["type1", "type4"]
    assert outputs.has_contexts and outputs.has_reference  # references / expected_output
    assert outputs.rows.groupby("system").size().tolist() == [len(first.read_text().splitlines())] * 2


def test_csv_contexts_are_a_json_list_and_parquet_keeps_lists(tmp_path):
    frame = pd.DataFrame(example_rows()[:4])
    csv = tmp_path / "outputs.csv"
    frame.assign(retrieved_contexts=frame["retrieved_contexts"].map(json.dumps)).to_csv(csv, index=False)
    parquet = tmp_path / "outputs.parquet"
    frame.to_parquet(parquet)
    from_csv, from_parquet = read_outputs(csv).rows, read_outputs(parquet).rows
    expected = frame["retrieved_contexts"].tolist()
    assert from_csv["contexts"].tolist() == from_parquet["contexts"].tolist() == expected


def test_limit_keeps_the_first_questions_of_every_system():
    outputs = read_outputs(EXAMPLE, limit=3)
    assert outputs.rows["question_id"].nunique() == 3 and len(outputs.rows) == 6


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("case, expected", [
    ("no_answer", "no answer column (accepted: answer, actual_output, response)"),
    ("twice", "answers question"),
    ("contexts_not_list", "retrieved_contexts must be a list of strings"),
    ("unknown_type", "unknown file type '.txt'"),
    ("two_question_columns", "all mean question"),
    ("missing", "outputs file not found"),
    ("not_json", "not valid JSON"),
])
def test_bad_input_is_one_clear_line(tmp_path, case, expected):
    rows = example_rows()[:4]
    path = tmp_path / "outputs.jsonl"
    if case == "no_answer":
        _write(path, [{k: v for k, v in row.items() if k != "response"} for row in rows])
    elif case == "twice":
        _write(path, rows + rows[:1])
    elif case == "contexts_not_list":
        _write(path, [{**row, "retrieved_contexts": "one passage"} for row in rows])
    elif case == "unknown_type":
        path = _write(tmp_path / "outputs.txt", rows)
    elif case == "two_question_columns":
        _write(path, [{**row, "question": row["user_input"]} for row in rows])
    elif case == "missing":
        path = tmp_path / "absent.jsonl"
    elif case == "not_json":
        path.write_text("{not json\n")
    with pytest.raises(OutputsError) as error:
        read_outputs(path)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_a_metric_whose_inputs_are_missing_is_refused_by_name_unless_deselected(tmp_path):
    rows = [{k: v for k, v in row.items() if k not in ("retrieved_contexts", "reference")}
            for row in example_rows()]
    outputs = read_outputs(_write(tmp_path / "bare.jsonl", rows))
    with pytest.raises(OutputsError) as error:
        check_metric_inputs(outputs, ccrs_metrics())
    assert str(error.value).startswith("metric(s) CC, ID, AC, IR need contexts and reference")
    check_metric_inputs(outputs, ccrs_metrics(["QR"]))


def test_outputs_stage_writes_what_the_judge_stage_reads(tmp_path):
    rows = example_rows()
    rows[0] = {**rows[0], "response": ""}  # an empty answer: kept, judged as empty_response
    partial = rows[:-1]  # the last question is answered by one system only
    outputs = read_outputs(pd.DataFrame(partial))
    stage = run_outputs_stage(tmp_path, outputs)
    layout = RunLayout(tmp_path)
    assert layout.evaluates_outputs and layout.generations == stage.generations_path
    generations = pd.read_parquet(layout.generations)
    assert len(generations) == len(partial) and (generations["status"] == "ok").all()
    samples, failed = load_samples(pd.read_parquet(layout.queries), pd.read_parquet(layout.retrieved),
                                   generations, top_k=3)
    assert not failed and len(samples) == len(partial)
    first = next(s for s in samples if s.question == partial[0]["user_input"] and s.system == "top1-sentence")
    assert first.context == partial[0]["retrieved_contexts"] and first.response == ""
    assert first.ground_truth == partial[0]["reference"]
    assert stage.summary["questions_left_out"] == 1 and stage.summary["empty_answers"] == {"top1-sentence": 1}
    assert run_outputs_stage(tmp_path, outputs).reused
