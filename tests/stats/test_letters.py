"""Compact letter display (Piepho's insert-and-absorb): hand-computed cases and the defining property."""
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stats.errors import StatsInputError
from stats.letters import compact_letter_display


def test_hand_computed_overlapping_groups():
    # Means A > B > C > D; A differs from C and D, B from D. By hand: start {ABCD};
    # A-C splits it into {BCD}, {ABD}; A-D splits {ABD} into {BD} (absorbed by {BCD}) and {AB};
    # B-D splits {BCD} into {CD}, {BC}. Groups in order of their best member: {AB}=a, {BC}=b, {CD}=c.
    means = {"C": 0.5, "A": 0.9, "D": 0.4, "B": 0.8}
    letters = compact_letter_display(means, [("A", "C"), ("D", "A"), ("B", "D")])
    assert letters == {"A": "a", "B": "ab", "C": "bc", "D": "c"}


def test_no_difference_is_one_group_and_all_differences_are_one_letter_each():
    means = {"A": 0.2, "B": 0.7, "C": 0.5}
    assert compact_letter_display(means, []) == {"A": "a", "B": "a", "C": "a"}
    everything = list(combinations(means, 2))
    assert compact_letter_display(means, everything) == {"B": "a", "C": "b", "A": "c"}


def test_two_clear_tiers():
    means = {"A": 0.9, "B": 0.85, "C": 0.3, "D": 0.25}
    tiers = [("A", "C"), ("A", "D"), ("B", "C"), ("B", "D")]
    assert compact_letter_display(means, tiers) == {"A": "a", "B": "a", "C": "b", "D": "b"}


@pytest.mark.parametrize("pairs,message", [([("A", "Z")], "without a mean"), ([("A", "A")], "itself")])
def test_bad_pairs_are_errors(pairs, message):
    with pytest.raises(StatsInputError, match=message):
        compact_letter_display({"A": 1.0, "B": 0.0}, pairs)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7).flatmap(lambda k: st.tuples(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=k, max_size=k),
    st.lists(st.booleans(), min_size=k * (k - 1) // 2, max_size=k * (k - 1) // 2))))
def test_two_systems_share_a_letter_exactly_when_not_significantly_different(case):
    values, flags = case
    systems = [f"S{i}" for i in range(len(values))]
    pairs = list(combinations(systems, 2))
    significant = {pair for pair, flag in zip(pairs, flags) if flag}
    letters = compact_letter_display(dict(zip(systems, values)), significant)
    assert all(letters[s] for s in systems)
    for a, b in pairs:
        assert bool(set(letters[a]) & set(letters[b])) == ((a, b) not in significant)
