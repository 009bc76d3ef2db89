"""Compact letter display of pairwise test results (Piepho's insert-and-absorb algorithm).

Systems sharing a letter are not significantly different; two systems without a common letter are. The
letters are assigned in order of the means (the best system's group gets "a"), so the display reads
like a ranking. Piepho, H.-P. (2004), "An algorithm for a letter-based representation of all-pairwise
comparisons", J. Comput. Graph. Stat. 13(2).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from string import ascii_lowercase

from stats.errors import StatsInputError


def compact_letter_display(
    means: Mapping[str, float], significant_pairs: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """{system: letters}: systems sharing a letter are not significantly different.

    means: each system's mean (sets the order of the letters: highest mean first).
    significant_pairs: the pairs (a, b) whose difference is significant (order within a pair is ignored).
    """
    order = sorted(means, key=lambda system: (-means[system], system))
    known = set(order)
    pairs = [tuple(pair) for pair in significant_pairs]
    unknown = sorted({system for pair in pairs for system in pair} - known)
    if unknown:
        raise StatsInputError(f"significant pairs name systems without a mean: {unknown}")
    groups: list[frozenset[str]] = [frozenset(order)]
    for a, b in pairs:
        if a == b:
            raise StatsInputError(f"a significant pair compares {a!r} with itself")
        groups = _absorb(_insert(groups, a, b))
    return _letters(order, groups)


def _insert(groups: list[frozenset[str]], a: str, b: str) -> list[frozenset[str]]:
    """Split every group holding both a and b into one without a and one without b."""
    split: list[frozenset[str]] = []
    for group in groups:
        if a in group and b in group:
            split += [group - {a}, group - {b}]
        else:
            split.append(group)
    return split


def _absorb(groups: list[frozenset[str]]) -> list[frozenset[str]]:
    """Drop duplicates and every group contained in another group."""
    unique = list(dict.fromkeys(groups))
    return [group for group in unique if not any(group < other for other in unique)]


def _letters(order: Sequence[str], groups: list[frozenset[str]]) -> dict[str, str]:
    rank = {system: position for position, system in enumerate(order)}
    ordered = sorted(groups, key=lambda group: sorted(rank[s] for s in group))
    if len(ordered) > len(ascii_lowercase):
        raise StatsInputError(f"{len(ordered)} letter groups: more than the 26 letters")
    letters = {system: "" for system in order}
    for letter, group in zip(ascii_lowercase, ordered):
        for system in order:
            if system in group:
                letters[system] += letter
    return letters
