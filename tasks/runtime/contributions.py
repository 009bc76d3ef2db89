"""What a statistics contributor gives the reduce stage (tasks/reduce.py) and `ccrs stats`: a run extension's
part of stats.json. The reduce stage calls the contributors it is handed (pipelines/extensions/ declares
them; tasks/ names none):

- `inputs(context)`: keyword arguments it adds to the core statistics (stats.analysis.compute_all), read
  from the run's files in its folder or the command's options; {} where it has none. Inputs the scores
  cannot carry (a StatsInputError) leave the core statistics whole, with a note `<unusable>: <error>`;
- `block(context)`: its own block of stats.json, under `key` (None: no block for this run);
- `fingerprint(context)`: the fingerprints of the files it reads, which the reduce stage's key covers;
- `code`: its modules, which the reduce stage's key covers too.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StatisticsContext:
    """What a contributor reads: the run folder (None for scores outside a run, `ccrs stats FILE`), the
    judge stages' scores files and the command's options ({extension: {dest: value}}, `ccrs stats`; {} in
    a run); for `block`, also the scores themselves (the long table the core statistics read) and the
    core's settings ({"b", "seed", "alpha"})."""

    run_dir: Path | None
    scores_paths: tuple[Path, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    scores: Any = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StatisticsContributor:
    name: str
    key: str | None = None
    block: Callable[[StatisticsContext], dict | None] | None = None
    inputs: Callable[[StatisticsContext], dict[str, Any]] | None = None
    unusable: str = ""
    fingerprint: Callable[[StatisticsContext], list[str]] | None = None
    code: tuple[str, ...] = ()


@dataclass
class ContributedInputs:
    """The contributors' keyword arguments of the core statistics; `given`: the notes of the contributors
    that gave some; `failed`: (note, error) of those whose inputs cannot be read."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    given: list[str] = field(default_factory=list)
    failed: list[tuple[str, Exception]] = field(default_factory=list)


def contributed_inputs(contributors: Sequence[StatisticsContributor],
                       context: StatisticsContext) -> ContributedInputs:
    from stats.errors import StatsInputError

    found = ContributedInputs()
    for contributor in contributors:
        if contributor.inputs is None:
            continue
        try:
            given = contributor.inputs(context)
        except StatsInputError as error:
            found.failed.append((contributor.unusable, error))
            continue
        if given:
            found.kwargs.update(given)
            found.given.append(contributor.unusable)
    return found


def contributed_blocks(contributors: Sequence[StatisticsContributor], context: StatisticsContext) -> dict:
    """{key: block} of the contributors that have a block for this run."""
    blocks = {}
    for contributor in contributors:
        if contributor.key and contributor.block is not None:
            block = contributor.block(context)
            if block is not None:
                blocks[contributor.key] = block
    return blocks


def contributed_fingerprints(contributors: Sequence[StatisticsContributor],
                             context: StatisticsContext) -> list:
    return [found for contributor in contributors if contributor.fingerprint is not None
            for found in contributor.fingerprint(context)]
