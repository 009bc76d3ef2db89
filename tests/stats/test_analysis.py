import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from stats.errors import StatsInputError
from stats.analysis import compute_all
from stats.hypotheses import Hypothesis, HypothesisSet
from tests.stats.conftest import make_repeated_scores, make_scores

B = 200


def test_contract_shape(scores):
    result = compute_all(scores, b=B, seed=1)
    assert result["n_queries"] == 40 and result["systems"] == ["A", "B", "C"]
    assert result["metrics"] == ["CC", "QR"] and (result["b"], result["seed"], result["alpha"]) == (
        B,
        1,
        0.05,
    )
    entry = result["per_metric"]["CC"]
    assert (entry["n_used"], entry["n_dropped"]) == (40, 0)
    assert [(p["a"], p["b"]) for p in entry["pairwise"]] == [("A", "B"), ("A", "C"), ("B", "C")]
    pair = entry["pairwise"][0]
    assert pair["diff"] == pytest.approx(entry["means"]["A"] - entry["means"]["B"])
    assert entry["discriminative_power"] == sum(p["significant"] for p in entry["pairwise"]) / 3
    for system in result["systems"]:
        low, high = entry["ci95"][system]
        assert low <= entry["means"][system] <= high
        assert set(entry["population"][system]) == {
            "mean",
            "geo_mean",
            "median",
            "midhinge",
            "iqr",
            "variance",
            "skewness",
            "kurtosis",
            "min",
            "max",
        }
        assert set(entry["bounds"][system]) == {"at_0", "at_1"}
    for method in ("pearson", "spearman", "kendall"):
        assert np.shape(result["correlations"][method]["fisher_z_mean"]) == (2, 2)
        assert set(result["correlations"][method]["per_system"]) == {"A", "B", "C"}
    assert result["hypotheses"] == {}
    json.dumps(result, allow_nan=False)


def test_means_match_pandas(scores):
    result = compute_all(scores, b=B)
    expected = scores[scores.metric == "QR"].groupby("system")["score"].mean()
    for system, mean in expected.items():
        assert result["per_metric"]["QR"]["means"][system] == pytest.approx(mean)


def test_incomplete_queries_are_dropped_per_metric(scores):
    drop = (scores.query_id.isin(["q001", "q002"])) & (scores.system == "B") & (scores.metric == "CC")
    scores = scores[~drop].copy()
    scores.loc[(scores.query_id == "q003") & (scores.system == "A") & (scores.metric == "CC"), "score"] = (
        np.nan
    )
    result = compute_all(scores, b=B)
    assert (result["per_metric"]["CC"]["n_used"], result["per_metric"]["CC"]["n_dropped"]) == (37, 3)
    assert (result["per_metric"]["QR"]["n_used"], result["per_metric"]["QR"]["n_dropped"]) == (40, 0)


def test_same_seed_same_output_bit_for_bit(scores):
    first = json.dumps(compute_all(scores, b=B, seed=3))
    second = json.dumps(compute_all(scores.sample(frac=1.0, random_state=0), b=B, seed=3))
    assert first == second
    assert json.dumps(compute_all(scores, b=B, seed=4)) != first


def test_hsds_on_threads_give_the_same_output_bit_for_bit_and_progress_in_metric_order(scores):
    scores = pd.concat([scores, make_scores(metrics=("AC", "ID"), seed=1)], ignore_index=True)
    alone, seen = json.dumps(compute_all(scores, b=B, seed=3)), []
    with ThreadPoolExecutor(3) as pool:
        side_by_side = compute_all(scores, b=B, seed=3, map_tests=pool.map, on_metric=seen.append)
    assert json.dumps(side_by_side) == alone
    assert seen == side_by_side["metrics"]


def test_planted_effect_found():
    scores = make_scores(n_queries=150, systems=("A", "B", "C", "D"), effects={"D": 0.15}, seed=2)
    result = compute_all(scores, b=1000, seed=0)
    for pair in result["per_metric"]["CC"]["pairwise"]:
        assert pair["significant"] == ("D" in (pair["a"], pair["b"])), pair


def test_a_pair_whose_p_equals_alpha_is_not_significant():
    scores = make_scores(effects={"C": 0.06}, seed=1)
    pairs = compute_all(scores, b=B, seed=1)["per_metric"]["CC"]["pairwise"]
    index, p = next((i, pair["p_value"]) for i, pair in enumerate(pairs) if 0 < pair["p_value"] < 0.5)
    at_alpha = compute_all(scores, b=B, seed=1, alpha=p)["per_metric"]["CC"]["pairwise"][index]
    assert at_alpha["p_value"] == p and not at_alpha["significant"]
    above = compute_all(scores, b=B, seed=1, alpha=p + 1 / B)["per_metric"]["CC"]["pairwise"][index]
    assert above["significant"]


def test_hypotheses_evaluated(scores):
    hypotheses = HypothesisSet([Hypothesis("H", [("A", "B")], ["CC", "QR"], combine="any")])
    result = compute_all(scores, hypotheses, b=B)
    entry = result["hypotheses"]["H"]
    assert entry["raw_p"] == pytest.approx(
        min(
            1.0,
            2
            * min(
                p["p_value"]
                for m in ("CC", "QR")
                for p in result["per_metric"][m]["pairwise"]
                if (p["a"], p["b"]) == ("A", "B")
            ),
        )
    )
    assert entry["adjusted_p"] == entry["raw_p"]  # a single hypothesis


def test_metric_order_is_the_given_order_first_then_sorted_whatever_the_row_order():
    order = ("CC", "QR", "ID", "AC", "IR")
    assert compute_all(make_scores(metrics=("IR", "CC", "AC")), b=20,
                       metric_order=order)["metrics"] == ["CC", "AC", "IR"]
    assert compute_all(make_scores(metrics=("zeta", "CC", "alpha")), b=20,
                       metric_order=order)["metrics"] == ["CC", "alpha", "zeta"]
    assert compute_all(make_scores(metrics=("IR", "CC", "AC")), b=20)["metrics"] == ["AC", "CC", "IR"]


def test_undefined_values_are_null_with_notes():
    scores = make_scores(n_queries=5)
    scores.loc[scores.system == "C", "score"] = 0.5  # constant: no skewness, no correlation
    result = compute_all(scores, b=20)
    text = json.dumps(result, allow_nan=False)
    assert result["per_metric"]["CC"]["population"]["C"]["skewness"] is None
    assert result["correlations"]["pearson"]["per_system"]["C"][0][1] is None
    assert any("skewness" in note for note in result["notes"]) and "NaN" not in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop(columns=["metric"]), r"lack column\(s\) \['metric'\]"),
        (
            lambda f: f.assign(score=f.score.astype(object).where(f.index != 4, "high")),
            r"non-numeric score in row\(s\) 4 \('high'\)",
        ),
        (
            lambda f: f.assign(score=f.score.where(f.index != 7, 1.5)),
            r"outside \[0, 1\] in row\(s\) 7 \(1.5\)",
        ),
        (lambda f: f.assign(score=f.score.where(f.index != 2, -0.1)), r"outside \[0, 1\] in row\(s\) 2"),
        (
            lambda f: pd.concat([f, f.iloc[[3]]]),
            r"duplicate \(query_id, system, metric\) rows: 2 rows, e\.g\. \(q000, B, QR\)",
        ),
        (lambda f: f.assign(score=None), r"no scores to analyse: no row has a score"),
        (lambda f: f.assign(system=f.system.where(f.index != 1, "")), r"empty system in row\(s\) 1"),
    ],
)
def test_bad_input_is_a_clear_error(scores, change, message):
    with pytest.raises(StatsInputError, match=message):
        compute_all(change(scores), b=10)


def test_bad_options_and_unknown_hypothesis_system(scores):
    for options in ({"b": 0}, {"seed": -1}, {"alpha": 1.5}):
        with pytest.raises(StatsInputError):
            compute_all(scores, **options)
    hypotheses = HypothesisSet([Hypothesis("H", [("A", "X")], ["CC"])])
    with pytest.raises(StatsInputError, match=r"H: unknown system\(s\) \['X'\]"):
        compute_all(scores, hypotheses, b=10)


def test_metric_without_complete_query_is_null_not_an_error(scores):
    scores = scores[~((scores.system == "C") & (scores.metric == "QR"))]
    hypotheses = HypothesisSet([Hypothesis("H", [("A", "B")], ["CC", "QR"])])
    result = compute_all(scores, hypotheses, b=20)
    entry = result["per_metric"]["QR"]
    assert (entry["n_used"], entry["n_dropped"], entry["discriminative_power"]) == (0, 40, None)
    assert entry["means"]["A"] is None and result["hypotheses"]["H"]["raw_p"] == 1.0
    assert any("QR" in note and "no query" in note for note in result["notes"])


def test_repeated_judgments_add_judge_noise_and_are_analysed_averaged():
    scores = make_repeated_scores(metrics=("CC", "QR"), effects={"C": 0.15})
    scores = scores[~((scores.metric == "QR") & (scores.repeat > 0))]  # QR judged once
    scores = scores[~((scores.query_id == "q004") & (scores.system == "B") & (scores.metric == "CC")
                      & (scores.repeat == 2))]  # one failed judgment
    result = compute_all(scores, b=B, seed=1)
    entry = result["per_metric"]["CC"]
    assert (entry["n_used"], entry["n_dropped"]) == (29, 1)
    averaged = scores[(scores.metric == "CC") & (scores.query_id != "q004")].groupby("system")["score"].mean()
    assert entry["means"] == pytest.approx(averaged.to_dict())
    noise = entry["judge_noise"]
    assert set(noise["components"]) == {"system", "question", "system_x_question", "residual"}
    assert noise["components"]["residual"] == pytest.approx(0.08**2, rel=0.25)
    assert 0.0 <= noise["reliability"] <= 1.0
    assert noise["reliability_ci95"][0] <= noise["reliability"] <= noise["reliability_ci95"][1]
    assert (noise["n_repeats"], noise["repeats"], noise["n_queries"], noise["n_incomplete_cells"]) == (
        3, [0, 1, 2], 29, 1)
    assert all(isinstance(pair, list) and len(pair) == 2 for pair in noise["flaky_pairs"])
    flaky = [[p["a"], p["b"]] for p in noise["pair_verdicts"] if set(p["per_repeat"]) != {p["significant"]}]
    assert noise["flaky_pairs"] == flaky
    assert noise["stable_share"] == pytest.approx(1 - len(flaky) / 3)
    assert [(p["a"], p["b"], p["significant"]) for p in noise["pair_verdicts"]] == [
        (p["a"], p["b"], p["significant"]) for p in entry["pairwise"]]
    assert "judge_noise" not in result["per_metric"]["QR"]
    json.dumps(result, allow_nan=False)


def test_one_repeat_gives_the_same_stats_json_as_no_repeat_column(scores):
    plain = json.dumps(compute_all(scores, b=B, seed=2))
    assert json.dumps(compute_all(scores.assign(repeat=0), b=B, seed=2)) == plain


def test_repeated_judgments_are_a_function_of_the_seed():
    scores = make_repeated_scores(n_queries=12)
    first = json.dumps(compute_all(scores, b=B, seed=5))
    assert json.dumps(compute_all(scores.sample(frac=1.0, random_state=1), b=B, seed=5)) == first


def test_a_repeated_metric_with_one_complete_query_has_no_judge_noise_and_says_why():
    scores = make_repeated_scores(n_queries=3)
    scores = scores[~((scores.query_id != "q000") & (scores.system == "A") & (scores.repeat == 1))]
    result = compute_all(scores, b=B)
    assert result["per_metric"]["CC"]["n_used"] == 1 and result["per_metric"]["CC"]["judge_noise"] is None
    assert any("judge_noise" in note and "fewer than 2" in note for note in result["notes"])


ONE_SYSTEM = pd.DataFrame([("q1", "prod", "CC", 0.2), ("q2", "prod", "CC", 0.4), ("q3", "prod", "CC", 0.9),
                           ("q1", "prod", "QR", 1.0), ("q2", "prod", "QR", 1.0), ("q3", "prod", "QR", 0.5)],
                          columns=["query_id", "system", "metric", "score"])


def test_one_system_has_means_cis_and_the_layout_with_empty_pairs_and_null_power():
    result = compute_all(ONE_SYSTEM, b=B)
    several = compute_all(make_scores(n_queries=3), b=B)
    assert set(result) == set(several) and result["systems"] == ["prod"] and result["n_queries"] == 3
    cc = result["per_metric"]["CC"]
    assert set(cc) == set(several["per_metric"]["CC"])
    assert cc["means"] == {"prod": pytest.approx(0.5)} and result["per_metric"]["QR"]["means"]["prod"] == \
        pytest.approx(2.5 / 3)
    low, high = cc["ci95"]["prod"]
    assert 0.2 <= low < 0.5 < high <= 0.9
    assert (cc["pairwise"], cc["discriminative_power"], cc["n_used"]) == ([], None, 3)
    assert cc["tie_rate"]["prod"] == 0.0 and result["per_metric"]["QR"]["bounds"]["prod"] == {"at_0": 0,
                                                                                               "at_1": 2}
    rows = result["discriminative_power_comparison"]
    assert [(row["pairs"], row["discriminative_power"]) for row in rows] == [(0, None), (0, None)]
    assert result["hypotheses"] == {}
    assert any(note.startswith("one system (prod): the HSD, discriminative power and hypotheses")
               for note in result["notes"])
    json.dumps(result, allow_nan=False)


def test_one_system_with_repeats_has_judge_noise_in_the_layout_of_several():
    scores = make_repeated_scores(n_queries=12, systems=("prod",), n_repeats=3)
    result = compute_all(scores, b=B)
    several = compute_all(make_repeated_scores(n_queries=12, systems=("A", "B"), n_repeats=3), b=B)
    noise = result["per_metric"]["CC"]["judge_noise"]
    assert list(noise) == list(several["per_metric"]["CC"]["judge_noise"])
    assert list(noise["components"]) == ["system", "question", "system_x_question", "residual"]
    assert noise["components"]["system"] is None and noise["components"]["question"] > 0
    assert noise["df"] == {"system": 0, "question": 11, "system_x_question": 0, "residual": 24}
    assert (noise["stable_share"], noise["pair_verdicts"], noise["flaky_pairs"]) == (None, [], [])
    assert 0 < noise["reliability"] <= 1 and noise["reliability_one_judgment"] < noise["reliability"]
    low, high = result["per_metric"]["CC"]["ci95"]["prod"]
    assert low < result["per_metric"]["CC"]["means"]["prod"] < high
    assert any("judge_noise: one system" in note for note in result["notes"])


def test_hypotheses_on_one_system_are_a_clear_error():
    hypotheses = HypothesisSet([Hypothesis("H1", [("prod", "other")], ["CC"])])
    message = r"hypotheses compare systems, and the scores hold one \(prod\): H1 cannot be tested"
    with pytest.raises(StatsInputError, match=message):
        compute_all(ONE_SYSTEM, hypotheses, b=10)


def test_no_score_at_all_is_an_error_here_and_an_empty_layout_for_a_run():
    from stats.analysis import unscored_result

    with pytest.raises(StatsInputError, match="no scores to analyse"):
        compute_all(ONE_SYSTEM.assign(score=None), b=10)
    empty = unscored_result(B, 0, 0.05, "every judgment failed")
    assert set(empty) == set(compute_all(ONE_SYSTEM, b=B))
    assert (empty["systems"], empty["per_metric"], empty["notes"]) == ([], {}, ["every judgment failed"])
