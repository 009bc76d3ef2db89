"""Human labels checked against the scores they calibrate, and a metric's human_calibrated entry: its
intervals on the labels' [0, 1] scale, labels all one value, skips, the pair rule, the bias line."""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from stats.analysis import compute_all
from stats.errors import StatsInputError
from stats.labels import (
    check_labels_against,
    human_calibrated_entry,
    label_matrices,
    validate_labels,
    validate_skips,
)
from stats.ppi import MIN_LABELS
from stats.scores import build_cube, validate_scores


def _scores(n_queries=12, systems=("A", "B"), metric="CC"):
    rows = [{"query_id": f"q{q}", "system": s, "metric": metric, "score": ((q * 7 + i * 3) % 5) / 4}
            for q in range(n_queries) for i, s in enumerate(systems)]
    return validate_scores(pd.DataFrame(rows))


def _labels(rows):
    return pd.DataFrame(rows, columns=["question_id", "system", "metric", "label", "annotator"])


def test_question_id_marks_on_their_scale_and_annotators_are_kept():
    labels = validate_labels(_labels([["q0", "A", "CC", 1, "ann"], ["q0", "A", "CC", 5, "bob"]]), (1, 5))
    assert list(labels.frame["query_id"]) == ["q0", "q0"]
    assert list(labels.frame["label"]) == [0.0, 1.0]
    assert labels.predicted_by == {"CC": "CC"} and labels.superseded == 0


def test_a_later_mark_of_the_same_annotator_replaces_the_earlier_one_and_is_counted():
    labels = validate_labels(_labels([["q0", "A", "CC", 0, "ann"], ["q0", "A", "CC", 1, "ann"]]))
    assert list(labels.frame["label"]) == [1.0] and labels.superseded == 1


@pytest.mark.parametrize("rows, scale, message", [
    ([["q0", "A", "CC", 6, "ann"]], (1, 5), "outside their scale"),
    ([["q0", "A", "CC", "good", "ann"]], None, "non-numeric"),
    ([["q0", "A", "CC", 1.5, "ann"]], None, "outside their scale"),
    ([["", "A", "CC", 1, "ann"]], None, "empty query_id"),
    ([["q0", "A", "CC", 1, "ann"]], (5, 1), "MIN < MAX"),
])
def test_bad_marks_are_one_line(rows, scale, message):
    with pytest.raises(StatsInputError, match=message):
        validate_labels(_labels(rows), scale)


def test_a_missing_column_is_named():
    with pytest.raises(StatsInputError, match=r"lack column\(s\) \['label'\]"):
        validate_labels(pd.DataFrame({"query_id": ["q0"], "system": ["A"], "metric": ["CC"]}))


@pytest.mark.parametrize("row, predicted_by, message", [
    (["q0", "Z", "CC", 1, "ann"], None, "1 systems the scores lack: 'Z'"),
    (["q99", "A", "CC", 1, "ann"], None, "1 questions the scores lack: 'q99'"),
    (["q0", "A", "acceptable", 1, "ann"], None, "--predicted-by acceptable=METRIC"),
    (["q0", "A", "acceptable", 1, "ann"], {"acceptable": "QR"}, "no metric 'QR'"),
])
def test_labels_the_scores_cannot_carry_are_one_line(row, predicted_by, message):
    cube = build_cube(_scores())
    with pytest.raises(StatsInputError, match=message):
        check_labels_against(validate_labels(_labels([row]), predicted_by=predicted_by), cube)


def test_predicted_by_must_name_a_label_metric():
    with pytest.raises(StatsInputError, match="no label has"):
        validate_labels(_labels([["q0", "A", "CC", 1, "ann"]]), predicted_by={"acceptable": "CC"})


def test_annotators_marks_of_one_answer_are_averaged_and_unjudged_labels_counted():
    scores = _scores()
    scores = scores[~((scores["query_id"] == "q1") & (scores["system"] == "B"))]  # q1 not judged for B
    labels = validate_labels(_labels([["q0", "A", "CC", 1, "ann"], ["q0", "A", "CC", 0, "bob"],
                                      ["q1", "A", "CC", 1, "ann"]]))
    matrices = label_matrices(labels, build_cube(scores))["CC"]
    assert matrices.query_ids[0] == "q0" and "q1" not in matrices.query_ids
    assert matrices.labels[0, 0] == 0.5 and np.isnan(matrices.labels[0, 1])
    assert matrices.n_annotators == 2 and matrices.unjudged_labels == 1


def test_every_answer_labeled_gives_the_labels_mean_and_its_score_interval():
    """lam is 0 with no unlabeled answer: the PPI++ mean is the labels' mean; on the [0, 1] scale its CI is
    the score interval, the means m with (mean - m)^2 <= q^2 kappa m (1 - m) / n, kappa = s^2 / (mean (1 -
    mean)), q = t(n - 1): the roots of a quadratic."""
    scores = _scores(n_queries=MIN_LABELS + 2)
    judged = build_cube(scores)
    marks = [((q * 5 + i) % 3) / 2 for q in range(MIN_LABELS + 2) for i in range(2)]
    rows = [[f"q{q}", s, "CC", marks[2 * q + i], "ann"] for q in range(MIN_LABELS + 2)
            for i, s in enumerate("AB")]
    matrices = label_matrices(validate_labels(_labels(rows)), judged)["CC"]
    pairwise = [{"a": "A", "b": "B", "significant": True}]
    entry = human_calibrated_entry(matrices, pairwise, 0.05)
    a_marks = np.array(marks[0::2])
    n, mean = a_marks.size, a_marks.mean()
    k = scipy_stats.t.ppf(0.975, n - 1) ** 2 * a_marks.var(ddof=1) / (mean * (1 - mean)) / n
    roots = np.roots([1 + k, -(2 * mean + k), mean**2])
    assert entry["means"]["A"] == pytest.approx(mean)
    assert entry["ci95"]["A"] == pytest.approx(sorted(roots), abs=1e-9)
    assert entry["interval"]["A"] == "score" and entry["constant_labels"] == []
    assert entry["lam"]["A"] == 0.0
    judge_a = matrices.judged[:, 0]
    assert entry["judge_bias"]["A"] == pytest.approx((a_marks - judge_a).mean())
    (pair,) = entry["pairwise"]
    assert set(pair) >= {"a", "b", "diff", "ci95", "p_value", "significant"}
    assert pair["diff"] == pytest.approx(a_marks.mean() - np.array(marks[1::2]).mean())
    assert pair["decision_changed"] == (pair["significant"] is not True)


def test_a_system_with_too_few_labels_gets_no_interval_but_is_named():
    rows = [[f"q{q}", "A", "CC", 1, "ann"] for q in range(MIN_LABELS)] + [["q0", "B", "CC", 0, "ann"],
                                                                           ["q1", "B", "CC", 1, "ann"]]
    matrices = label_matrices(validate_labels(_labels(rows)), build_cube(_scores()))["CC"]
    entry = human_calibrated_entry(matrices, [], 0.05)
    assert entry["n_labels"] == {"A": MIN_LABELS, "B": 2}
    assert "A" in entry["means"] and "B" not in entry["means"] and entry["too_few_labels"] == ["B"]
    assert entry["constant_labels"] == ["A"] and entry["ci95"]["A"][0] < 1.0  # A's labels are all 1
    assert "B" in entry["judge_bias"]  # a t interval needs 2
    assert entry["pairwise"] == [] and entry["pairs_too_few_labels"] == [["A", "B"]]


def test_compute_all_puts_the_entry_under_the_judge_metric_of_a_human_metric():
    rows = [[f"q{q}", s, "acceptable", (q + i) % 2, "ann"] for q in range(12) for i, s in enumerate("AB")]
    labels = validate_labels(_labels(rows), predicted_by={"acceptable": "CC"})
    result = compute_all(_scores(), b=50, labels=labels)
    entry = result["per_metric"]["CC"]["human_calibrated"]
    assert entry["human_metric"] == "acceptable" and entry["n_labels"] == {"A": 12, "B": 12}
    assert set(entry) >= {"n_labels", "means", "ci95", "judge_bias", "pairwise"}


def _five_marks(rows, n_queries, systems="AB"):
    """Marks on 1-5 (mapped onto [0, 1]) of a judge metric CC."""
    matrices = label_matrices(validate_labels(_labels(rows), (1, 5)), build_cube(_scores(n_queries, systems)))
    return matrices["CC"]


def test_fifteen_marks_of_five_get_an_interval_that_is_not_a_point():
    rows = [[f"q{q}", s, "CC", 5 if s == "A" else 1 + q % 5, "ann"] for q in range(15) for s in "AB"]
    entry = human_calibrated_entry(_five_marks(rows, 20), [], 0.05)
    low, high = entry["ci95"]["A"]
    assert entry["means"]["A"] == 1.0 and high == 1.0 and low < 0.8
    assert entry["se"]["A"] > 0 and entry["constant_labels"] == ["A"] and entry["interval"]["A"] == "score"
    assert any("all one value: A (15 x 1.00)" in note for note in entry["notes"])


def test_a_constant_nonzero_difference_is_not_an_exact_certainty():
    # A is marked one step (0.25) above B on each of 12 questions
    rows = [[f"q{q}", s, "CC", 1 + q % 4 + (s == "A"), "ann"] for q in range(12) for s in "AB"]
    entry = human_calibrated_entry(_five_marks(rows, 12), [], 0.05)
    (pair,) = entry["pairwise"]
    assert pair["diff"] == pytest.approx(0.25) and pair["constant"] and pair["interval"] == "constant"
    assert pair["ci95"][0] < pair["ci95"][1] and pair["raw_p"] == pytest.approx(0.8**12) and pair["raw_p"] > 0
    assert entry["constant_pairs"] == [["A", "B"]]


def test_a_human_metric_of_its_own_gets_no_judge_bias():
    rows = [[f"q{q}", s, "acceptable", (q + i) % 2, "ann"] for q in range(12) for i, s in enumerate("AB")]
    labels = validate_labels(_labels(rows), predicted_by={"acceptable": "CC"})
    entry = human_calibrated_entry(label_matrices(labels, build_cube(_scores()))["CC"], [], 0.05)
    assert entry["judge_bias"] == {} and entry["judge_bias_ci95"] == {} and "A" in entry["means"]


def test_skips_are_counted_per_annotator_and_system_with_a_note_when_many():
    rows = [[f"q{q}", s, "CC", 1 + q % 5, "ann"] for q in range(20) for s in "AB"]
    skips = pd.DataFrame({"question_id": ["q20", "q21", "q22", "q22", "q99"], "metric": ["CC"] * 4 + ["CC"],
                          "annotator": ["ann", "ann", "ann", "bob", "ann"]})
    labels = replace(validate_labels(_labels(rows), (1, 5)), skips=validate_skips(skips))
    entry = human_calibrated_entry(label_matrices(labels, build_cube(_scores(30)))["CC"], [], 0.05)
    # q99 is not a question of the scores; q22 was skipped by both
    assert entry["skips"] == {"ann": {"A": 3, "B": 3}, "bob": {"A": 1, "B": 1}}
    assert entry["skipped_unlabeled"] == 3
    assert any("3 question(s) were skipped and left with no label, against 20 labeled" in note
               for note in entry["notes"])
    few = replace(labels, skips=validate_skips(skips.iloc[:1]))
    entry = human_calibrated_entry(label_matrices(few, build_cube(_scores(30)))["CC"], [], 0.05)
    assert entry["skipped_unlabeled"] == 1 and not any("skipped" in note for note in entry["notes"])


def test_pairs_that_lose_labels_to_the_pair_rule_are_noted():
    # A labeled on q0-q19, B on q10-q29: 10 questions together, half of each system's labels
    rows = ([[f"q{q}", "A", "CC", 1 + q % 5, "ann"] for q in range(20)]
            + [[f"q{q}", "B", "CC", 1 + q % 4, "ann"] for q in range(10, 30)])
    entry = human_calibrated_entry(_five_marks(rows, 30), [], 0.05)
    assert entry["pairwise"][0]["n_labels"] == 10
    assert any("A-B on 10 (of 20 and 20)" in note for note in entry["notes"])


@pytest.mark.parametrize("frame, message", [
    (pd.DataFrame({"question_id": ["q0"]}), r"lack column\(s\) \['metric'\]"),
    (pd.DataFrame({"question_id": [""], "metric": ["CC"]}), "skips have an empty query_id"),
])
def test_bad_skips_are_one_line(frame, message):
    with pytest.raises(StatsInputError, match=message):
        validate_skips(frame)
