"""A hypotheses YAML file (a top-level `hypotheses:` list): its schema, read into stats' typed records."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stats.errors import StatsInputError
from stats.hsd import Direction
from stats.hypotheses import Hypothesis, HypothesisSet
from stats.multiple import Combine


class HypothesisEntry(BaseModel):
    """One entry of the file; the fields of `stats.hypotheses.Hypothesis`, checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    pairs: tuple[tuple[str, str], ...] = Field(min_length=1)
    metrics: tuple[str, ...] = Field(min_length=1)
    direction: Direction = "two-sided"
    combine: Combine = "all"

    @field_validator("pairs")
    @classmethod
    def _pairs_of_distinct_systems(cls, pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        same = [pair for pair in pairs if pair[0] == pair[1]]
        if same:
            raise ValueError(f"a pair compares a system with itself: {same}")
        return pairs

    @field_validator("metrics")
    @classmethod
    def _distinct_metrics(cls, metrics: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics are listed more than once: {list(metrics)}")
        return metrics


class HypothesesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hypotheses: tuple[HypothesisEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> HypothesesFile:
        names = [h.name for h in self.hypotheses]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"hypothesis names must be unique; repeated: {repeated}")
        return self

    def hypothesis_set(self) -> HypothesisSet:
        return HypothesisSet(tuple(Hypothesis(**entry.model_dump()) for entry in self.hypotheses))


def load_hypotheses(path: str | Path) -> HypothesisSet:
    """Read and validate a hypotheses YAML file (StatsInputError, one line, naming what is wrong)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise StatsInputError(f"cannot read hypotheses file {path}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        raise StatsInputError(f"hypotheses file {path} is not valid YAML: {error}") from error
    try:
        return HypothesesFile.model_validate(raw).hypothesis_set()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
            for item in error.errors()
        )
        raise StatsInputError(f"hypotheses file {path} is invalid: {problems}") from error
