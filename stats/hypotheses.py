"""Pre-registered hypotheses: the YAML model and their evaluation from per-metric HSD results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stats.errors import StatsInputError
from stats.hsd import Direction, HSDResult, one_sided_p_value
from stats.multiple import Combine, combine_p_values, holm_adjust


class Hypothesis(BaseModel):
    """One hypothesis: pairs (a, b) of systems compared on the listed metrics.

    direction "greater" states mean_a > mean_b, "less" mean_a < mean_b, "two-sided" a difference.
    combine "all": every (pair, metric) test must hold (max p); "any": at least one (min p x n_metrics).
    """

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


class HypothesisSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hypotheses: tuple[Hypothesis, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> HypothesisSet:
        names = [h.name for h in self.hypotheses]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"hypothesis names must be unique; repeated: {repeated}")
        return self


@dataclass(frozen=True)
class PairTest:
    a: str
    b: str
    metric: str
    diff: float
    p_value: float  # after the one-sided rule where the hypothesis states a direction


@dataclass(frozen=True)
class HypothesisResult:
    name: str
    raw_p: float
    adjusted_p: float
    significant: bool
    tests: tuple[PairTest, ...]


def load_hypotheses(path: str | Path) -> HypothesisSet:
    """Read and validate a hypotheses YAML file (a top-level `hypotheses:` list)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise StatsInputError(f"cannot read hypotheses file {path}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        raise StatsInputError(f"hypotheses file {path} is not valid YAML: {error}") from error
    try:
        return HypothesisSet.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
            for item in error.errors()
        )
        raise StatsInputError(f"hypotheses file {path} is invalid: {problems}") from error


def check_hypotheses_against(
    hypotheses: HypothesisSet, systems: Sequence[str], metrics: Sequence[str]
) -> None:
    """Raise StatsInputError naming every system or metric that a hypothesis uses but the scores lack."""
    problems = []
    for hypothesis in hypotheses.hypotheses:
        named_systems = {system for pair in hypothesis.pairs for system in pair}
        unknown_systems = sorted(named_systems - set(systems))
        unknown_metrics = sorted(set(hypothesis.metrics) - set(metrics))
        if unknown_systems:
            problems.append(f"{hypothesis.name}: unknown system(s) {unknown_systems}")
        if unknown_metrics:
            problems.append(f"{hypothesis.name}: unknown metric(s) {unknown_metrics}")
    if problems:
        raise StatsInputError(
            f"hypotheses do not match the scores ({'; '.join(problems)}); "
            f"scores have systems {list(systems)} and metrics {list(metrics)}"
        )


def evaluate_hypotheses(
    hypotheses: HypothesisSet,
    hsd_by_metric: Mapping[str, HSDResult | None],
    systems: Sequence[str],
    alpha: float,
) -> dict[str, HypothesisResult]:
    """Combine each hypothesis's pair tests into one p-value, then Holm-Bonferroni across hypotheses.

    A metric whose HSD could not be run (None, e.g. no complete query) contributes p = 1.
    """
    check_hypotheses_against(hypotheses, systems, list(hsd_by_metric))
    index = {system: i for i, system in enumerate(systems)}
    tests = [_pair_tests(h, hsd_by_metric, index) for h in hypotheses.hypotheses]
    raw = [
        combine_p_values([t.p_value for t in tested], h.combine, len(h.metrics))
        for h, tested in zip(hypotheses.hypotheses, tests)
    ]
    adjusted = holm_adjust(raw)
    return {
        h.name: HypothesisResult(h.name, float(p), float(adj), bool(adj <= alpha), tuple(tested))
        for h, p, adj, tested in zip(hypotheses.hypotheses, raw, adjusted, tests)
    }


def _pair_tests(
    hypothesis: Hypothesis, hsd_by_metric: Mapping[str, HSDResult | None], index: Mapping[str, int]
) -> list[PairTest]:
    tests = []
    for metric in hypothesis.metrics:
        result = hsd_by_metric[metric]
        for a, b in hypothesis.pairs:
            if result is None:
                tests.append(PairTest(a, b, metric, float("nan"), 1.0))
                continue
            diff = float(result.diffs[index[a], index[b]])
            p = one_sided_p_value(float(result.p_values[index[a], index[b]]), diff, hypothesis.direction)
            tests.append(PairTest(a, b, metric, diff, p))
    return tests
