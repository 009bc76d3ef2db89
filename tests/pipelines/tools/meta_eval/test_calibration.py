"""The CCRS calibration of a meta-evaluation (pipelines/tools/meta_eval/calibration.py): the pairs compared
and each needed judgment asked once (checking the GroUSE unit tests themselves:
tests/tasks/test_calibration.py)."""
import pytest

from judges.config import JudgeConfig
from pipelines.tools.meta_eval.calibration import ccrs_pairs, run_ccrs_calibration
from tests.tasks.test_calibration import TRAIN, block, fake_judge


def test_ccrs_pairs_compare_variants_with_the_correct_answer_of_their_set():
    pairs = ccrs_pairs(TRAIN)
    assert {(v.test_type, m) for _, v, m in pairs} == {(16, "AC"), (16, "CC"), (8, "QR"), (8, "ID"),
                                                        (10, "IR"), (11, "AC"), (11, "IR"), (11, "QR"),
                                                        (12, "AC"), (12, "IR")}
    assert all(b.test_type == 1 and b.references == v.references for b, v, _ in pairs)


def test_ccrs_calibration_scores_each_needed_judgment_once_against_the_correct_answer():
    tests = [t for t in TRAIN if t.test_type in (1, 16)]
    base, variant = tests
    # the judge gives the correct answer 90 and the variant 40 (only CC is asked of the judge; AC adds EM)
    assert base.answer != variant.answer
    client = fake_judge({}, lambda prompt: 90 if block(prompt, "response") == base.answer else 40)
    result = run_ccrs_calibration(tests, JudgeConfig(model="m", cache=False), client)
    assert result["judgments"] == 4 and result["judgments_failed"] == 0 and len(client.requests) == 4
    assert ([(p["test_type"], p["metric"], p["passed"]) for p in result["pairs"]]
            == [(16, "AC", True), (16, "CC", True)])
    cc = result["pairs"][1]
    assert ((cc["correct_score"], cc["variant_score"], cc["correct_raw"], cc["variant_raw"])
            == (0.9, 0.4, "90", "40"))
    ac = result["pairs"][0]  # AC = 0.7 EM + 0.3 LLM: the correct answer is the ground truth (EM 1)
    assert (ac["correct_score"] == pytest.approx(0.7 + 0.3 * 0.9)
            and ac["variant_score"] == pytest.approx(0.3 * 0.4))
    assert result["pass_rate"] == 1.0 and result["per_metric"] == {"AC": 1.0, "CC": 1.0}
    prompts = [r.messages[0]["content"] for r in client.requests]
    assert sorted(block(p, "response") for p in prompts) == sorted([base.answer, variant.answer] * 2)
    # the AC asks
    assert [block(p, "ground_truth") for p in prompts if "<ground_truth>" in p] == [base.answer] * 2
    assert all(block(p, "context").count("<chunk rank=") == len(base.references) for p in prompts)
