"""Agreement math against hand-computed values (GroUSE paper, Table 4)."""
import numpy as np
import pytest

from stats.agreement import Agreement, MacroF1, RankCorrelation, krippendorff_alpha, macro_f1, spearman
from stats.agreement import agreement as agreement_of
from stats.errors import StatsInputError

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


# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers x 12 units,
# missing marks as None; published nominal 0.743, interval 0.849.
_ = None
KRIPPENDORFF_EXAMPLE = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
    [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
], dtype=float).T  # units x coders


@pytest.mark.parametrize(("level", "published"), [("nominal", 0.743), ("interval", 0.849)])
def test_krippendorff_alpha_reproduces_the_published_worked_example(level, published):
    result = krippendorff_alpha(KRIPPENDORFF_EXAMPLE, level)
    # unit 12 has one mark (not pairable): 11 units, 40 pairable marks
    assert (result.n_units, result.n_values, result.note) == (11, 40, None)
    assert round(result.alpha, 3) == published


def test_krippendorff_alpha_is_the_same_whatever_the_order_of_units_and_coders():
    rng = np.random.default_rng(0)
    shuffled = KRIPPENDORFF_EXAMPLE[rng.permutation(12)][:, rng.permutation(4)]
    assert krippendorff_alpha(shuffled).alpha == pytest.approx(krippendorff_alpha(KRIPPENDORFF_EXAMPLE).alpha)


def test_krippendorff_alpha_perfect_agreement_is_one_and_accepts_none_for_a_missing_mark():
    result = krippendorff_alpha([[1, 1, None], [3, 3, 3], [5, None, 5]], "nominal")
    assert result.alpha == pytest.approx(1.0) and result.n_units == 3 and result.n_values == 7


def test_krippendorff_alpha_systematic_disagreement_is_below_zero():
    # two coders who always disagree on a binary mark: observed disagreement above the expected
    assert krippendorff_alpha([[0, 1], [1, 0], [0, 1], [1, 0]], "nominal").alpha < 0


@pytest.mark.parametrize(("matrix", "note"), [
    ([[1, None], [None, 2]], "no unit has marks of two or more coders"),
    (np.empty((0, 3)), "no unit has marks of two or more coders"),
    ([[2, 2], [2, 2]], "the marks do not vary: alpha is 0/0"),
])
def test_krippendorff_alpha_is_none_with_a_reason_where_undefined(matrix, note):
    result = krippendorff_alpha(matrix)
    assert result.alpha is None and result.note == note
    assert result.as_dict()["note"] == note


@pytest.mark.parametrize(("matrix", "level", "message"), [
    ([[1, 2]], "ordinal", "level must be one of"),
    ([1, 2, 3], "interval", "units x coders matrix"),
    ([[1, np.inf]], "interval", "finite"),
])
def test_krippendorff_alpha_bad_input_is_a_stats_input_error(matrix, level, message):
    with pytest.raises(StatsInputError, match=message):
        krippendorff_alpha(matrix, level)
