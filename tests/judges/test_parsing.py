import pytest

from judges.ccrs import parse_score


@pytest.mark.parametrize("text,score", [("85", 85), (" 0\n", 0), ("100", 100), ("42.", 42), ("+7", 7)])
def test_valid_scores(text, score):
    parsed = parse_score(text)
    assert parsed.score == score and parsed.reason is None


@pytest.mark.parametrize("text", ["101", "-1", "250"])
def test_out_of_range_is_invalid(text):
    parsed = parse_score(text)
    assert parsed.score is None and "out of range" in parsed.reason


@pytest.mark.parametrize("text", ["Score: 85", "I would rate this 85 out of 100.", "85/100"])
def test_prose_around_the_number_is_invalid(text):
    parsed = parse_score(text)
    assert parsed.score is None and parsed.reason == "prose around the number"


@pytest.mark.parametrize("text", ["", "   ", None])
def test_empty_is_invalid(text):
    assert parse_score(text).reason == "empty reply"


def test_non_integer_and_no_number():
    assert parse_score("85.5").reason == "not an integer"
    assert parse_score("excellent").reason == "no number in reply"


def test_lenient_accepts_one_unambiguous_integer_only():
    assert parse_score("Score: 85", lenient=True).score == 85
    assert parse_score("85/100", lenient=True).score is None
    assert parse_score("Score: 185", lenient=True).score is None


def test_json_output():
    assert parse_score('{"score": 70, "justification": "ok"}', expect_json=True).score == 70
    assert parse_score('{"score": 70, "justification": "ok"}', expect_json=True).justification == "ok"
    assert parse_score('{"score": 170}', expect_json=True).score is None
    assert parse_score('{"value": 70}', expect_json=True).reason == "JSON without a score field"
    assert parse_score("70", expect_json=True).reason == "JSON without a score field"
    assert parse_score("not json", expect_json=True).reason == "not valid JSON"
    assert parse_score('{"score": true}', expect_json=True).score is None
