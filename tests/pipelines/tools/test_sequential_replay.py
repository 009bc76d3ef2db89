"""`ccrs stats SCORES --sequential`: the replay of the recorded pilot's scores written into stats.json and
the verdict, bad options as one line and exit 2 before any work, and questions lacking a score left out
and counted."""
import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.cli import main
from pipelines.reporting.sequential import sequential_section
from pipelines.tools.sequential_replay import replay_block
from stats.sequential import DECISIONS

PILOT = Path(__file__).resolve().parents[3] / "data" / "bioasq-sample-pilot" / "extractive_scores.parquet"
FAST = ["--b", "200", "--no-progress"]


def test_replay_of_the_pilot_adds_the_sequential_block_and_section(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["stats", str(PILOT), "--out", str(out), *FAST, "--sequential", "--margin", "0.05",
                 "--look-every", "4", "--seed", "0", "--max-questions", "28"])
    assert code == 0
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats["per_metric"]) == {"token_f1", "token_recall"}  # the normal statistics are there too
    block = stats["sequential"]
    assert (block["stopped_at"], block["n_questions"], block["family_size"]) == (28, 32, 30)
    assert [look["n_questions"] for look in block["looks"]] == [4, 8, 12, 16, 20, 24, 28]
    assert len(block["decisions"]) == 30 and block["questions_left_out"] == 0
    for decision in block["decisions"]:
        assert {"metric", "a", "b", "decision", "interval"} <= set(decision)
        assert decision["decision"] in DECISIONS
        low, high = decision["interval"]
        assert -1.0 <= low <= high <= 1.0
    assert block["judge_calls_total"] == 32 * 6 * 2 and block["judge_calls_not_sent"] == 4 * 6 * 2
    still_open = sum(decision["decision"] == "open" for decision in block["decisions"])
    line = (f"Not settled: stopped after 28 of 32 questions with {still_open} comparisons open: 48 judge "
            f"calls of 384 not sent (12%)")
    assert line in (out / "summary.md").read_text()
    assert "Sequential decisions (anytime-valid, on the judge's scale)" in capsys.readouterr().out


def test_replay_to_the_last_question_settles_on_the_exact_differences(tmp_path):
    """--target questions: about these 32 questions, so after the last one every interval is exact."""
    out = tmp_path / "out"
    assert main(["stats", str(PILOT), "--out", str(out), *FAST, "--sequential", "--margin", "0.05",
                 "--look-every", "10", "--target", "questions"]) == 0
    block = json.loads((out / "stats.json").read_text())["sequential"]
    assert block["stopped_at"] == 32 and [look["n_questions"] for look in block["looks"]][-1] == 32
    assert all(decision["interval"][0] == decision["interval"][1] for decision in block["decisions"])
    assert "Settled after 32 of 32 questions: 0 judge calls of 384 not sent (0%)" in sequential_section(
        {"sequential": block})


def test_replay_about_the_population_of_questions_by_default_claims_nothing_on_32(tmp_path):
    """The default target (population): 30 comparisons at 0.05 / 30 on 32 questions settle nothing."""
    out = tmp_path / "out"
    assert main(["stats", str(PILOT), "--out", str(out), *FAST, "--sequential", "--margin", "0.05",
                 "--look-every", "10"]) == 0
    block = json.loads((out / "stats.json").read_text())["sequential"]
    assert block["finite_population"] is False and block["stopped_at"] == 32 and not block["settled"]
    assert all(decision["interval"][0] < decision["interval"][1] for decision in block["decisions"])


@pytest.mark.parametrize("options, message", [
    (["--sequential"], "--sequential needs --margin M"),
    (["--sequential", "--margin", "0.05"], "--sequential needs --margin M"),
    (["--sequential", "--margin", "0", "--look-every", "4"], "--margin must be a positive number"),
    (["--sequential", "--margin", "-0.1", "--look-every", "4"], "--margin must be a positive number"),
    (["--sequential", "--margin", "0.05", "--look-every", "0"], "--look-every must be at least 1"),
    (["--margin", "0.05", "--look-every", "4"], "--margin needs --sequential"),
])
def test_bad_sequential_options_are_one_line_and_exit_2(tmp_path, capsys, options, message):
    out = tmp_path / "out"
    assert main(["stats", str(PILOT), "--out", str(out), *FAST, *options]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("ccrs stats: error: ") and message in error and "\n" not in error
    assert not out.exists()  # checked before any statistics


def test_questions_lacking_a_score_are_left_out_and_counted():
    frame = pd.read_parquet(PILOT)
    first = sorted(frame["query_id"].unique())[0]
    missing = (frame["query_id"] == first) & (frame["system"] == "C") & (frame["metric"] == "token_f1")
    frame = frame[~missing]
    args = argparse.Namespace(look_every=8, margin=0.05, alpha=0.05, seed=0, min_questions=None,
                              max_questions=None)
    block = replay_block(frame, ["token_f1", "token_recall"], args)
    assert (block["n_questions"], block["questions_left_out"]) == (31, 1)
    assert "1 question lacking a score" in sequential_section({"sequential": block})


def test_no_sequential_block_no_section():
    assert sequential_section({"per_metric": {}}) == ""
