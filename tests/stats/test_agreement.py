"""Agreement math against hand-computed values (GroUSE paper, Table 4)."""
import numpy as np
import pytest

from stats.agreement import Agreement, MacroF1, RankCorrelation, macro_f1, spearman
from stats.agreement import agreement as agreement_of

LIKERT = ("answer_relevancy", "completeness")
BINARY = ("usefulness", "faithfulness", "positive_acceptance", "negative_rejection")


def agreement(a, b) -> dict:
    """The GroUSE metrics' agreement as the JSON `ccrs meta-eval --agreement` prints."""
    result = agreement_of(a, b, LIKERT, BINARY)
    assert isinstance(result, Agreement) and list(result.per_metric) == [*LIKERT, *BINARY]
    return result.as_dict()


def test_spearman_perfect_and_reversed():
    assert spearman([1, 2, 3, 4], [2, 3, 4, 5]).spearman == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]).spearman == pytest.approx(-1.0)


def test_spearman_with_ties_and_nulls_dropped_pairwise():
    # pairs kept: (1,1) (2,3) (3,2) (4,4); rho = 1 - 6*sum(d^2)/(n(n^2-1)) = 1 - 6*2/60 = 0.8
    result = spearman([1, 2, 3, None, 4], [1, 3, 2, 5, 4])
    assert result.n == 4 and result.spearman == pytest.approx(0.8)
    assert result.as_dict() == {"spearman": pytest.approx(0.8), "n": 4}


def test_spearman_undefined_for_constant_side():
    result = spearman([5, 5, 5], [1, 2, 3])
    assert result == RankCorrelation(None, 3, "fewer than two pairs or a constant side")
    assert result.as_dict() == {"spearman": None, "n": 3, "note": "fewer than two pairs or a constant side"}


def test_three_class_macro_f1_hand_computed():
    a = [1, 1, 0, None, None, 0]
    b = [1, 0, 0, None, 1, 0]
    # class 0: tp=2 fp=1 fn=0 -> 4/5; class 1: tp=1 fp=1 fn=1 -> 2/4; null: tp=1 fp=0 fn=1 -> 2/3
    result = macro_f1(a, b)
    assert result.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert result.per_class == {"0": 0.8, "1": 0.5, "null": pytest.approx(2 / 3)}


def test_macro_f1_identical_is_one_and_lengths_must_match():
    assert macro_f1([0, 1, None], [0, 1, None]).macro_f1 == 1.0
    assert macro_f1([], []) == MacroF1(None, 0, {})
    with pytest.raises(ValueError):
        macro_f1([0, 1], [0])
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_arrays_with_nan_read_as_null_marks():
    a = np.array([1.0, np.nan, 0.0, 1.0])
    assert macro_f1(a, [1, None, 0, 0]) == macro_f1([1, None, 0, 1], [1, None, 0, 0])
    assert spearman(np.array([1.0, 2.0, np.nan, 3.0]), [1, 2, 9, 3]).as_dict() == {"spearman": 1.0, "n": 3}


def test_agreement_on_shared_samples():
    a = {"t1": {"answer_relevancy": 5, "completeness": 5, "faithfulness": 1},
         "t2": {"answer_relevancy": 3, "completeness": 2, "faithfulness": 0},
         "t3": {"answer_relevancy": 1, "completeness": None, "faithfulness": 1}, "only_a": {}}
    b = {"t1": {"answer_relevancy": 4, "completeness": 5, "faithfulness": 1},
         "t2": {"answer_relevancy": 2, "completeness": 1, "faithfulness": 1},
         "t3": {"answer_relevancy": 1, "completeness": 3, "faithfulness": 1}}
    result = agreement(a, b)
    assert result["n_samples"] == 3
    assert result["answer_relevancy"]["spearman"] == pytest.approx(1.0)
    assert result["completeness"]["n"] == 2
    # faithfulness: class 0: tp0 -> 0; class 1: tp=2 fp=1 fn=0 -> 0.8
    assert result["faithfulness"]["macro_f1"] == pytest.approx(0.4)
    assert result["usefulness"] == {"macro_f1": None, "n": 0, "per_class": {}}  # never marked: left out


def test_missing_mark_is_left_out_but_null_is_a_class():
    a = {"t1": {"faithfulness": None}, "t2": {"faithfulness": 1}, "t3": {}}
    b = {"t1": {"faithfulness": None}, "t2": {"faithfulness": 1}, "t3": {"faithfulness": 0}}
    assert agreement(a, b)["faithfulness"] == {"macro_f1": 1.0, "n": 2, "per_class": {"1": 1.0, "null": 1.0}}
