"""The reduce stage's files: scores read from Parquet/CSV, stats.json, tables and plots written; the
committed pilot's statistics are those recorded before stats/ became pure kernels."""
import json

import pandas as pd
import pytest

from stats.analysis import compute_all
from stats.errors import StatsInputError
from stats.hypotheses import Hypothesis, HypothesisSet
from tasks.reduce import load_hypotheses
from pipelines.reporting import plots, report
from pipelines.reporting.report import reduce_user_scores, write_outputs
from tasks.reduce import concat_scores, load_scores
from pipelines.reporting.verdict import build_stats_summary
from tests.conftest import REPO
from tests.stats.conftest import make_scores

PILOT = REPO / "data" / "bioasq-sample-pilot"
RECORDED = REPO / "tests" / "tasks" / "data" / "pilot"  # recorded before stats/ became pure kernels
CCRS = ("CC", "QR", "ID", "AC", "IR")


def test_write_outputs(tmp_path):
    scores = make_scores()
    result = compute_all(scores, HypothesisSet([Hypothesis("H", [("A", "B")], ["CC"])]), b=200)
    written = write_outputs(result, scores, tmp_path / "out")
    names = {path.relative_to(tmp_path / "out").as_posix() for path in written}
    assert "stats.json" in names
    for table in ("means", "pairwise", "discriminative_power", "descriptive", "correlations", "hypotheses"):
        assert f"tables/{table}.csv" in names and f"tables/{table}.md" in names
    for plot in ("boxplots", "histograms", "query_means", "asl_curves", "correlations"):
        assert f"plots/{plot}.png" in names
    assert all(path.stat().st_size > 0 for path in written)
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == result
    assert len(pd.read_csv(tmp_path / "out" / "tables" / "pairwise.csv")) == 6


TABLES = ("means", "pairwise", "discriminative_power", "discriminative_power_comparison", "descriptive",
          "correlations", "hypotheses")
PLOTS = ("boxplots", "histograms", "query_means", "asl_curves", "correlations")
USER_SCORES_FILES = {"stats.json", "summary.md", *(f"tables/{table}.{kind}" for table in TABLES
                                                   for kind in ("csv", "md")),
                     *(f"plots/{plot}.png" for plot in PLOTS)}


def test_user_scores_give_the_same_files_byte_for_byte_drawn_beside_the_statistics_or_after(tmp_path,
                                                                                         monkeypatch):
    """`ccrs stats`: the plots drawn in a second process and the HSDs on threads, or all one after another
    here: the same 21 files, in the same order, byte for byte."""
    monkeypatch.setattr(plots, "usable_cpus", lambda: 2)
    monkeypatch.setattr(report, "BACKGROUND_PLOTS_MIN_WORK", 0)  # small scores: drawn beside them too
    hypotheses = tmp_path / "h.yaml"
    hypotheses.write_text("hypotheses:\n  - {name: H, pairs: [[A, B]], metrics: [CC]}\n")
    written = {}
    for in_parallel in (False, True):
        out = tmp_path / str(in_parallel)
        paths = reduce_user_scores(make_scores(), out, hypotheses_path=hypotheses, b=200,
                                   in_parallel=in_parallel)[1]
        written[in_parallel] = {path.relative_to(out).as_posix(): path.read_bytes() for path in paths}
    assert list(written[True]) == list(written[False]) and set(written[True]) == USER_SCORES_FILES
    assert written[True] == written[False]


def test_load_scores_csv_and_parquet(tmp_path):
    scores = make_scores()
    scores.to_parquet(tmp_path / "s.parquet")
    csv = scores.copy()
    csv["score"] = csv["score"].astype(object)
    csv.loc[0, "score"] = ""  # a missing judgment
    csv.to_csv(tmp_path / "s.csv", index=False)
    assert len(load_scores(tmp_path / "s.parquet")) == len(scores)
    assert len(load_scores(tmp_path / "s.csv")) == len(scores) - 1


def test_missing_or_unknown_scores_file_is_a_clear_error(tmp_path):
    with pytest.raises(StatsInputError, match="not found"):
        load_scores(tmp_path / "absent.parquet")
    (tmp_path / "s.json").write_text("{}")
    with pytest.raises(StatsInputError, match="Parquet"):
        load_scores(tmp_path / "s.json")


def test_a_metric_without_complete_query_is_written_too(tmp_path):
    scores = make_scores()
    scores = scores[~((scores.system == "C") & (scores.metric == "QR"))]
    result = compute_all(scores, b=20)
    assert (tmp_path / "out" / "stats.json") in write_outputs(result, scores, tmp_path / "out")


def test_the_committed_pilot_gives_the_recorded_statistics(tmp_path):
    """Same judgments, same seed: the same stats.json and verdict as recorded before the refactoring (the
    verdict byte for byte; stats.json's numbers up to the last bits, which summation order in another
    numpy/pandas release may change)."""
    scores = pd.concat([load_scores(PILOT / "judge_ccrs" / "scores.parquet"),
                        load_scores(PILOT / "extractive_scores.parquet")], ignore_index=True)
    result = compute_all(scores, load_hypotheses(RECORDED / "hypotheses.yaml"), b=500, seed=3,
                         metric_order=CCRS, metric_suites={"ccrs": list(CCRS)})
    write_outputs(result, scores, tmp_path)
    written = json.loads((tmp_path / "stats.json").read_text())
    assert_same_up_to_float_rounding(written, json.loads((RECORDED / "stats.json").read_text()))
    verdict = build_stats_summary(result, "pilot", "hypotheses.yaml")
    assert verdict == (RECORDED / "summary.md").read_text()


def test_concatenated_suites_judged_once_get_repeat_0_beside_a_repeated_one():
    once = pd.DataFrame({"query_id": ["q1"], "system": ["A"], "metric": ["rc"], "score": [0.5]})
    twice = pd.DataFrame({"query_id": ["q1", "q1"], "system": ["A", "A"], "metric": ["CC", "CC"],
                          "score": [0.2, 0.4], "repeat": [0, 1]})
    assert concat_scores([once, twice])["repeat"].tolist() == [0, 0, 1]
    assert "repeat" not in concat_scores([once, once]).columns


def assert_same_up_to_float_rounding(got, expected, path="$"):
    """Equal structure, keys, strings and integers; floats equal within 1e-12 relative."""
    if isinstance(expected, float) and isinstance(got, (int, float)):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15), path
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), path
        for key in expected:
            assert_same_up_to_float_rounding(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), path
        for index, (a, b) in enumerate(zip(got, expected)):
            assert_same_up_to_float_rounding(a, b, f"{path}[{index}]")
    else:
        assert got == expected, path
