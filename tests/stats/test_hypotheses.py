import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from stats.errors import StatsInputError
from stats.hsd import HSDResult
from stats.hypotheses import Hypothesis, HypothesisSet, evaluate_hypotheses


def hsd_result(means, p_values) -> HSDResult:
    means = np.asarray(means, dtype=float)
    p = np.asarray(p_values, dtype=float)
    return HSDResult(means=means, diffs=means[:, None] - means[None, :], p_values=p, n_queries=10, b=100)


def test_unknown_system_is_named():
    hypotheses = HypothesisSet([Hypothesis("H", [["A", "Z"]], ["M"])])
    with pytest.raises(StatsInputError, match=r"unknown system\(s\) \['Z'\]"):
        evaluate_hypotheses(hypotheses, {"M": hsd_result([0.5, 0.4], np.ones((2, 2)))}, ["A", "B"], 0.05)


def test_combination_and_holm_by_hand():
    systems = ["A", "B", "C"]
    p_m1 = np.array([[1, 0.02, 0.30], [0.02, 1, 0.004], [0.30, 0.004, 1]])
    p_m2 = np.array([[1, 0.01, 0.50], [0.01, 1, 0.20], [0.50, 0.20, 1]])
    by_metric = {"m1": hsd_result([0.8, 0.5, 0.6], p_m1), "m2": hsd_result([0.7, 0.6, 0.4], p_m2)}
    hypotheses = HypothesisSet([
        # A > B on m1 and m2: one-sided p = 0.01 and 0.005 -> all-of = 0.01
        Hypothesis("all", [("A", "B")], ["m1", "m2"], direction="greater"),
        # B vs C two-sided, any-of: min(0.004, 0.2) * 2 metrics = 0.008
        Hypothesis("any", [("B", "C")], ["m1", "m2"], combine="any"),
        # C < A on m1 (diff -0.2 agrees): 0.30 / 2 = 0.15
        Hypothesis("less", [("C", "A")], ["m1"], direction="less"),
    ])
    result = evaluate_hypotheses(hypotheses, by_metric, systems, alpha=0.05)
    raw = [result[name].raw_p for name in ("all", "any", "less")]
    assert raw == pytest.approx([0.01, 0.008, 0.15])
    adjusted = [result[name].adjusted_p for name in ("all", "any", "less")]
    assert adjusted == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # sorted: 0.008 * 3 = 0.024; 0.01 * 2 = 0.02 -> 0.024 (monotone); 0.15 * 1
    assert adjusted == pytest.approx([0.024, 0.024, 0.15])
    assert [result[name].significant for name in ("all", "any", "less")] == [True, True, False]


def test_wrong_direction_never_supports_a_hypothesis():
    by_metric = {"m": hsd_result([0.2, 0.9], np.array([[1, 0.001], [0.001, 1]]))}
    hypotheses = HypothesisSet([Hypothesis("H", [("A", "B")], ["m"], direction="greater")])
    result = evaluate_hypotheses(hypotheses, by_metric, ["A", "B"], 0.05)["H"]
    assert result.raw_p == pytest.approx(0.9995) and not result.significant


def test_an_adjusted_p_equal_to_alpha_is_not_supported():
    # one two-sided hypothesis: Holm over one p leaves it at 0.05, which is not < 0.05
    by_metric = {"m": hsd_result([0.9, 0.2], np.array([[1, 0.05], [0.05, 1]]))}
    hypotheses = HypothesisSet([Hypothesis("H", [("A", "B")], ["m"])])
    result = evaluate_hypotheses(hypotheses, by_metric, ["A", "B"], 0.05)["H"]
    assert result.adjusted_p == 0.05 and not result.significant
    assert evaluate_hypotheses(hypotheses, by_metric, ["A", "B"], 0.0501)["H"].significant


def test_records_take_lists_as_tuples():
    hypothesis = Hypothesis("H", [["A", "B"]], ["m"])
    assert (hypothesis.pairs, hypothesis.metrics) == ((("A", "B"),), ("m",))
    assert HypothesisSet([hypothesis]).hypotheses == (hypothesis,)
