"""Statistics contributors (tasks/runtime/contributions.py): their inputs of the core statistics, the notes
of those that cannot be read, their blocks of stats.json and the fingerprints the reduce key covers."""
from pathlib import Path

from stats.errors import StatsInputError
from tasks.runtime.contributions import (
    StatisticsContext,
    StatisticsContributor,
    contributed_blocks,
    contributed_fingerprints,
    contributed_inputs,
)


def _unreadable(context):
    raise StatsInputError("cannot read it")


CONTRIBUTORS = (
    StatisticsContributor("given", inputs=lambda context: {"extra": 1}, unusable="given not used",
                          fingerprint=lambda context: ["f1"]),
    StatisticsContributor("none", inputs=lambda context: {}, unusable="none not used"),
    StatisticsContributor("broken", inputs=_unreadable, unusable="broken not used"),
    StatisticsContributor("block", key="mine", block=lambda context: {"run": str(context.run_dir)},
                          fingerprint=lambda context: ["f2"]),
    StatisticsContributor("no block", key="other", block=lambda context: None),
)


def test_inputs_blocks_and_fingerprints_of_the_contributors_handed_in():
    context = StatisticsContext(Path("run"))
    found = contributed_inputs(CONTRIBUTORS, context)
    assert found.kwargs == {"extra": 1} and found.given == ["given not used"]
    assert [(note, str(error)) for note, error in found.failed] == [("broken not used", "cannot read it")]
    assert contributed_blocks(CONTRIBUTORS, context) == {"mine": {"run": "run"}}
    assert contributed_fingerprints(CONTRIBUTORS, context) == ["f1", "f2"]
