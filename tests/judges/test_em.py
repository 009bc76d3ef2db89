import pytest

from judges.ccrs import combine_ac, sample_em
from judges.suite import Sample
from judges.config import CcrsOptions, JudgeConfig
from judges.em import exact_match, flatten_answers, normalize_answer


def test_normalization_is_squad_style():
    # SQuAD drops punctuation without a space
    assert normalize_answer("The  Hemophilia-A, and B!") == "hemophiliaa and b"
    assert normalize_answer("An apple a day") == "apple day"


def test_exact_match():
    assert exact_match("Hemophilia A.", ["hemophilia a"]) == 1.0
    assert exact_match("hemophilia B", ["hemophilia C"]) == 0.0
    # SQuAD normalization drops the article "a" even in "hemophilia A" (documented quirk)
    assert exact_match("hemophilia", ["hemophilia a"]) == 1.0
    assert exact_match("", ["", "x"]) == 0.0
    assert exact_match("yes", ["no", "Yes"]) == 1.0


def test_flatten_bioasq_exact_answers():
    assert flatten_answers([["hemophilia A"], ["hemophilia B", "haemophilia B"]]) == [
        "hemophilia A", "hemophilia B", "haemophilia B"]
    assert flatten_answers("no") == ["no"]
    assert flatten_answers(None) == []


def test_ac_combination():
    assert combine_ac(1.0, 100, 0.7) == pytest.approx(1.0)
    assert combine_ac(0.0, 80, 0.7) == pytest.approx(0.24)
    assert combine_ac(1.0, 0, 0.7) == pytest.approx(0.7)
    assert combine_ac(0.0, 50, 0.0) == pytest.approx(0.5)


def test_synonyms_off_by_default():
    sample = Sample("q", "A", "Is it?", "no", "No, it is not.", [], exact_answers=["no"])
    assert sample_em(sample, JudgeConfig()) == 0.0
    assert sample_em(sample, JudgeConfig(ccrs=CcrsOptions(em_use_exact_answer_synonyms=True))) == 1.0
