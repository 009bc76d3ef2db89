"""The one error type of the statistics package: bad input, reported with the offending rows or values."""

from __future__ import annotations


class StatsInputError(ValueError):
    """Scores, hypotheses or options that the statistics cannot be computed from."""
