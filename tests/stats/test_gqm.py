"""Hand-computed GQM aggregation fixture (see the comments for the arithmetic)."""
import math

import numpy as np
import pytest

from stats.gqm import GoalNode, GoalTree, MetricNode, QuestionNode, aggregate, aggregate_matrix


def tree(renormalize=False):
    q1 = QuestionNode("Q1", "generator", 1.0,
                      (MetricNode("A", "primary", 1.0), MetricNode("B", "secondary", 0.5)))
    q2 = QuestionNode("Q2", "retriever", 1.0, (MetricNode("C", "primary", 0.8),))
    q3 = QuestionNode("Q3", "system", 1.0, (MetricNode("D", "supporting", 0.2),))
    return GoalTree((GoalNode("G1", 1.0, (q1, q2)), GoalNode("G2", 0.5, (q3,))), renormalize)


VALUES = {"A": 0.9, "B": 0.3, "C": 0.5, "D": 1.0}


def test_hand_computed_scores_and_contributions():
    r = aggregate(tree(), VALUES)
    q = {x.id: x.score for x in r.questions}
    # Q1 = (0.9*1 + 0.3*0.5) / 1.5 = 0.7 ; Q2 = 0.5 ; Q3 = 1.0
    assert q == pytest.approx({"Q1": 0.7, "Q2": 0.5, "Q3": 1.0})
    g = {x.id: x.score for x in r.goals}
    assert g == pytest.approx({"G1": 0.6, "G2": 1.0})  # G1 = (0.7 + 0.5) / 2
    assert r.overall.score == pytest.approx(1.1 / 1.5)  # (0.6*1 + 1.0*0.5) / 1.5
    c = {x.metric: x for x in r.contributions}
    assert c["A"].to_question == pytest.approx(0.6) and c["A"].to_goal == pytest.approx(0.3)
    assert c["A"].to_overall == pytest.approx(0.2)
    assert c["B"].to_overall == pytest.approx(1 / 30)
    assert c["C"].to_overall == pytest.approx(1 / 6) and c["D"].to_overall == pytest.approx(1 / 3)
    assert sum(x.to_overall for x in r.contributions) == pytest.approx(r.overall.score)
    for goal in r.goals:
        assert sum(x.to_goal for x in r.contributions if x.goal == goal.id) == pytest.approx(goal.score)
    assert {k: v.score for k, v in r.components.items()} == pytest.approx(
        {"generator": 0.7, "retriever": 0.5, "system": 1.0})
    assert r.overall.coverage == 1.0 and r.overall.reason is None


def test_missing_metric_not_computable_without_renormalization():
    r = aggregate(tree(), {k: v for k, v in VALUES.items() if k != "B"})
    q1 = next(x for x in r.questions if x.id == "Q1")
    assert q1.score is None and "B" in q1.reason and q1.missing == ("B",)
    g1 = next(x for x in r.goals if x.id == "G1")
    assert g1.score is None and "Q1" in g1.reason
    assert r.overall.score is None and "G1" in r.overall.reason
    g2 = next(x for x in r.goals if x.id == "G2")
    assert g2.score == 1.0
    # nothing is NaN anywhere
    for node in (*r.questions, *r.goals, r.overall):
        assert node.score is None or math.isfinite(node.score)


def test_missing_metric_renormalized_when_configured():
    r = aggregate(tree(renormalize=True), {"A": 0.9, "B": float("nan"), "C": 0.5, "D": 1.0})
    q1 = next(x for x in r.questions if x.id == "Q1")
    assert q1.score == pytest.approx(0.9) and q1.coverage == pytest.approx(1 / 1.5)
    assert r.overall.score == pytest.approx((0.7 * 1 + 1.0 * 0.5) / 1.5)  # G1 = (0.9 + 0.5) / 2
    assert sum(x.to_overall for x in r.contributions) == pytest.approx(r.overall.score)


def test_all_metrics_missing_even_with_renormalization():
    r = aggregate(tree(renormalize=True), {"C": 0.5})
    assert next(x for x in r.goals if x.id == "G2").score is None
    assert r.overall.score == pytest.approx(0.5)  # G1 = Q2 only, G2 not computable
    assert r.components["system"].score is None and r.components["system"].reason


def test_matrix_matches_single_slices():
    names = ["A", "B", "C", "D"]
    rng = np.random.default_rng(0)
    values = rng.uniform(size=(5, 4))
    batch = aggregate_matrix(tree(), names, values)
    for row, result in zip(values, batch):
        single = aggregate(tree(), dict(zip(names, row)))
        assert single.overall.score == pytest.approx(result.overall.score)


def test_category_means_average_the_metrics_present_per_slice():
    from stats.gqm import category_means

    names = ["a", "b", "c"]
    values = np.array([[0.2, 0.4, np.nan], [np.nan, np.nan, np.nan]])
    found = category_means(names, values, {"x": ["a", "b"], "y": ["c", "not-a-column"]})
    np.testing.assert_allclose(found["x"].scores, [0.3, np.nan])
    assert found["x"].present.tolist() == [2, 0] and np.isnan(found["y"].scores).all()
    assert found["y"].metrics == ("c", "not-a-column")
