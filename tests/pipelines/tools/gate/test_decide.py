"""The gate's decision (pipelines/tools/gate/decide.py), pure: frames in, a typed outcome out; no MLflow."""
import numpy as np
import pandas as pd
import pytest

from pipelines.extensions.registry import GateInputs
from pipelines.tools.gate.decide import GateOptions, RegressionError, compare, paired_table
from tests.pipelines.tools.gate.fakes import ANSWERS, BASELINE_NIGHT, TONIGHT, judged, planted_scores


def test_planted_drop_is_a_regression_and_the_rest_unchanged():
    baseline = planted_scores(np.random.default_rng(0))
    noise = np.random.default_rng(1).normal(0, 0.01, size=len(baseline))
    current = planted_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.15)
    current["score"] = np.clip(current["score"] + noise, 0, 1)
    table = paired_table(current, baseline, alpha=0.05, b=2000, seed=0).set_index(["system", "metric"])
    assert table.loc[("B", "IR"), "verdict"] == "regression"
    assert (table.drop(index=[("B", "IR")])["verdict"] == "same").all()
    assert table["n"].eq(60).all()


def test_nights_that_share_no_question_pair_nothing_and_their_cells_are_decided_unpaired():
    """Production nights (traces) ask other questions: no pair, so the `unpaired` cell kind tests each cell
    (pipelines/extensions/unpaired.py), a planted drop found, Holm over the cells."""
    baseline = planted_scores(np.random.default_rng(0))
    current = planted_scores(np.random.default_rng(5), shift_cell=("B", "IR"), shift=-0.3)
    current = current.assign(query_id=current["query_id"] + "-tonight")
    assert paired_table(current, baseline, alpha=0.05, b=100, seed=0).empty
    inputs = GateInputs(None, lambda: None, "base", 0.05)
    comparison = compare(_judgments(current), _judgments(baseline), (None, None), inputs, GateOptions(b=2000),
                         "run")
    table = comparison.table.set_index(["system", "metric"])
    assert set(table["basis"]) == {"unpaired"} and table["n"].eq(120).all()
    assert table.loc[("B", "IR"), "verdict"] == "regression"
    assert (table.drop(index=[("B", "IR")])["verdict"] == "same").all()
    assert any("unpaired cells" in note for note in comparison.notes)


def test_runs_without_a_cell_to_decide_are_an_error():
    current = planted_scores(np.random.default_rng(0))
    baseline = current.assign(query_id=current["query_id"] + "-other", system=current["system"] + "2")
    baseline = pd.concat([baseline, current.head(1)])  # one shared system, one score: no cell
    with pytest.raises(RegressionError, match="share no"):
        compare(_judgments(current.head(1)), _judgments(baseline), (None, None),
                GateInputs(None, lambda: None, "base", 0.05), GateOptions(b=100), "run")


def _judgments(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.assign(status="ok", raw_output="", reason="")


def test_every_cell_reports_its_minimum_detectable_difference():
    baseline = planted_scores(np.random.default_rng(0))
    current = baseline.assign(score=np.clip(baseline["score"] + np.random.default_rng(2).normal(0, 0.05,
                                                                                               len(baseline)),
                                            0, 1))
    table = paired_table(current, baseline, alpha=0.05, b=500, seed=0)
    assert list(table.columns)[-1] == "mdd"
    # the noise sd is 0.05 per question: the MDD of 60 questions at alpha 0.05/4 and power 0.8 is about
    # (z_0.99375 + z_0.8) * 0.05 / sqrt(60) = 0.021
    assert table["mdd"].between(0.015, 0.03).all()
    small = paired_table(current[current["query_id"].isin(["q0", "q1", "q2", "q3"])],
                         baseline, alpha=0.05, b=500, seed=0)
    assert (small["mdd"] > 2 * table["mdd"].max()).all()  # a pass on a tiny subset says little


def test_a_run_with_repeats_pairs_each_samples_mean_with_a_run_without():
    from pipelines.tools.gate.decide import scored

    baseline = planted_scores(np.random.default_rng(0)).assign(status="ok")
    repeats = [baseline.assign(repeat=r, score=(baseline["score"] + (r - 1) * 0.01).clip(0, 1))
               for r in range(3)]
    current = pd.concat(repeats, ignore_index=True)
    current.loc[current.index[:5], ["status", "score"]] = ["failed", None]  # a failed repeat is left out
    means = scored(current)
    assert list(means.columns) == ["query_id", "system", "metric", "score"] and len(means) == len(baseline)
    table = paired_table(means, scored(baseline), alpha=0.05, b=500, seed=0)
    assert table["n"].eq(60).all() and (table["verdict"] == "same").all()


def test_the_questions_that_moved_most_come_first_with_both_nights_answers_replies_and_scores():
    from pipelines.tools.gate.decide import MOVE_COLUMNS, question_moves, sample_view

    worse = ANSWERS.assign(answer=["It does not.", "b", "c and more", ""])
    moves = question_moves(sample_view(TONIGHT, worse), sample_view(BASELINE_NIGHT, ANSWERS),
                           [("P", "QR")], top=5)
    assert list(moves.columns) == MOVE_COLUMNS
    # q1 -0.75, then q4 -0.5 before q3 +0.5 (a drop before a rise of the same size); q2 did not move
    assert moves["query_id"].tolist() == ["q1", "q4", "q3"] and moves["rank"].tolist() == [1, 2, 3]
    assert moves["move"].tolist() == [-0.75, -0.5, 0.5]
    first = moves.iloc[0]
    assert (first.score_baseline, first.score_run) == (1.0, 0.25)
    assert first.question == "What does aspirin inhibit?"
    assert (first.answer_baseline, first.answer_run, first.judge_baseline, first.judge_run) == (
        "Aspirin inhibits COX.", "It does not.", "5", "2")
    empty = moves.iloc[1]
    assert empty.answer_run == "" and empty.judge_run == (
        "(empty_response: empty response scores 0 without calling the judge)")
    assert question_moves(sample_view(TONIGHT, worse), sample_view(BASELINE_NIGHT, ANSWERS), [("P", "QR")],
                          top=1)["query_id"].tolist() == ["q1"]
    every = question_moves(sample_view(TONIGHT), sample_view(BASELINE_NIGHT), None, top=5)
    assert every[["metric", "query_id"]].values.tolist() == [["CC", "q1"], ["QR", "q1"], ["QR", "q4"],
                                                              ["QR", "q3"]]
    assert (every["answer_run"] == "").all() and (every["question"] == "").all()  # no answers at hand
    assert question_moves(sample_view(TONIGHT), sample_view(BASELINE_NIGHT), [], top=5).empty


def test_moves_of_a_night_judged_with_repeats_use_each_samples_mean_and_show_every_reply():
    from pipelines.tools.gate.decide import question_moves, sample_view

    repeats = judged([("q1", "P", "QR", 0.25, "ok", "2", None),
                      ("q1", "P", "QR", None, "failed", "two", "no number in reply"),
                      ("q1", "P", "QR", 0.75, "ok", "4", None)]).assign(repeat=[0, 1, 2])
    view = sample_view(repeats)
    assert view[["query_id", "score"]].values.tolist() == [["q1", 0.5]]  # the failed repeat is left out
    assert view.loc[0, "judge"] == "[0] 2\n[1] two (failed: no number in reply)\n[2] 4"
    (move,) = question_moves(view, sample_view(BASELINE_NIGHT), None, top=5).itertuples()
    assert (move.query_id, move.score_baseline, move.score_run, move.move) == ("q1", 1.0, 0.5, -0.5)


def test_systems_only_one_night_holds_are_named():
    from pipelines.tools.gate.decide import unpaired_systems

    run = pd.DataFrame({"system": ["P", "N", "N"]})
    assert unpaired_systems(run, pd.DataFrame({"system": ["P", "O"]})) == {"run_only": ["N"],
                                                                           "baseline_only": ["O"]}
    assert unpaired_systems(run, run) == {"run_only": [], "baseline_only": []}


def test_a_night_is_screened_before_pairing_by_its_failure_rate_its_baseline_and_its_judge():
    from pipelines.tools.gate.decide import GateOptions, differing_settings, screen

    night = TONIGHT.assign(status="ok")
    assert screen("run", night, "base", {}, GateOptions(), "no baseline") is None  # paired next
    assert screen("run", night, None, {}, GateOptions(), "no baseline").markdown == "no baseline"
    failed = night.assign(status=["failed"] + ["ok"] * 4, reason="prose")
    report = screen("run", failed, "base", {}, GateOptions(max_failure_rate=0.1), "")
    assert (report.status, report.exit_code, report.failure_rate) == ("failure_rate", 4, 0.2)
    assert "Most common reasons: prose (1)." in report.markdown
    differing = differing_settings({"ccrs.judge_model": "big", "ccrs.scoring": "integer"},
                                   {"ccrs.judge_model": "small"})
    assert differing == {"judge model": ("small", "big")}  # a setting recorded on one run only is no change
    report = screen("run", night, "base", differing, GateOptions(), "")
    assert (report.status, report.exit_code, report.differing) == ("incomparable", 5, differing)
    assert screen("run", night, "base", differing, GateOptions(allow_judge_change=True), "") is None


def test_every_status_has_one_exit_code_and_the_extensions_stops_and_cell_kinds_add_theirs():
    from pipelines.extensions.registry import gate_statuses, run_stops
    from pipelines.tools.gate.decide import STATUSES, statuses

    stops = {stop.status: stop.exit_code for stop in run_stops()}
    assert stops == {"judge_calibration": 6}  # judge.preflight's stop, declared by its extension
    held = {kind.status: kind.exit_code for kind in gate_statuses()}
    assert held == {"awaiting_labels": 7}  # the labels extension's --require-human
    assert statuses() == STATUSES | stops | held and not (set(stops) | set(held)) & set(STATUSES)
    assert len(set(statuses().values()) - {0}) == len(statuses()) - 2  # pass and baseline share 0, no other


def test_an_extensions_own_stop_is_a_status_of_the_gate_with_no_other_file_edited():
    """Any extension may stop a run before judging: declared once (`stops`), the gate's statuses, a report's
    exit code and the alert's headline take it; nothing of the gate names it."""
    from pipelines.extensions.registry import RunExtension, register_extension, unregister_extension
    from pipelines.tools.gate.alert import alert_payload
    from pipelines.tools.gate.decide import RegressionReport, statuses
    from tasks.runtime.stops import RunStopped

    class ToyStop(RunStopped):
        status, exit_code, headline = "toy_stop", 9, "the toy stopped the run"

    register_extension(RunExtension(name="toy-stop", description="stops", key="toy_stop",
                                    stops=lambda: ToyStop, names=(r"\btoy_stop\b",)))
    try:
        assert statuses()["toy_stop"] == 9
        report = RegressionReport(ToyStop.status, "run-1", None, None, 0, str(ToyStop("stopped here")))
        assert report.exit_code == 9
        assert "TOY_STOP (exit 9): the toy stopped the run." in alert_payload(report)["text"]
    finally:
        unregister_extension("toy-stop")
    assert "toy_stop" not in statuses()
