"""The verdict's Human-calibrated section: the bias column only for a judge metric's own labels, the
questions skipped per annotator and system, the block's notes (the ordering of pairs and the gaps:
tests/pipelines/reporting/test_verdict.py)."""
from pipelines.reporting.human_calibrated import human_calibrated_section


def _stats(human: dict, metric: str = "CC") -> dict:
    judge = {"means": {"A": 0.35, "B": 0.8}, "ci95": {"A": [0.3, 0.4], "B": [0.7, 0.9]},
             "human_calibrated": human}
    return {"alpha": 0.05, "metrics": [metric], "per_metric": {metric: judge}}


def _block(**extra) -> dict:
    return {"human_metric": "CC", "n_labels": {"A": 20, "B": 20}, "n_annotators": 1,
            "means": {"A": 0.4, "B": 0.7}, "ci95": {"A": [0.3, 0.5], "B": [0.6, 0.8]},
            "judge_bias": {"A": 0.05, "B": -0.1}, "judge_bias_ci95": {"A": [0.0, 0.1], "B": [-0.2, 0.0]},
            "pairwise": [], "too_few_labels": [], "pairs_too_few_labels": [], "min_labels": 10, **extra}


def test_a_human_metric_of_its_own_gets_no_bias_column():
    text = human_calibrated_section(_stats(_block(human_metric="acceptable", judge_bias={},
                                                  judge_bias_ci95={})))
    assert "### acceptable (a human metric, predicted by CC)" in text
    assert "judge's bias (human - judge) |" not in text
    assert "| A | 20 | 0.35 [0.30, 0.40] | 0.40 [0.30, 0.50] |\n" in text
    assert "No judge's bias: acceptable is a construct of its own" in text
    own = human_calibrated_section(_stats(_block()))
    assert "| A | 20 | 0.35 [0.30, 0.40] | 0.40 [0.30, 0.50] | +0.05 [+0.00, +0.10] |" in own
    assert "No judge's bias" not in own


def test_skips_per_annotator_and_system_and_the_notes_are_shown():
    block = _block(skips={"ann": {"A": 3, "B": 3}, "bob": {"A": 1, "B": 0}}, skipped_unlabeled=3,
                   notes=["3 question(s) were skipped and left with no label, against 20 labeled: ..."])
    text = human_calibrated_section(_stats(block))
    assert ("**Skipped** (answers left without that annotator's mark; 3 question(s) labeled by no one): "
            "ann: 3 question(s), every system's answer; bob: A 1, B 0.") in text
    assert "**Note:** 3 question(s) were skipped and left with no label, against 20 labeled: ...." in text


def test_a_block_written_before_skips_and_notes_existed_still_renders():
    text = human_calibrated_section(_stats(_block()))
    assert "**Skipped**" not in text and "**Note:**" not in text
