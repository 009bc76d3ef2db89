"""The gate's outcome said (pipelines/tools/gate/alert.py): the alert's payload and text."""
import json

import numpy as np
import pytest

from tests.pipelines.tools.gate.fakes import ANSWERS, BASELINE_NIGHT, TONIGHT, gate_of, planted_scores


def test_the_alert_is_slack_compatible_and_machine_readable(store):
    from pipelines.tools.gate.alert import alert_payload

    store.log(planted_scores(np.random.default_rng(0)))
    gate_of(store)
    store.log(planted_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3))
    payload = alert_payload(gate_of(store))
    assert payload["text"].startswith("ccrs nightly [gate] REGRESSION (exit 3): regression in 1 cell(s): "
                                      "A/CC")
    assert payload["status"] == "regression" and payload["exit_code"] == 3
    assert {"system", "metric", "diff", "adjusted_p", "verdict"} <= set(payload["cells"][0])
    json.dumps(payload)


def test_the_alert_names_the_largest_drops_and_the_systems_left_out():
    from pipelines.tools.gate.alert import alert_moves_text, unpaired_line
    from pipelines.tools.gate.decide import question_moves, sample_view

    worse = ANSWERS.assign(answer=["It does not.", "b", "c and more", ""])
    moves = question_moves(sample_view(TONIGHT, worse), sample_view(BASELINE_NIGHT, ANSWERS),
                           [("P", "QR")], top=5)
    assert alert_moves_text(moves, [("P", "QR")]) == (  # the drops only, largest first
        'Largest drops: P/QR "What does aspirin inhibit?" 1.00 -> 0.25 (answer now "It does not."); '
        'P/QR "Q4?" 0.50 -> 0.00 (answer now "(empty)").')
    assert alert_moves_text(moves, []) == ""
    assert unpaired_line({"run_only": ["N"], "baseline_only": ["O"]}) == (
        "Systems not compared (only in this run: N; only in the baseline: O).")
    assert unpaired_line({"run_only": [], "baseline_only": []}) == ""


def test_a_run_an_extension_stopped_is_alerted_with_its_status_exit_code_and_headline():
    """The calibration gate's stop (judge.preflight) reaches the alert through the registry: status
    judge_calibration, exit 6, the headline its exception declares; the alert names no extension itself."""
    from pipelines.tools.gate.alert import alert_payload
    from pipelines.tools.gate.decide import RegressionReport
    from tasks.calibration import JudgeCalibrationStop

    report = RegressionReport("judge_calibration", "run-1", None, None, 0, "judge calibration 0.34 < 0.60",
                              experiment="nightly")
    payload = alert_payload(report)
    assert (payload["status"], payload["exit_code"], report.exit_code) == ("judge_calibration", 6, 6)
    assert payload["text"] == (f"ccrs nightly [nightly] JUDGE_CALIBRATION (exit 6): "
                               f"{JudgeCalibrationStop.headline}. Run run-1, baseline none.")


def test_a_notify_target_kept_in_the_environment_is_read_there(monkeypatch):
    from pipelines.tools.gate.alert import notify_target

    assert notify_target("https://hooks.example/x") == "https://hooks.example/x"
    assert notify_target(None) is None
    monkeypatch.setenv("CCRS_TEST_HOOK", "https://hooks.example/secret")
    assert notify_target("env:CCRS_TEST_HOOK") == "https://hooks.example/secret"
    monkeypatch.delenv("CCRS_TEST_HOOK")
    with pytest.raises(ValueError, match="CCRS_TEST_HOOK is not set"):
        notify_target("env:CCRS_TEST_HOOK")
