"""Unpaired comparisons (pipelines/extensions/unpaired.py): systems that answered different questions are
compared as independent groups, with hand-computed intervals; systems that share questions keep the paired
tests (no block); the verdict section and the MLflow metrics read the block."""
import numpy as np
import pandas as pd
import pytest

from pipelines.extensions import extensions
from pipelines.extensions.unpaired import block, run_metrics, section
from pipelines.reporting.verdict import VerdictInputs
from tasks.runtime.contributions import StatisticsContext, contributed_blocks

SETTINGS = {"b": 2000, "seed": 0, "alpha": 0.05}


def _scores(rows):
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"])


DISJOINT = _scores([("q1", "A", "QR", 0.2), ("q2", "A", "QR", 0.4),
                    ("q3", "B", "QR", 0.8), ("q4", "B", "QR", 1.0)])


def test_systems_with_no_shared_question_get_means_intervals_and_the_unpaired_hsd():
    found = block(StatisticsContext(None, scores=DISJOINT, settings=SETTINGS))
    entry = found["per_metric"]["QR"]
    assert entry["shared_questions"] == 0 and entry["n"] == {"A": 2, "B": 2}
    assert entry["means"] == pytest.approx({"A": 0.3, "B": 0.9})
    low, high = entry["ci95"]["A"]
    assert 0.0 <= low < 0.3 < high <= 1.0
    (pair,) = entry["pairwise"]
    assert pair["diff"] == pytest.approx(-0.6)
    assert pair["p_value"] == pytest.approx(1 / 3, abs=0.03)  # 2 of the 6 splits of 2+2 reach the range
    assert not pair["significant"] and entry["groups"] == {"A": "a", "B": "a"}


def test_systems_that_share_questions_keep_the_paired_tests():
    shared = _scores([(q, s, "QR", v) for q in ("q1", "q2") for s, v in (("A", 0.2), ("B", 0.9))])
    assert block(StatisticsContext(None, scores=shared, settings=SETTINGS)) is None


def test_a_system_with_one_score_is_named_and_left_out():
    scores = pd.concat([DISJOINT, _scores([("q5", "C", "QR", 0.5)])])
    entry = block(StatisticsContext(None, scores=scores, settings=SETTINGS))["per_metric"]["QR"]
    assert entry["too_few_scores"] == ["C"] and set(entry["means"]) == {"A", "B"}


def test_the_block_reaches_stats_json_the_verdict_and_mlflow():
    contributor = extensions()["unpaired"].statistics
    found = contributed_blocks([contributor], StatisticsContext(None, scores=DISJOINT, settings=SETTINGS))
    text = section(VerdictInputs(found, {}))
    assert text.startswith("## Unpaired comparison") and "| A | 2 | 0.300 |" in text
    assert run_metrics(found) == {"QR_unpaired_pairs_different": 0.0}
    assert section(VerdictInputs({}, {})) == ""


@pytest.mark.parametrize("draw", ["bernoulli", "beta"])
def test_the_intervals_cover_at_the_smallest_size_two_scores(draw):
    """300 simulated systems of 2 scores each (0/1 marks, or skewed Beta(0.5, 2) scores): the 95% interval
    covers the true mean in at least 95% of them, less Monte-Carlo error (a t interval covers 0/1 marks
    with p = 0.5 only half the time: two equal marks give it zero width)."""
    from pipelines.extensions.unpaired import _describe

    rng = np.random.default_rng(7)
    truth, covered = (0.5 if draw == "bernoulli" else 0.5 / 2.5), 0
    for _ in range(300):
        values = (rng.random(2) < 0.5).astype(float) if draw == "bernoulli" else rng.beta(0.5, 2.0, 2)
        low, high = _describe({"A": values})["ci95"]["A"]
        covered += low <= truth <= high
    assert covered / 300 >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 300)
