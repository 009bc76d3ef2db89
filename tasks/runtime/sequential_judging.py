"""The judge stage's sequential mode (`judge.sequential`, docs/sequential.md): questions in a seeded random
order, judged in looks of `look_every` whole questions (every system of a question in the same look, so each
look is paired); after each look the stopping rule (stats/sequential.py) reads the judged questions and the
stage stops once no (metric, system pair) is open. The looks are the stage's batches, so the judgment cache,
the batch checkpoints and resume work as for any judge stage: a resumed run re-reads its finished looks,
takes the same decisions after each and goes on with the same order."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from stats.scores import mean_over_repeats
from stats.sequential import DEFAULT_TARGET, Look, PairDecision, SequentialResult, decide, seeded_order
from tasks.runtime.judge_loop import Baseline, JudgeLoopPolicy

SEQUENTIAL_FILE = "sequential.json"  # a judge stage's record of its looks and decisions, beside its outputs


class SequentialOptions(BaseModel):
    """`judge.sequential` (the block its run extension declares, pipelines/extensions/sequential.py): judge
    the questions in a seeded random order, in looks of `look_every` questions, and stop once every (metric,
    system pair) is settled by anytime-valid confidence sequences (stats/sequential.py,
    docs/sequential.md)."""

    model_config = ConfigDict(extra="forbid")

    look_every: int = Field(default=50, ge=1, description="questions judged between two looks")
    margin: float = Field(default=0.02, gt=0.0, lt=1.0, description="a pair whose interval of the mean "
                          "difference lies inside [-margin, margin] is equivalent within the margin")
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="family-wise error rate of every "
                         "decision of the run, at every look at once")
    min_questions: int = Field(default=0, ge=0, description="never stop before this many questions")
    max_questions: int | None = Field(default=None, ge=1, description="judge at most this many questions "
                                      "(pairs still open then stay open)")
    metrics: list[str] | None = Field(default=None, description="the metrics whose pairs must be settled "
                                      "(default: every judged metric)")
    seed: int = Field(default=0, ge=0, description="seed of the questions' random order")
    target: Literal["population", "questions"] = Field(
        default=DEFAULT_TARGET, description="population: the decisions are about the means over the "
        "population of questions the run's are drawn from (as the HSD's); questions: about these N questions "
        "only (sampling without replacement: settles sooner, says nothing beyond them)")


def sequential_looks(generations: Path, options: SequentialOptions) -> list[list[str]]:
    """The run's question ids in the seeded random order, cut after `max_questions`, in looks."""
    ids = pq.read_table(generations, columns=["query_id"]).column("query_id").to_pylist()
    order = seeded_order(list(dict.fromkeys(str(query_id) for query_id in ids)), options.seed)
    order = order[: options.max_questions] if options.max_questions else order
    return [order[start:start + options.look_every] for start in range(0, len(order), options.look_every)]


@dataclass
class StoppingRule:
    """Decides after each look, from the parts judged so far. `metrics`: this stage's metrics among those
    that must be settled; `family_size`: every (metric, pair) of the run's family (all judge stages), so
    that the run's decisions together keep `options.alpha`."""

    options: SequentialOptions
    systems: tuple[str, ...]
    metrics: tuple[str, ...]
    family_size: int
    n_questions: int
    baseline_run: str | None = None     # a night settled against its baseline run (`ccrs nightly`)
    baseline: pd.DataFrame | None = None  # that run's scores: query_id, system, metric, score
    looks: list[Look] = field(default_factory=list)
    decisions: list[PairDecision] = field(default_factory=list)
    _read: list[pd.DataFrame] = field(default_factory=list, init=False, repr=False)  # parts read so far

    def after_look(self, parts: Sequence[Path], order: Sequence[str]) -> bool:
        """Read the parts judged since the last look, decide every pair of every metric (against the
        baseline: every (system, metric) cell); True when the stage may stop."""
        self._read += [pd.read_parquet(part) for part in parts[len(self._read):]]
        judgments = pd.concat(self._read, ignore_index=True)
        self.decisions = (self._against_baseline(judgments, order) if self.baseline is not None
                          else self._between_systems(judgments, order))
        self.looks.append(Look.of(len(order), self.decisions))
        return len(order) >= self.options.min_questions and self.looks[-1].open == 0 and bool(self.decisions)

    @property
    def population(self) -> int | None:
        """N for decisions about these N questions (sampling without replacement); None: the population."""
        return self.n_questions if self.options.target == "questions" else None

    def _between_systems(self, judgments: pd.DataFrame, order: Sequence[str]) -> list:
        matrices = self._matrices(judgments, order, self.systems)
        return decide(matrices, self.systems, self.population, self.options.alpha, self.options.margin,
                      self.family_size) if matrices else []

    def _against_baseline(self, judgments: pd.DataFrame, order: Sequence[str]) -> list:
        """Each system tonight against itself in the baseline run (`b` is `<system>@baseline`), on the
        questions both judged; "different" with an interval below 0 is a regression."""
        tonight = judgments.assign(system=judgments["system"].astype(str))
        before = self.baseline[self.baseline["query_id"].astype(str).isin(set(order))]
        decisions = []
        for system in self.systems:
            paired = pd.concat([tonight[tonight["system"] == system].assign(system="run"),
                                before[before["system"] == system].assign(system="baseline",
                                                                          status="ok")],
                               ignore_index=True)
            matrices = self._matrices(paired, order, ("run", "baseline"))
            if not matrices:
                continue
            for decision in decide(matrices, ("run", "baseline"), self.population, self.options.alpha,
                                   self.options.margin, self.family_size):
                decisions.append(PairDecision(decision.metric, system, f"{system}@baseline",
                                              decision.decision, decision.interval, decision.n))
        return decisions

    def _matrices(self, judgments: pd.DataFrame, order: Sequence[str],
                  columns: Sequence[str]) -> dict[str, np.ndarray]:
        """{metric: (questions, systems)} in the looks' order, on the questions every system was scored on
        (a failed judgment leaves its question out of that metric's decisions)."""
        scored = judgments.loc[judgments["score"].notna() & judgments["metric"].isin(self.metrics)]
        scored = scored.assign(query_id=scored["query_id"].astype(str))
        scored = mean_over_repeats(scored[[c for c in scored.columns
                                           if c in ("query_id", "system", "metric", "score", "repeat")]])
        matrices = {}
        for metric, rows in scored.groupby("metric", sort=False):
            grid = rows.pivot_table(index="query_id", columns="system", values="score", aggfunc="mean")
            grid = grid.reindex(index=[q for q in order if q in grid.index], columns=list(columns))
            matrices[str(metric)] = grid.dropna().to_numpy(dtype=np.float64)
        return {metric: matrices[metric] for metric in self.metrics if metric in matrices}

    def result(self, judged: int, seed: int) -> SequentialResult:
        return SequentialResult(judged, self.n_questions, tuple(self.looks), tuple(self.decisions),
                                self.options.alpha, self.options.margin, self.family_size,
                                self.options.look_every, seed, self.options.min_questions,
                                self.options.max_questions, self.systems, self.metrics,
                                self.options.target == "questions")

    def record(self, judged: int, seed: int) -> dict:
        """The stage's sequential.json: the result, and the baseline run a night was settled against."""
        data = self.result(judged, seed).to_json()
        if self.baseline_run is not None:
            data["baseline_run"] = self.baseline_run
        return data


def write_sequential(out_dir: Path, data: dict) -> dict:
    """sequential.json beside the stage's outputs; returns the stage summary's `sequential` entry."""
    (Path(out_dir) / SEQUENTIAL_FILE).write_text(json.dumps(data, indent=2))
    return {key: data[key] for key in ("stopped_at", "n_questions", "judge_calls_not_sent",
                                       "judge_calls_total")}


class SequentialJudging(JudgeLoopPolicy):
    """The judge stage's loop under `judge.sequential`: looks of whole questions in a seeded random order, a
    stop once every (metric, system pair) is settled (against `baseline`: every (system, metric) cell).
    `metrics`: the stage's judged metrics; `family`: every metric of the run whose pairs must be settled
    (all its judge stages), which sizes the family the error rate is shared by (empty: the stage's)."""

    not_judged = "not judged: the sequential run settled before this question (judge.sequential)"

    def __init__(self, options: SequentialOptions, metrics: Sequence[str], family: Sequence[str] = (),
                 baseline: Baseline | None = None) -> None:
        self.options, self.own, self.family, self.baseline = options, list(metrics), list(family), baseline
        self.rule: StoppingRule | None = None

    def looks(self, generations: Path, batch_samples: int) -> list[list[str]]:
        looks = sequential_looks(generations, self.options)
        systems = tuple(sorted(pq.read_table(generations, columns=["system"]).column("system").unique()
                               .to_pylist()))
        self.rule = self._rule(systems, sum(len(look) for look in looks))
        return looks

    def _rule(self, systems: tuple[str, ...], n_questions: int) -> StoppingRule:
        wanted = self.options.metrics if self.options.metrics is not None else self.family or self.own
        metrics = tuple(name for name in self.own if name in wanted)
        pairs = len(systems) if self.baseline else len(systems) * (len(systems) - 1) // 2  # cells vs baseline
        family_size = max(1, len([name for name in (self.family or self.own) if name in wanted]) * pairs)
        return StoppingRule(self.options, systems, metrics, family_size, n_questions,
                            baseline_run=self.baseline.run_id if self.baseline else None,
                            baseline=self.baseline.scores if self.baseline else None)

    def stop_after(self, parts: Sequence[Path], judged: Sequence[str]) -> bool:
        return self.rule.after_look(parts, judged)

    def record(self, out_dir: Path, judged: int) -> dict:
        return {"sequential": write_sequential(out_dir, self.rule.record(judged, self.options.seed))}

    def key_settings(self) -> dict:
        settings: dict = {"judge": {"sequential": self.options.model_dump(mode="json")}}
        if self.baseline:  # a sequential night stops where its cells are settled against this baseline
            settings["sequential_baseline"] = self.baseline.run_id
        return settings


def merged_sequential(paths: Sequence[Path]) -> dict | None:
    """stats.json["sequential"] from the judge stages' sequential.json files (None without any): their
    decisions together, stopped at the latest stage's stop, each stage's own record under `stages`."""
    records = {path.parent.name: json.loads(path.read_text()) for path in paths if path.is_file()}
    if not records:
        return None
    first = next(iter(records.values()))
    merged = {key: value for key, value in first.items() if key not in ("decisions", "looks")}
    merged["stopped_at"] = max(record["stopped_at"] for record in records.values())
    merged["looks"] = first["looks"] if len(records) == 1 else []
    merged["decisions"] = [decision for record in records.values() for decision in record["decisions"]]
    for key in ("judge_calls_not_sent", "judge_calls_total"):
        merged[key] = sum(record.get(key, 0) for record in records.values())
    merged["judge_calls_saved_share"] = (merged["judge_calls_not_sent"] / merged["judge_calls_total"]
                                         if merged["judge_calls_total"] else 0.0)
    merged["settled"] = all(record.get("settled", False) for record in records.values())
    merged["stages"] = records
    return merged
