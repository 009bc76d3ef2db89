"""`ccrs_eval.compute_stats`: scores you already have, with labels given or a run folder's own (an active
design's weighted as `ccrs stats RUN_DIR` weights them); bad input one line (StatsInputError)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from ccrs_eval import compute_stats
from stats.errors import StatsInputError
from tests.pipelines.tools.active_run import METRIC, write_active_run
from tests.pipelines.tools.test_labeling_active import label_next, open_active


def test_scores_of_two_systems_give_their_means_and_the_files(tmp_path):
    scores = pd.DataFrame({"query_id": ["q1", "q2", "q3"] * 2, "system": ["A"] * 3 + ["B"] * 3,
                           "metric": "CC", "score": [1.0, 0.5, 0.0, 0.25, 0.25, 0.25]})
    result = compute_stats(scores, b=200, out=tmp_path / "out")
    assert result.means().loc["CC"].to_dict() == pytest.approx({"A": 0.5, "B": 0.25})
    assert (tmp_path / "out" / "stats.json").is_file() and result.out_dir == tmp_path / "out"
    with pytest.raises(StatsInputError):
        compute_stats(scores.assign(score=2.0), b=200, out=tmp_path / "bad")


def test_a_run_folder_with_active_labels_gives_the_weighted_block_ccrs_stats_writes(tmp_path, capsys):
    from pipelines import cli

    run = write_active_run(tmp_path / "run", questions=120)
    store, questions = open_active(run, budget=110.0, margin=0.3)
    while label_next(store, questions) is not None:
        pass
    result = compute_stats(run.root, b=200, out=tmp_path / "api")
    assert cli.main(["stats", str(run.root), "--out", str(tmp_path / "cli"), "--b", "200", "--no-progress",
                     "--markdown"]) == 0
    capsys.readouterr()
    by_command = json.loads((tmp_path / "cli" / "stats.json").read_text())["per_metric"][METRIC]
    block = result.stats["per_metric"][METRIC]["human_calibrated"]
    assert block["design"] == by_command["human_calibrated"]["design"]
    assert block["decisions"]["stop"] == "settled" and block["interval"] == {s: "active t" for s in "ABC"}
    assert "### Active labeling" in result.verdict

    run.labels_design.unlink()  # the record gone: refused in one line, as by `ccrs stats`
    with pytest.raises(StatsInputError, match="record is missing"):
        compute_stats(run.root, b=200, out=tmp_path / "again")
    given = compute_stats(run.root, labels=run.labels_file, label_scale=(1, 5), b=200, out=tmp_path / "given")
    assert "design" not in given.stats["per_metric"][METRIC]["human_calibrated"]  # as `--labels` takes them
