"""`ccrs stats RUN_DIR` on labels an active design drew (tests/pipelines/tools/active_run.py): the weighted
estimates, `design` and `decisions` in stats.json's human_calibrated block, the labels spent and the
decisions in the verdict and on the console; a missing or inconsistent design record refused in one line
(exit 2); a run's own reduce stage weights them as `ccrs stats` does."""
from __future__ import annotations

import json

import pytest

from pipelines import cli
from pipelines.tools import labeling
from tests.pipelines.tools.active_run import METRIC, write_active_run
from tests.pipelines.tools.test_labeling_active import label_next, open_active


@pytest.fixture(scope="module")
def labeled(tmp_path_factory):
    """A run whose every drawn question is labeled (budget 110 of 120, margin 0.3)."""
    run = write_active_run(tmp_path_factory.mktemp("active") / "run", questions=120)
    store, questions = open_active(run, budget=110.0, margin=0.3)
    while label_next(store, questions) is not None:
        pass
    return run


def stats(run, out, capsys) -> tuple[int, str, str]:
    code = cli.main(["stats", str(run.root), "--out", str(out), "--b", "200", "--no-progress", "--markdown"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_stats_writes_the_weighted_estimates_the_design_and_the_decisions(labeled, tmp_path, capsys):
    code, out, _ = stats(labeled, tmp_path / "out", capsys)
    assert code == 0
    written = json.loads((tmp_path / "out" / "stats.json").read_text())
    block = written["per_metric"][METRIC]["human_calibrated"]
    design = block["design"]
    drawn = sum(json.loads(labeled.labels_design.read_text())[METRIC]["questions"][i]["drawn"]
                for i in range(120))
    assert design["labels_spent"] == {"questions": drawn, "answers": 3 * drawn} and design["drawn"] == drawn
    assert design["rule"] == "proportional to uncertainty"
    assert design["uncertainty"] == "systems' disagreement"
    assert design["probabilities"]["min"] >= design["floor"] - 1e-12 and design["budget"] == 110.0
    decisions = {(pair["a"], pair["b"]): pair["decision"] for pair in block["decisions"]["pairs"]}
    assert decisions == {("A", "B"): "different", ("A", "C"): "different", ("B", "C"): "equivalent"}
    assert block["decisions"]["stop"] == "settled" and block["interval"] == {s: "active t" for s in "ABC"}
    assert block["means"]["A"] - block["means"]["B"] > 0.3 and block["min_labels"] == 50
    assert [pair["significant"] for pair in block["pairwise"]] == [True, True, False]
    assert "### Active labeling: answer_relevancy" in out and "**Labels spent:** " in out
    assert "**You can stop:** every comparison is settled." in out
    assert f"active design: {drawn} questions labeled ({3 * drawn} answers) of {drawn} drawn; decisions: 2 " \
           "different, 1 equivalent, 0 open: labeling can stop" in out
    assert "### Active labeling" in (tmp_path / "out" / "summary.md").read_text()


def test_stats_of_a_small_design_labeled_to_the_end_say_it_has_nothing_more_to_serve(tmp_path, capsys):
    """12 questions, every one drawn and labeled: no interval below 50 labels, every comparison open, and
    the design exhausted; what is printed is what stats.json holds."""
    run = write_active_run(tmp_path / "run", questions=12)
    store, questions = open_active(run, budget=12.0)
    while label_next(store, questions) is not None:
        pass
    code, out, _ = stats(run, tmp_path / "out", capsys)
    assert code == 0
    written = json.loads((tmp_path / "out" / "stats.json").read_text())
    block = written["per_metric"][METRIC]["human_calibrated"]
    assert block["decisions"]["stop"] == "exhausted" and block["decisions"]["open"] == 3
    assert block["too_few_labels"] == ["A", "B", "C"] and block["design"]["labels_spent"]["questions"] == 12
    assert "**Open:** 3 of 3 comparisons, and every question the design drew is labeled or skipped: it " \
           "has nothing more to serve. `ccrs plan labels --design active` forecasts the labels a settled " \
           "verdict needs." in out
    assert "active design: 12 questions labeled (36 answers) of 12 drawn; decisions: 0 different, 0 " \
           "equivalent, 3 open: every drawn question labeled or skipped (`ccrs plan labels --design " \
           "active` for more)" in out
    assert "0 of 0 pairs differ" in out and "3 systems with too few labels" in out  # the weighted block's


def _copy(run, tmp_path):
    import shutil

    from tasks.runtime.layout import RunLayout

    shutil.copytree(run.root, tmp_path / "copy")
    return RunLayout(tmp_path / "copy")


def test_a_missing_design_record_is_refused_in_one_line(labeled, tmp_path, capsys):
    run = _copy(labeled, tmp_path)
    run.labels_design.unlink()
    code, _, err = stats(run, tmp_path / "out", capsys)
    assert code == 2 and err.strip().count("\n") == 0
    assert "come from an active design whose record is missing" in err


def test_a_design_edited_by_hand_is_refused_in_one_line(labeled, tmp_path, capsys):
    run = _copy(labeled, tmp_path)
    data = json.loads(run.labels_design.read_text())
    data[METRIC]["questions"][3]["probability"] = 0.999
    run.labels_design.write_text(json.dumps(data))
    code, _, err = stats(run, tmp_path / "out", capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "edited by hand" in err


def test_a_label_of_a_question_the_design_did_not_draw_is_refused(labeled, tmp_path, capsys):
    run = _copy(labeled, tmp_path)
    design = json.loads(run.labels_design.read_text())[METRIC]
    undrawn = next(q["question_id"] for q in design["questions"] if not q["drawn"])
    labeling.append_jsonl(run.labels_file, [{"question_id": undrawn, "system": "A", "metric": METRIC,
                                             "label": 3, "annotator": "ann", "time": "2026-11-29T00:00:00"}])
    code, _, err = stats(run, tmp_path / "out", capsys)
    assert code == 2 and f"did not draw (e.g. {undrawn})" in err


def test_a_changed_run_is_refused(labeled, tmp_path, capsys):
    import pandas as pd

    run = _copy(labeled, tmp_path)
    path = next(run.root.glob("judge_*/scores.parquet"))
    scores = pd.read_parquet(path)
    scores.loc[0, "score"] = 1.0 - scores.loc[0, "score"]
    scores.to_parquet(path, index=False)
    code, _, err = stats(run, tmp_path / "out", capsys)
    assert code == 2 and "the run changed since the design was drawn" in err


def test_a_runs_reduce_stage_weights_active_labels_as_ccrs_stats_does(labeled, tmp_path, capsys):
    """The reduce stage (its statistics with the contributors, as `ccrs run --from-stage reduce` and a
    rerun night compute them) writes the same weighted block as `ccrs stats RUN_DIR`."""
    from judges.suite import metric_order
    from pipelines.extensions import statistics_contributors
    from tasks.reduce import concat_scores, contributed_statistics, load_scores, run_scores
    from tasks.runtime.contributions import StatisticsContext

    code, _, _ = stats(labeled, tmp_path / "out", capsys)
    assert code == 0
    by_command = json.loads((tmp_path / "out" / "stats.json").read_text())["per_metric"][METRIC]
    scores = concat_scores([load_scores(path) for path in run_scores(labeled.root)])
    reduced = contributed_statistics(statistics_contributors(), StatisticsContext(labeled.root), scores,
                                     b=200, seed=0, alpha=0.05, metric_order=list(metric_order()),
                                     metric_suites={})
    block = reduced["per_metric"][METRIC]["human_calibrated"]
    assert block["design"] == by_command["human_calibrated"]["design"]
    assert block["decisions"] == by_command["human_calibrated"]["decisions"]
    assert block["means"] == pytest.approx(by_command["human_calibrated"]["means"])
    assert block["interval"] == {s: "active t" for s in "ABC"}


def test_the_reduce_stage_key_covers_the_design_record(labeled):
    from pipelines.extensions.labels import fingerprint
    from tasks.runtime.contributions import StatisticsContext
    from tasks.runtime.stage import file_fingerprint

    assert file_fingerprint(labeled.labels_design) in fingerprint(StatisticsContext(labeled.root))
