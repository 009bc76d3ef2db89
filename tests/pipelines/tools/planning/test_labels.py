"""`ccrs plan labels` on the real 12b pilot (data/bioasq-sample-pilot/extractive_scores.parquet: 32 BioASQ
questions, six extractive systems): token_f1 plays the judge; the human labels are a 0/1 metric of their
own, `acceptable` = round(token_recall), on a seeded random 24 of the 32 questions, predicted by token_f1."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from pipelines import cli
from pipelines.config import REPO_ROOT
from tasks.runtime.layout import RunLayout

PILOT = REPO_ROOT / "data" / "bioasq-sample-pilot" / "extractive_scores.parquet"
LABEL_ARGS = ["--predicted-by", "acceptable=token_f1"]


def acceptable_labels(n_questions: int = 24) -> pd.DataFrame:
    scores = pd.read_parquet(PILOT)
    recall = scores[scores["metric"] == "token_recall"]
    questions = np.random.default_rng(0).choice(sorted(recall["query_id"].unique()), n_questions,
                                                replace=False)
    chosen = recall[recall["query_id"].isin(questions)]
    return pd.DataFrame({"question_id": chosen["query_id"], "system": chosen["system"],
                         "metric": "acceptable", "label": np.round(chosen["score"]).astype(int),
                         "annotator": "scripted"})


@pytest.fixture
def labels_csv(tmp_path):
    path = tmp_path / "labels.csv"
    acceptable_labels().to_csv(path, index=False)
    return path


def plan_labels(tmp_path, *args: str) -> tuple[int, dict | None]:
    out = tmp_path / "plan"
    code = cli.main(["plan", "labels", *args, "--out", str(out)])
    plan_file = out / "labels_plan.json"
    return code, (json.loads(plan_file.read_text()) if plan_file.exists() else None)


def test_width_from_the_pilots_labels(tmp_path, labels_csv, capsys):
    code, plan = plan_labels(tmp_path, "--pilot", str(PILOT), "--labels", str(labels_csv), *LABEL_ARGS,
                             "--width", "0.1", "--questions", "300", "--replicates", "40")
    assert code == 0
    entry = plan["per_metric"]["token_f1"]
    assert entry["source"] == "labels" and entry["human_metric"] == "acceptable"
    rows = {row["system"]: row for row in entry["rows"]}
    assert set(rows) == set(plan["systems"]) == set("ABCDEF")
    # system A's figures are those of its 24 labeled pilot answers
    labels = acceptable_labels()
    scores = pd.read_parquet(PILOT)
    judge = scores[(scores["metric"] == "token_f1") & (scores["system"] == "A")]
    judge = judge.set_index("query_id")["score"]
    mine = labels[labels["system"] == "A"].set_index("question_id")["label"].astype(float)
    assert rows["A"]["n_pilot_labels"] == 24
    assert rows["A"]["rho"] == pytest.approx(np.corrcoef(mine, judge[mine.index])[0, 1])
    assert rows["A"]["sigma_human"] == pytest.approx(mine.std(ddof=1))
    for row in rows.values():
        assert 10 <= row["parametric_n"] <= row["n_labels"] <= 300
        assert row["labels_only"] >= row["parametric_n"]
        assert row["half_width"] <= 0.1 and 0.0 < row["simulated_median_half_width"] < 0.2
    assert plan["labels_per_system"] == {"token_f1": max(row["n_labels"] for row in rows.values())}
    # token_recall has no labels: the assumed-correlation table, said so
    assert plan["per_metric"]["token_recall"]["source"] == "assumed"
    assert set(plan["labels_per_system_assumed"]["token_recall"]) == {"0", "0.5", "0.7", "0.9"}
    printed = capsys.readouterr().out
    assert "| token_f1 | acceptable | A | 24 |" in printed
    assert "note: token_recall: no labels of this metric" in printed
    assert "token_f1: " in printed and "labels per system (from the pilot's labels" in printed


def test_difference_in_a_run_directory_with_its_labels(tmp_path, capsys):
    layout = RunLayout(tmp_path / "run")
    layout.scores("extractive").parent.mkdir(parents=True)
    shutil.copy(PILOT, layout.scores("extractive"))
    layout.labels_dir.mkdir()
    acceptable_labels().to_json(layout.labels_file, orient="records", lines=True)
    declared = {"acceptable": {"scale": [0, 1], "predicted_by": "token_f1"}}
    layout.labels_metrics.write_text(json.dumps(declared))
    code, plan = plan_labels(tmp_path, "--pilot", str(layout.root), "--delta", "0.2", "--metric", "token_f1",
                             "--replicates", "20")
    assert code == 0
    assert (plan["n_pairs"], plan["alpha_per_pair"]) == (15, pytest.approx(0.05 / 15))
    rows = plan["per_metric"]["token_f1"]["rows"]
    assert len(rows) == 15 and all(0.0 <= row["simulated_power"] <= 1.0 for row in rows)
    assert all(row["power"] >= 0.8 for row in rows)
    assert set(plan["per_metric"]) == {"token_f1"}
    assert "Bonferroni, Holm's first step" in capsys.readouterr().out


def test_without_labels_a_table_over_assumed_correlations(tmp_path, capsys):
    code, plan = plan_labels(tmp_path, "--pilot", str(PILOT), "--width", "0.1", "--replicates", "0")
    assert code == 0
    assert plan["labels_per_system"] == {}
    for per_rho in plan["labels_per_system_assumed"].values():
        needed = [per_rho[rho] for rho in ("0", "0.5", "0.7", "0.9")]
        assert needed == sorted(needed, reverse=True) and needed[0] > needed[-1]
    assert all(row["simulated_median_half_width"] is None for row in plan["per_metric"]["token_f1"]["rows"])
    assert "| token_f1 | labels per system |" in capsys.readouterr().out
    # --scale 0 2: the same scores read as marks of a 0-2 scale, half the spread on [0, 1]
    _, halved = plan_labels(tmp_path, "--pilot", str(PILOT), "--width", "0.1", "--replicates", "0", "--scale",
                            "0", "2")
    for row, half in zip(plan["per_metric"]["token_f1"]["rows"], halved["per_metric"]["token_f1"]["rows"]):
        assert half["sigma_judge"] == pytest.approx(row["sigma_judge"] / 2)


def test_same_seed_same_plan(tmp_path, labels_csv):
    args = ["--pilot", str(PILOT), "--labels", str(labels_csv), *LABEL_ARGS, "--width", "0.1", "--metric",
            "token_f1", "--replicates", "10", "--seed", "7"]
    assert plan_labels(tmp_path / "first", *args) == plan_labels(tmp_path / "second", *args)


def test_too_few_pilot_labels_fall_back_to_assumed_correlations(tmp_path, capsys):
    few = tmp_path / "few.csv"
    acceptable_labels(6).to_csv(few, index=False)
    code, plan = plan_labels(tmp_path, "--pilot", str(PILOT), "--labels", str(few), *LABEL_ARGS, "--width",
                             "0.1", "--metric", "token_f1", "--replicates", "0")
    assert code == 0
    entry = plan["per_metric"]["token_f1"]
    assert entry["source"] == "assumed"
    assert "6 labeled pilot answer(s), fewer than 10" in entry["notes"][0]
    assert "fewer than 10" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--width", "0.1", "--metric", "CC"], "metric(s) ['CC'] not in the pilot"),
    (["--width", "0"], "must be > 0"),
    (["--width", "0.1", "--power", "0.9"], "--power goes with --delta"),
    (["--delta", "0.1", "--power", "1.5"], "power lies strictly between 0 and 1"),
    (["--width", "0.1", "--questions", "5"], "cannot hold"),
    (["--width", "0.1", "--label-scale", "1", "5"], "describe a --labels file"),
    (["--width", "0.1", "--replicates", "-1"], "--replicates"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    code, plan = plan_labels(tmp_path, "--pilot", str(PILOT), *args)
    assert (code, plan) == (2, None)
    error = capsys.readouterr().err
    assert error.startswith("ccrs plan labels: ") and message in error and error.count("\n") == 1


@pytest.mark.parametrize("change, message", [
    ({"label": 3}, "outside their scale"),
    ({"system": "Z"}, "systems the scores lack"),
])
def test_bad_labels_are_one_line_and_exit_2(tmp_path, capsys, change, message):
    bad = acceptable_labels().assign(**change)
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    code, _ = plan_labels(tmp_path, "--pilot", str(PILOT), "--labels", str(path), *LABEL_ARGS, "--width",
                          "0.1")
    assert code == 2
    assert message in capsys.readouterr().err


def test_labels_of_a_human_metric_need_its_judge_metric(tmp_path, labels_csv, capsys):
    code, _ = plan_labels(tmp_path, "--pilot", str(PILOT), "--labels", str(labels_csv), "--width", "0.1")
    assert code == 2
    assert "--predicted-by acceptable=METRIC" in capsys.readouterr().err
