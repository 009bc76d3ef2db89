"""Pre-registered hypotheses (typed records) and their evaluation from per-metric HSD results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stats.errors import StatsInputError
from stats.hsd import Direction, HSDResult, one_sided_p_value
from stats.multiple import Combine, combine_p_values, holm_adjust, is_significant


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis: pairs (a, b) of systems compared on the listed metrics.

    direction "greater" states mean_a > mean_b, "less" mean_a < mean_b, "two-sided" a difference.
    combine "all": every (pair, metric) test must hold (max p); "any": at least one (min p x n_metrics).
    Lists are taken as tuples. The schema of a hypotheses file (tasks/reduce.py) checks the rest:
    at least one pair and metric, no pair of a system with itself, no metric twice.
    """

    name: str
    pairs: tuple[tuple[str, str], ...]
    metrics: tuple[str, ...]
    direction: Direction = "two-sided"
    combine: Combine = "all"
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple((a, b) for a, b in self.pairs))
        object.__setattr__(self, "metrics", tuple(self.metrics))


@dataclass(frozen=True)
class HypothesisSet:
    """Pre-registered hypotheses, tested together (Holm-Bonferroni across them); names are unique."""

    hypotheses: tuple[Hypothesis, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hypotheses", tuple(self.hypotheses))


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


def check_hypotheses_against(
    hypotheses: HypothesisSet, systems: Sequence[str], metrics: Sequence[str]
) -> None:
    """Raise StatsInputError naming every system or metric that a hypothesis uses but the scores lack (one
    system: that hypotheses compare two or more)."""
    if len(systems) == 1:
        names = ", ".join(hypothesis.name for hypothesis in hypotheses.hypotheses)
        raise StatsInputError(f"hypotheses compare systems, and the scores hold one ({systems[0]}): "
                              f"{names} cannot be tested; drop the hypotheses, or add the systems they name")
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
        h.name: HypothesisResult(h.name, float(p), float(adj), is_significant(adj, alpha), tuple(tested))
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
