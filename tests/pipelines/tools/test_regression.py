import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.tools.regression import RegressionError, paired_table


def _scores(rng, shift_cell=None, shift=0.0):
    rows = []
    base = rng.uniform(0.2, 0.8, size=(60, 2, 2))
    for q in range(60):
        for s, system in enumerate("AB"):
            for m, metric in enumerate(["CC", "IR"]):
                score = base[q, s, m]
                if (system, metric) == shift_cell:
                    score = np.clip(score + shift, 0, 1)
                rows.append({"query_id": f"q{q}", "system": system, "metric": metric, "score": score})
    return pd.DataFrame(rows)


def test_planted_drop_is_a_regression_and_the_rest_unchanged():
    baseline = _scores(np.random.default_rng(0))
    noise = np.random.default_rng(1).normal(0, 0.01, size=len(baseline))
    current = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.15)
    current["score"] = np.clip(current["score"] + noise, 0, 1)
    table = paired_table(current, baseline, alpha=0.05, b=2000, seed=0).set_index(["system", "metric"])
    assert table.loc[("B", "IR"), "verdict"] == "regression"
    assert (table.drop(index=[("B", "IR")])["verdict"] == "same").all()
    assert table["n"].eq(60).all()


def test_runs_without_common_judgments_are_an_error():
    rng = np.random.default_rng(0)
    current = _scores(rng)
    baseline = current.assign(query_id=current["query_id"] + "-other")
    with pytest.raises(RegressionError, match="share no"):
        paired_table(current, baseline, alpha=0.05, b=100, seed=0)


def test_every_cell_reports_its_minimum_detectable_difference():
    baseline = _scores(np.random.default_rng(0))
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


# --- the gate on runs logged to a real (local SQLite) MLflow store --------------------------------------

SETTINGS = {"ccrs.judge_model": "smollm2-135m-instruct", "ccrs.scoring": "expected",
            "ccrs.prompt_versions": '{"ccrs": "v1"}', "ccrs.metrics": "CC,IR", "ccrs.config_name": "nightly"}


class Store:
    """Pipeline runs logged the way pipelines/reporting/tracking.py logs them: the parent run's tags, the
    judgments
    artifact the gate reads (samples/judgments.parquet) and, with `answers`, the per-sample table."""

    def __init__(self, root):
        from mlflow.tracking import MlflowClient

        self.uri = f"sqlite:///{root / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        self.experiment_id = self.client.create_experiment("gate", artifact_location=(root / "art").as_uri())
        self.root = root

    def log(self, scores: pd.DataFrame, failed: int = 0, answers: bool = False, **tags) -> str:
        judgments = scores.assign(status="ok")
        if failed:
            judgments.loc[judgments.index[:failed], ["status", "score"]] = ["failed", None]
        run = self.client.create_run(self.experiment_id, tags={"ccrs.kind": "pipeline", **SETTINGS, **tags})
        path = self.root / f"{run.info.run_id}.parquet"
        judgments.to_parquet(path)
        folder = self.root / run.info.run_id
        folder.mkdir()
        (folder / "judgments.parquet").write_bytes(path.read_bytes())
        self.client.log_artifact(run.info.run_id, str(folder / "judgments.parquet"), "samples")
        if answers:
            self._log_answers(run.info.run_id, scores)
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    def _log_answers(self, run_id: str, scores: pd.DataFrame) -> None:
        import mlflow

        from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT

        samples = scores[["query_id", "system"]].drop_duplicates()
        mlflow.set_tracking_uri(self.uri)
        table = samples.assign(question="question " + samples["query_id"],
                               answer="answer of " + samples["system"] + " to " + samples["query_id"])
        mlflow.log_table(table, artifact_file=PER_SAMPLE_TABLE_ARTIFACT, run_id=run_id)

    def tags(self, run_id: str) -> dict:
        return self.client.get_run(run_id).data.tags


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path)


def _gate(store, **options):
    from pipelines.tools.regression import GateOptions, gate

    return gate(store.uri, "gate", options.pop("run", "latest"), options.pop("baseline", "previous"),
                GateOptions(b=500, **options))


def test_night_one_is_the_baseline_a_drop_regresses_and_the_next_night_compares_with_night_one(store):
    good = _scores(np.random.default_rng(0))
    first = store.log(good)
    report = _gate(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("baseline", 0, None)
    assert "this run is the baseline" in report.markdown
    assert store.tags(first)["regression.status"] == "baseline"

    bad = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    second = store.log(bad)
    report = _gate(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("regression", 3, first)
    assert report.regressed_cells()[0].startswith("B/IR (-0.")
    assert store.tags(second)["regression.baseline"] == first

    third = store.log(bad)  # the regressed night is no baseline: night three is checked against night one
    report = _gate(store)
    assert (report.run_id, report.baseline_id, report.status) == (third, first, "regression")


def test_ad_hoc_runs_and_other_configs_are_never_the_previous_baseline(store):
    scores = _scores(np.random.default_rng(0))
    nightly = store.log(scores)
    store.log(scores, **{"ccrs.adhoc": "true"})
    store.log(scores, **{"ccrs.config_name": "someone-elses"})
    store.log(scores)
    assert _gate(store).baseline_id == nightly


def test_nights_written_to_files_of_other_names_compare_within_their_series(store):
    """The series is the ccrs.series tag, not the config name (`evaluate-<file stem>`): tonight's dated file
    is compared with last night's (exit 3 on a planted drop), and another system's nights in the same
    experiment (`--series staging`) are neither its baseline nor compared with it."""
    from pipelines.tools.regression import alert_payload, baseline_scores

    good = _scores(np.random.default_rng(0))
    bad = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    def night(day: int) -> dict:
        return {"ccrs.series": "prod", "ccrs.config_name": f"evaluate-outputs-2026-11-{day}"}

    first = store.log(good, **night(28))
    report = _gate(store)
    assert report.status == "baseline" and report.series == "prod" and report.other_series == ()
    assert "no baseline yet for series prod; this run is the baseline." in report.markdown
    assert "also holds" not in report.markdown

    store.log(bad, **{"ccrs.series": "staging", "ccrs.config_name": "evaluate-outputs-2026-11-28"})
    report = _gate(store)  # another system's first night: no baseline in its series, the other one named
    assert (report.status, report.baseline_id, report.other_series) == ("baseline", None, ("prod",))
    assert "no baseline yet for series staging" in report.markdown
    assert "This experiment also holds runs of series prod" in report.markdown
    assert ("no baseline yet for series staging: this run is the baseline (this experiment also holds "
            "series prod)") in alert_payload(report)["text"]

    second = store.log(bad, **night(29))  # had it been paired with the staging night, it would pass
    report = _gate(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("regression", 3, first)
    assert report.regressed_cells()[0].startswith("B/IR (-0.")
    assert "(series prod; paired sign-flip test" in report.markdown
    assert baseline_scores(store.uri, "gate", "prod", "evaluate-outputs-2026-11-30").run_id == first
    assert store.tags(second)["regression.baseline"] == first


def test_runs_logged_before_series_tags_are_found_by_their_config_name(store):
    """A series begun before the ccrs.series tag keeps its baseline (the config name's lookup, said in the
    report); an untagged run of another config name is named as such when a night has no baseline."""
    scores = _scores(np.random.default_rng(0))
    before = store.log(scores)  # SETTINGS: config name "nightly", no ccrs.series
    store.log(scores, **{"ccrs.config_name": "evaluate-night1"})
    tagged = store.log(scores, **{"ccrs.series": "gate"})
    report = _gate(store)
    assert (report.status, report.baseline_id) == ("pass", before)
    assert "its baseline logged before series tags and found by its config name nightly" in report.markdown

    store.log(scores, **{"ccrs.series": "gate", "ccrs.config_name": "evaluate-night2"})
    assert _gate(store).baseline_id == tagged  # its series' tagged night: the file's name no longer matters
    store.log(scores, **{"ccrs.series": "other", "ccrs.config_name": "evaluate-night3"})
    report = _gate(store)
    assert report.status == "baseline" and report.other_series == (
        "evaluate-night1 (config name; logged before series tags)", "gate",
        "nightly (config name; logged before series tags)")


def test_another_judge_is_incomparable_unless_allowed_and_failures_above_the_limit_exit_4(store):
    scores = _scores(np.random.default_rng(0))
    store.log(scores)
    store.log(scores, **{"ccrs.judge_model": "llama-3-70b-instruct", "ccrs.scoring": "integer"})
    report = _gate(store)
    assert (report.status, report.exit_code) == ("incomparable", 5)
    assert report.differing == {"judge model": ("smollm2-135m-instruct", "llama-3-70b-instruct"),
                                "scoring mode": ("expected", "integer")}
    assert "judge model: baseline 'smollm2-135m-instruct', run 'llama-3-70b-instruct'" in report.markdown
    allowed = _gate(store, allow_judge_change=True)  # passes: the new judge's run becomes the baseline
    assert allowed.status == "pass" and "--allow-judge-change" in allowed.markdown

    store.log(scores, failed=len(scores) // 10, **{"ccrs.judge_model": "llama-3-70b-instruct",
                                                   "ccrs.scoring": "integer"})  # 10% failed judgments
    report = _gate(store, max_failure_rate=0.05)
    assert (report.status, report.exit_code) == ("failure_rate", 4)
    assert report.failure_rate == pytest.approx(0.1)
    assert _gate(store, max_failure_rate=0.2).status == "pass"


def test_a_named_or_accepted_baseline_moves_it_on_purpose(store):
    from pipelines.tools.regression import mark_baseline

    good = _scores(np.random.default_rng(0))
    first = store.log(good)
    _gate(store)
    changed = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert _gate(store).status == "incomparable"
    assert mark_baseline(store.uri, "gate", "latest", accept=True, name="judge-v2") == changed
    later = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert _gate(store).baseline_id == changed  # the accepted run, not night one
    assert _gate(store, baseline="tag:judge-v2").baseline_id == changed
    assert _gate(store, run=later, baseline=first, allow_judge_change=True).baseline_id == first
    with pytest.raises(RegressionError, match="tagged ccrs.baseline='nope'"):
        _gate(store, baseline="tag:nope")


def test_the_alert_is_slack_compatible_and_machine_readable(store):
    from pipelines.tools.regression import alert_payload

    store.log(_scores(np.random.default_rng(0)))
    _gate(store)
    store.log(_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3))
    payload = alert_payload(_gate(store))
    assert payload["text"].startswith("ccrs nightly [gate] REGRESSION (exit 3): regression in 1 cell(s): "
                                      "A/CC")
    assert payload["status"] == "regression" and payload["exit_code"] == 3
    assert {"system", "metric", "diff", "adjusted_p", "verdict"} <= set(payload["cells"][0])
    json.dumps(payload)


def test_a_run_with_repeats_pairs_each_samples_mean_with_a_run_without():
    from pipelines.tools.regression import scored

    baseline = _scores(np.random.default_rng(0)).assign(status="ok")
    repeats = [baseline.assign(repeat=r, score=(baseline["score"] + (r - 1) * 0.01).clip(0, 1))
               for r in range(3)]
    current = pd.concat(repeats, ignore_index=True)
    current.loc[current.index[:5], ["status", "score"]] = ["failed", None]  # a failed repeat is left out
    means = scored(current)
    assert list(means.columns) == ["query_id", "system", "metric", "score"] and len(means) == len(baseline)
    table = paired_table(means, scored(baseline), alpha=0.05, b=500, seed=0)
    assert table["n"].eq(60).all() and (table["verdict"] == "same").all()


def test_a_run_judged_with_repeats_is_incomparable_with_a_baseline_judged_once(store):
    """Sampled repeats average marks drawn at a temperature: not the greedy marks of a run judged once."""
    scores = _scores(np.random.default_rng(0))
    store.log(scores, **{"ccrs.judge_repeats": "1"})
    repeated = pd.concat([scores.assign(repeat=r) for r in range(3)], ignore_index=True)
    store.log(repeated, **{"ccrs.judge_repeats": "3 x sample (temperature 0.7)"})
    report = _gate(store)
    assert (report.status, report.differing) == (
        "incomparable", {"judge repeats": ("1", "3 x sample (temperature 0.7)")})
    assert _gate(store, allow_judge_change=True).status == "pass"  # each sample's mean pairs with its score


# --- what moved, question by question -------------------------------------------------------------------

def _judged(rows) -> pd.DataFrame:
    """Judgments as the judge stage writes them: (query, system, metric, score, status, raw, reason)."""
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score", "status", "raw", "reason"])


BASELINE_NIGHT = _judged([
    ("q1", "P", "QR", 1.0, "ok", "5", None), ("q2", "P", "QR", 0.5, "ok", "3", None),
    ("q3", "P", "QR", 0.25, "ok", "2", None), ("q4", "P", "QR", 0.5, "ok", "3", None),
    ("q1", "P", "CC", 0.5, "ok", "3", None)])
TONIGHT = _judged([
    ("q1", "P", "QR", 0.25, "ok", "2", None), ("q2", "P", "QR", 0.5, "ok", "3", None),
    ("q3", "P", "QR", 0.75, "ok", "4", None),
    ("q4", "P", "QR", 0.0, "empty_response", None, "empty response scores 0 without calling the judge"),
    ("q1", "P", "CC", 0.75, "ok", "4", None)])
ANSWERS = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "system": "P",
                        "answer": ["Aspirin inhibits COX.", "b", "c", "d"],
                        "question": ["What does aspirin inhibit?", "Q2?", "Q3?", "Q4?"]})


def test_the_questions_that_moved_most_come_first_with_both_nights_answers_replies_and_scores():
    from pipelines.tools.regression import MOVE_COLUMNS, alert_moves_text, question_moves, sample_view

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
    assert alert_moves_text(moves, [("P", "QR")]) == (  # the drops only, largest first
        'Largest drops: P/QR "What does aspirin inhibit?" 1.00 -> 0.25 (answer now "It does not."); '
        'P/QR "Q4?" 0.50 -> 0.00 (answer now "(empty)").')
    assert question_moves(sample_view(TONIGHT, worse), sample_view(BASELINE_NIGHT, ANSWERS), [("P", "QR")],
                          top=1)["query_id"].tolist() == ["q1"]
    every = question_moves(sample_view(TONIGHT), sample_view(BASELINE_NIGHT), None, top=5)
    assert every[["metric", "query_id"]].values.tolist() == [["CC", "q1"], ["QR", "q1"], ["QR", "q4"],
                                                              ["QR", "q3"]]
    assert (every["answer_run"] == "").all() and (every["question"] == "").all()  # no answers at hand
    assert question_moves(sample_view(TONIGHT), sample_view(BASELINE_NIGHT), [], top=5).empty


def test_moves_of_a_night_judged_with_repeats_use_each_samples_mean_and_show_every_reply():
    from pipelines.tools.regression import question_moves, sample_view

    repeats = _judged([("q1", "P", "QR", 0.25, "ok", "2", None),
                       ("q1", "P", "QR", None, "failed", "two", "no number in reply"),
                       ("q1", "P", "QR", 0.75, "ok", "4", None)]).assign(repeat=[0, 1, 2])
    view = sample_view(repeats)
    assert view[["query_id", "score"]].values.tolist() == [["q1", 0.5]]  # the failed repeat is left out
    assert view.loc[0, "judge"] == "[0] 2\n[1] two (failed: no number in reply)\n[2] 4"
    (move,) = question_moves(view, sample_view(BASELINE_NIGHT), None, top=5).itertuples()
    assert (move.query_id, move.score_baseline, move.score_run, move.move) == ("q1", 1.0, 0.5, -0.5)


def test_systems_only_one_night_holds_are_named():
    from pipelines.tools.regression import unpaired_line, unpaired_systems

    run = pd.DataFrame({"system": ["P", "N", "N"]})
    assert unpaired_systems(run, pd.DataFrame({"system": ["P", "O"]})) == {"run_only": ["N"],
                                                                           "baseline_only": ["O"]}
    assert unpaired_line({"run_only": ["N"], "baseline_only": ["O"]}) == (
        "Systems not compared (only in this run: N; only in the baseline: O).")
    assert unpaired_systems(run, run) == {"run_only": [], "baseline_only": []}
    assert unpaired_line(unpaired_systems(run, run)) == ""


def test_the_gate_lists_the_movers_in_its_report_an_mlflow_table_and_the_alert(store):
    from pipelines.tools.regression import MOVES_ARTIFACT, alert_payload

    good = _scores(np.random.default_rng(0))
    store.log(good)
    _gate(store)
    run = store.log(_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3), answers=True)
    report = _gate(store)
    assert report.status == "regression" and set(zip(report.moves["system"], report.moves["metric"])) == {
        ("A", "CC")}
    assert len(report.moves) == 5 and report.moves["move"].lt(0).all()
    assert "## What moved, question by question" in report.markdown
    first = report.moves.iloc[0]
    assert (first.answer_run, first.question) == (f"answer of A to {first.query_id}",
                                                  f"question {first.query_id}")
    assert first.answer_baseline == ""  # the baseline logged no per-sample table: its answers are not at hand
    assert "### A/CC: -0.290 (regression), the 5 question(s) that moved most" in report.markdown
    assert f"| answer of A to {first.query_id} " in report.markdown
    table = store.client.load_table(store.experiment_id, MOVES_ARTIFACT, [run])  # an MLflow table
    assert table["query_id"].tolist() == report.moves["query_id"].tolist()
    summary = json.loads(Path(store.client.download_artifacts(run, "regression/summary.json",
                                                              str(store.root))).read_text())
    assert summary["moves"] == MOVES_ARTIFACT
    payload = alert_payload(report)
    assert "Largest drops: A/CC " in payload["text"] and len(payload["moves"]) == 5

    every = _gate(store, run=run, show_moves=2)  # every cell, 2 questions each: only A/CC moved
    assert every.moves["system"].eq("A").all() and every.moves["rank"].tolist() == [1, 2]
    assert every.markdown.count("No question's score moved.") == 3


def test_a_night_with_a_new_system_or_without_an_old_one_compares_the_systems_both_hold(store):
    scores = _scores(np.random.default_rng(0))
    store.log(scores)
    _gate(store)
    renamed = scores.assign(system=scores["system"].replace({"B": "C"}))  # B left, C came
    store.log(renamed)
    report = _gate(store)
    assert report.status == "pass" and set(report.table["system"]) == {"A"}
    assert report.unpaired == {"run_only": ["C"], "baseline_only": ["B"]}
    assert "Systems not compared (only in this run: C; only in the baseline: B)." in report.markdown
    store.log(scores.assign(system="Z"))
    with pytest.raises(RegressionError, match="share no system"):
        _gate(store)


def test_a_night_whose_every_judgment_failed_is_the_failure_rate_status_with_its_reasons(store):
    """Every judgment failed (a judge answering in prose): the night is `failure_rate` (exit 4) whatever
    --max-failure-rate allows, and the report names the most common reasons."""
    scores = _scores(np.random.default_rng(0))
    store.log(scores)
    failed = scores.assign(score=None, status="failed", reason="no number in reply")
    failed.loc[failed.index[:5], "reason"] = "prose around the number"
    tags = {"ccrs.kind": "pipeline", **SETTINGS}
    run_id = store.client.create_run(store.experiment_id, tags=tags).info.run_id
    (store.root / run_id).mkdir()
    failed.to_parquet(store.root / run_id / "judgments.parquet")
    store.client.log_artifact(run_id, str(store.root / run_id / "judgments.parquet"), "samples")
    store.client.set_terminated(run_id, "FINISHED")
    for limit in (0.05, 1.0):
        report = _gate(store, max_failure_rate=limit)
        assert (report.run_id, report.status, report.exit_code) == (run_id, "failure_rate", 4)
        reasons = "Most common reasons: no number in reply (235); prose around the number (5)."
        assert reasons in report.markdown
    assert "none has a score" in report.markdown and store.tags(run_id)["regression.status"] == "failure_rate"


def test_answers_missing_from_mlflow_come_from_the_runs_own_folder_while_it_still_holds_that_run(store):
    from tasks.runtime.layout import OUTPUTS_STAGE, RunLayout

    def folder_of(run_id: str, holds: str) -> None:
        """The run's folder (tag ccrs.run_dir, a `ccrs evaluate` run) whose track stage logged `holds`."""
        layout = RunLayout(store.root / f"folder-{run_id}")
        for stage in (layout.stage_dir(OUTPUTS_STAGE), layout.track_dir):
            stage.mkdir(parents=True)
        pd.DataFrame({"query_id": ["q0"], "text": ["question zero?"]}).to_parquet(layout.queries)
        pd.DataFrame({"query_id": ["q0"], "system": ["A"], "answer": [f"answer of {run_id}"]}).to_parquet(
            layout.generations)
        (layout.track_dir / "_STAGE.json").write_text(json.dumps({"summary": {"run_id": holds}}))
        store.client.set_tag(run_id, "ccrs.run_dir", str(layout.root))

    baseline = store.log(_scores(np.random.default_rng(0)))
    _gate(store)
    run = store.log(_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3))
    folder_of(baseline, holds=baseline)
    folder_of(run, holds="a-later-night")  # the folder was reused since: not this run's answers
    moves = _gate(store, show_moves=60).moves.set_index(["system", "metric", "query_id"])
    q0 = moves.loc[("A", "CC", "q0")]
    assert (q0.answer_baseline, q0.answer_run, q0.question) == (f"answer of {baseline}", "", "question zero?")


def test_ccrs_compare_puts_the_gates_outcome_in_the_checked_runs_description(store, capsys):
    from pipelines.cli import main
    from pipelines.reporting.tracking import GATE_PREFIX, NOTE_TAG

    first = store.log(_scores(np.random.default_rng(0)))
    second = store.log(_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3))
    store.client.set_tag(second, NOTE_TAG, "Verdict: 2 systems ([summary.md](x))")
    code = main(["compare", "--tracking-uri", store.uri, "--experiment", "gate", "--run", second,
                 "--baseline", first, "--b", "500", "--fail-on-regression"])
    assert code == 3
    note = store.tags(second)[NOTE_TAG].split("\n\n")
    assert note[0].startswith(f"{GATE_PREFIX} **regression** against run {first}: B/IR (-0.")
    assert "regression/summary.md" in note[0] and note[1].startswith("Verdict:")
