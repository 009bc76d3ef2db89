"""The GQM report sliced by the thesis' question types (pipelines/reporting/gqm_types.py): per-type table
and the systems x question types heatmap, present only where the run's queries carry those types."""
import csv

import numpy as np
import pandas as pd

from pipelines.reporting.gqm import GQMConfig, build_report, load_metric_table
from pipelines.reporting.gqm_types import (
    HEATMAP_FILE,
    QUESTION_TYPES,
    TABLE_FILE,
    grid,
    markdown,
    question_type_files,
    question_type_table,
)
from tasks.runtime.layout import RunLayout

GOALS = GQMConfig.model_validate({"name": "two-goals", "goals": [
    {"id": "G1", "questions": [{"id": "Q1", "component": "generator",
                                "metrics": [{"name": "CC", "role": "primary", "weight": 1.0}]}]},
    {"id": "G2", "questions": [{"id": "Q2", "component": "generator",
                                "metrics": [{"name": "QR", "role": "primary", "weight": 1.0}]}]}]})


def make_run(root, qtypes: list[str], missing: tuple[str, str] | None = None):
    """Two systems, one query per entry of `qtypes`, CC and QR scores (none for the (system, qtype)
    `missing`)."""
    ids = [f"q{i}" for i in range(len(qtypes))]
    (root / "retrieve").mkdir(parents=True)
    pd.DataFrame({"query_id": ids, "qtype": qtypes}).to_parquet(root / "retrieve" / "queries.parquet")
    rng = np.random.default_rng(0)
    rows = [(q, s, m, float(rng.uniform())) for q, t in zip(ids, qtypes) for s in ("a", "b")
            for m in ("CC", "QR") if (s, t) != missing]
    layout = RunLayout(root)
    layout.judge_dir("ccrs").mkdir()
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores("ccrs"))
    return root


def report_of(root) -> dict:
    table, sources = load_metric_table(root)
    return build_report(GOALS, table, sources)


def test_a_testset_run_gets_a_per_type_table_and_heatmap(tmp_path):
    qtypes = [t for t in QUESTION_TYPES for _ in range(2)]
    report = report_of(make_run(tmp_path, qtypes, missing=("b", "double")))
    report["question_types"] = table = question_type_table(report)
    assert table["types"] == list(QUESTION_TYPES) and table["goals"] == ["G1", "G2"]
    assert set(table["systems"]["a"]) == set(QUESTION_TYPES)
    assert "double" not in table["systems"]["b"]  # no score of that slice: no cell, drawn as n/a
    simple = report["systems"]["a"]["by_qtype"]["simple"]
    assert table["systems"]["a"]["simple"] == {"n_queries": 2, "overall": simple["overall"]["score"],
                                               "goals": {g["id"]: g["score"] for g in simple["goals"]}}
    values, double = grid(table), list(QUESTION_TYPES).index("double")
    assert values.shape == (2, 6) and np.isnan(values[1, double]) and np.isfinite(values[0]).all()
    assert np.isfinite(np.delete(values, double, axis=1)).all()
    files = question_type_files(report, tmp_path)
    assert [f.name for f in files] == [TABLE_FILE, HEATMAP_FILE] and all(f.stat().st_size for f in files)
    rows = list(csv.DictReader((tmp_path / TABLE_FILE).open()))
    assert len(rows) == 11
    assert rows[0].keys() == {"system", "question_type", "n_queries", "overall", "G1", "G2"}
    assert "| a |" in markdown(table) and "(n=2)" in markdown(table)


def test_a_run_without_the_thesis_types_gets_neither(tmp_path):
    report = report_of(make_run(tmp_path, ["yesno", "factoid", "list", "summary"]))
    report["question_types"] = question_type_table(report)
    assert report["question_types"] is None
    assert question_type_files(report, tmp_path) == []


def test_other_types_beside_the_thesis_ones_are_named(tmp_path):
    report = report_of(make_run(tmp_path, ["simple", "complex", "yesno"]))
    table = question_type_table(report)
    assert table["types"] == ["simple", "complex"] and table["queries_of_other_types"] == ["yesno"]
