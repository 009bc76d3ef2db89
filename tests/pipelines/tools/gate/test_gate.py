"""The nightly gate end to end (pipelines/tools/gate/__init__.py: fetch, decide, alert) on runs logged to a
real (local SQLite) MLflow store: the statuses, the report, what lands on the checked run."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.tools.gate.decide import RegressionError
from tests.pipelines.tools.gate.fakes import SETTINGS, gate_of, planted_scores


def test_night_one_is_the_baseline_a_drop_regresses_and_the_next_night_compares_with_night_one(store):
    good = planted_scores(np.random.default_rng(0))
    first = store.log(good)
    report = gate_of(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("baseline", 0, None)
    assert "this run is the baseline" in report.markdown
    assert store.tags(first)["regression.status"] == "baseline"

    bad = planted_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    second = store.log(bad)
    report = gate_of(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("regression", 3, first)
    assert report.regressed_cells()[0].startswith("B/IR (-0.")
    assert store.tags(second)["regression.baseline"] == first

    third = store.log(bad)  # the regressed night is no baseline: night three is checked against night one
    report = gate_of(store)
    assert (report.run_id, report.baseline_id, report.status) == (third, first, "regression")


def test_nights_written_to_files_of_other_names_compare_within_their_series(store):
    """The series is the ccrs.series tag, not the config name (`evaluate-<file stem>`): tonight's dated file
    is compared with last night's (exit 3 on a planted drop), and another system's nights in the same
    experiment (`--series staging`) are neither its baseline nor compared with it."""
    from pipelines.tools.gate.alert import alert_payload
    from pipelines.tools.gate.fetch import baseline_scores

    good = planted_scores(np.random.default_rng(0))
    bad = planted_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    def night(day: int) -> dict:
        return {"ccrs.series": "prod", "ccrs.config_name": f"evaluate-outputs-2026-11-{day}"}

    first = store.log(good, **night(28))
    report = gate_of(store)
    assert report.status == "baseline" and report.series == "prod" and report.other_series == ()
    assert "no baseline yet for series prod; this run is the baseline." in report.markdown
    assert "also holds" not in report.markdown

    store.log(bad, **{"ccrs.series": "staging", "ccrs.config_name": "evaluate-outputs-2026-11-28"})
    report = gate_of(store)  # another system's first night: no baseline in its series, the other one named
    assert (report.status, report.baseline_id, report.other_series) == ("baseline", None, ("prod",))
    assert "no baseline yet for series staging" in report.markdown
    assert "This experiment also holds runs of series prod" in report.markdown
    assert ("no baseline yet for series staging: this run is the baseline (this experiment also holds "
            "series prod)") in alert_payload(report)["text"]

    second = store.log(bad, **night(29))  # had it been paired with the staging night, it would pass
    report = gate_of(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("regression", 3, first)
    assert report.regressed_cells()[0].startswith("B/IR (-0.")
    assert "(series prod; paired sign-flip test" in report.markdown
    assert baseline_scores(store.uri, "gate", "prod", "evaluate-outputs-2026-11-30").run_id == first
    assert store.tags(second)["regression.baseline"] == first


def test_another_judge_is_incomparable_unless_allowed_and_failures_above_the_limit_exit_4(store):
    scores = planted_scores(np.random.default_rng(0))
    store.log(scores)
    store.log(scores, **{"ccrs.judge_model": "llama-3-70b-instruct", "ccrs.scoring": "integer"})
    report = gate_of(store)
    assert (report.status, report.exit_code) == ("incomparable", 5)
    assert report.differing == {"judge model": ("smollm2-135m-instruct", "llama-3-70b-instruct"),
                                "scoring mode": ("expected", "integer")}
    assert "judge model: baseline 'smollm2-135m-instruct', run 'llama-3-70b-instruct'" in report.markdown
    allowed = gate_of(store, allow_judge_change=True)  # passes: the new judge's run becomes the baseline
    assert allowed.status == "pass" and "--allow-judge-change" in allowed.markdown

    store.log(scores, failed=len(scores) // 10, **{"ccrs.judge_model": "llama-3-70b-instruct",
                                                   "ccrs.scoring": "integer"})  # 10% failed judgments
    report = gate_of(store, max_failure_rate=0.05)
    assert (report.status, report.exit_code) == ("failure_rate", 4)
    assert report.failure_rate == pytest.approx(0.1)
    assert gate_of(store, max_failure_rate=0.2).status == "pass"


def test_a_run_judged_with_repeats_is_incomparable_with_a_baseline_judged_once(store):
    """Sampled repeats average marks drawn at a temperature: not the greedy marks of a run judged once."""
    scores = planted_scores(np.random.default_rng(0))
    store.log(scores, **{"ccrs.judge_repeats": "1"})
    repeated = pd.concat([scores.assign(repeat=r) for r in range(3)], ignore_index=True)
    store.log(repeated, **{"ccrs.judge_repeats": "3 x sample (temperature 0.7)"})
    report = gate_of(store)
    assert (report.status, report.differing) == (
        "incomparable", {"judge repeats": ("1", "3 x sample (temperature 0.7)")})
    assert gate_of(store, allow_judge_change=True).status == "pass"  # each sample's mean pairs with its score


def test_the_gate_lists_the_movers_in_its_report_an_mlflow_table_and_the_alert(store):
    from pipelines.tools.gate.alert import alert_payload
    from pipelines.tools.gate.fetch import MOVES_ARTIFACT

    good = planted_scores(np.random.default_rng(0))
    store.log(good)
    gate_of(store)
    run = store.log(planted_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3),
                    answers=True)
    report = gate_of(store)
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

    every = gate_of(store, run=run, show_moves=2)  # every cell, 2 questions each: only A/CC moved
    assert every.moves["system"].eq("A").all() and every.moves["rank"].tolist() == [1, 2]
    assert every.markdown.count("No question's score moved.") == 3


def test_a_night_with_a_new_system_or_without_an_old_one_compares_the_systems_both_hold(store):
    scores = planted_scores(np.random.default_rng(0))
    store.log(scores)
    gate_of(store)
    renamed = scores.assign(system=scores["system"].replace({"B": "C"}))  # B left, C came
    store.log(renamed)
    report = gate_of(store)
    assert report.status == "pass" and set(report.table["system"]) == {"A"}
    assert report.unpaired == {"run_only": ["C"], "baseline_only": ["B"]}
    assert "Systems not compared (only in this run: C; only in the baseline: B)." in report.markdown
    store.log(scores.assign(system="Z"))
    with pytest.raises(RegressionError, match="share no system"):
        gate_of(store)


def test_a_night_whose_every_judgment_failed_is_the_failure_rate_status_with_its_reasons(store):
    """Every judgment failed (a judge answering in prose): the night is `failure_rate` (exit 4) whatever
    --max-failure-rate allows, and the report names the most common reasons."""
    scores = planted_scores(np.random.default_rng(0))
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
        report = gate_of(store, max_failure_rate=limit)
        assert (report.run_id, report.status, report.exit_code) == (run_id, "failure_rate", 4)
        reasons = "Most common reasons: no number in reply (235); prose around the number (5)."
        assert reasons in report.markdown
    assert "none has a score" in report.markdown and store.tags(run_id)["regression.status"] == "failure_rate"


def test_ccrs_compare_puts_the_gates_outcome_in_the_checked_runs_description(store, capsys):
    from pipelines.cli import main
    from pipelines.reporting.tracking import GATE_PREFIX, NOTE_TAG

    first = store.log(planted_scores(np.random.default_rng(0)))
    second = store.log(planted_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3))
    store.client.set_tag(second, NOTE_TAG, "Verdict: 2 systems ([summary.md](x))")
    code = main(["compare", "--tracking-uri", store.uri, "--experiment", "gate", "--run", second,
                 "--baseline", first, "--b", "500", "--fail-on-regression"])
    assert code == 3
    note = store.tags(second)[NOTE_TAG].split("\n\n")
    assert note[0].startswith(f"{GATE_PREFIX} **regression** against run {first}: B/IR (-0.")
    assert "regression/summary.md" in note[0] and note[1].startswith("Verdict:")


def _human(mean: float) -> dict:
    """stats.json whose IR has a human-calibrated (PPI++) mean of system B, as the reduce stage logs it."""
    block = {"means": {"B": mean}, "ci95": {"B": [mean - 0.05, mean + 0.05]}, "n_labels": {"B": 60},
             "label_step": {"B": 0.25}}
    return {"per_metric": {"IR": {"human_calibrated": block}}}


def test_require_human_holds_a_judge_regression_until_both_nights_labels_decide_it(store, capsys):
    """`--require-human`: the judge-only drop of B/IR is held (exit 7, awaiting_labels, tonight named) while
    tonight has no labels; labeled, the human scale decides it: a regression when people see the drop too
    (exit 3), a pass when they do not (exit 0). The held night is no baseline."""
    from pipelines.cli import main
    from pipelines.reporting.tracking import NOTE_TAG
    from pipelines.tools.gate.alert import alert_payload

    def compare(run, *extra):
        code = main(["compare", "--tracking-uri", store.uri, "--experiment", "gate", "--run", run, "--b",
                     "500", "--fail-on-regression", *extra])
        return code, capsys.readouterr().out

    first = store.log(planted_scores(np.random.default_rng(0)), stats=_human(0.6))
    bad = planted_scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    unlabeled = store.log(bad)
    code, out = compare(unlabeled, "--require-human")
    assert code == 7 and '"status": "awaiting_labels"' in out and "| unconfirmed |" in out
    assert "| tonight " in out and "unconfirmed cells (--require-human)" in out
    assert "### B/IR: -0.2" in out  # the held cell's movers are listed as a regressed cell's
    assert store.tags(unlabeled)["regression.status"] == "awaiting_labels"
    assert "**awaiting_labels** against run " in store.tags(unlabeled)[NOTE_TAG]
    assert ": B/IR ([regression/summary.md]" in store.tags(unlabeled)[NOTE_TAG]
    report = gate_of(store, run=unlabeled, extensions={"labels": {"require_human": True}})
    alert = alert_payload(report)
    assert "AWAITING_LABELS (exit 7): 1 cell(s) fail on the judge scale and await a human-scale decision " \
           "(--require-human): B/IR. Largest drops: B/IR" in alert["text"]
    assert alert["moves"] and {move["metric"] for move in alert["moves"]} == {"IR"}
    assert compare(unlabeled)[0] == 3  # without the option the judge-only test decides

    confirmed = store.log(bad, stats=_human(0.3))
    code, out = compare(confirmed, "--require-human")
    assert code == 3 and f'"baseline": "{first}"' in out and "| human " in out
    not_seen = store.log(bad, stats=_human(0.6))
    code, out = compare(not_seen, "--require-human", "--baseline", first)
    assert code == 0 and '"status": "pass"' in out
