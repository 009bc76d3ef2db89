"""Property-based checks of the judge score parser: any reply ends in a valid score or a reason."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from judges.ccrs import parse_score


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.none(), st.text()), st.booleans(), st.booleans())
def test_any_reply_is_a_score_in_range_or_a_reason(reply, expect_json, lenient):
    parsed = parse_score(reply, expect_json=expect_json, lenient=lenient)
    assert (parsed.score is None) != (parsed.reason is None)
    if parsed.score is not None:
        assert isinstance(parsed.score, int) and 0 <= parsed.score <= 100


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-10**6, max_value=10**6), st.sampled_from(["", " ", "\n", "  \t"]),
       st.sampled_from(["", "."]))
def test_bare_integers_parse_exactly_when_in_range(value, padding, period):
    parsed = parse_score(f"{padding}{value}{period}{padding}")
    assert parsed.score == (value if 0 <= value <= 100 else None)
    as_json = parse_score(json.dumps({"score": value}), expect_json=True)
    assert as_json.score == (value if 0 <= value <= 100 else None)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=100),
       st.text(alphabet=st.characters(categories=["L", "Zs"]), min_size=1))
def test_prose_around_a_number_is_invalid_unless_lenient(value, words):
    reply = f"{words.strip() or 'Score'}: {value}"
    assert parse_score(reply).score is None
    assert parse_score(reply, lenient=True).score == value
