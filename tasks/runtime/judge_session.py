"""The judge session: one judge, the way lm-evaluation-harness has one LM wrapped in its CachingLM.

`JudgeSession` takes a suite (judges/suite.py), the judge's settings, the judgment cache and a transport
(`RayFanOut`: Ray tasks against the endpoint, for a run; `InProcess`: a client in this process, for a small
set) and judges samples, with repeats (judges/repeats.py). The judge stage (tasks/judge.py), the
calibration gate (tasks/calibration.py), the bias probes (tasks/bias_probes.py), VERA's commands and
meta-eval all judge through it; this module defines no stage, so the stages that share it never import
each other.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from infra.models import default_tokenizer
from judges.caching import CachingJudge
from judges.cache import JudgmentCache, default_cache_dir
from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig, RepeatOptions
from judges.em import flatten_answers
from judges.injection import injection_markers, union_of_markers
from judges.repeats import (
    client_for,
    plan_units,
    repeated_judgments,
    repeats_label,
    stage_repeats,
    unrepeated_settings,
)
from judges.suite import Judgment, JudgeSuite, Sample, Unit, get_suite
from judges.tokens import token_counter
from retrievers.schema import top_k_contexts
from tasks.runtime.fanout import FanOutReport, fan_out_report, given_bar, prefix_order
from tasks.runtime.stage import StageCheckpoint


JUDGE_ENDPOINT_FIELDS = frozenset({"base_url", "api_key_env"})


def parse_exact_answers(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    return flatten_answers(value)


def load_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame,
                 top_k: int) -> tuple[list[Sample], list[dict]]:
    """Judge inputs for generated rows (the context is what the reader saw: the retrieved chunks it used,
    or, for a system that retrieves for itself, its own `contexts` column; the reader's sampled answers
    where generations.parquet has them); failed generations come back separately (recorded as failed
    judgments)."""
    contexts = top_k_contexts(retrieved, top_k)
    by_id = {str(q.query_id): q for q in queries.itertuples(index=False)}
    samples, failed = [], []
    chunk_texts: dict[tuple[str, str], list[str]] = {}  # one copy per (query, retriever), not per reader
    for row in generations.itertuples(index=False):
        if row.status != "ok":
            failed.append({"query_id": str(row.query_id), "system": row.system, "error": row.error})
            continue
        query = by_id[str(row.query_id)]
        own = getattr(row, "contexts", None)
        if own is not None:
            texts = [str(text) for text in own]
        else:
            key = (str(row.query_id), str(row.retriever))
            if key not in chunk_texts:
                context = contexts.get(key)
                chunk_texts[key] = [] if context is None else context["text"].astype(str).tolist()
            texts = chunk_texts[key][: int(row.n_chunks_used)]
        samples.append(Sample(
            query_id=str(row.query_id), system=row.system, question=str(query.text),
            response=str(row.answer or ""), ground_truth=str(getattr(query, "answer", "") or ""),
            context=texts,
            exact_answers=parse_exact_answers(getattr(query, "exact_answer", None)),
            sampled_responses=sampled_responses(row),
        ))
    return samples, failed


def sampled_responses(row: Any) -> tuple[str, ...]:
    """The reader's sampled answers of a generated row (tasks/generate.py; none without the column)."""
    answers = getattr(row, "sampled_answers", None)
    return () if answers is None else tuple(str(answer) for answer in answers)


@dataclass
class _Evaluate:
    """The function each fan-out shard runs: picklable (suite by name, config, token counter source)."""


    suite: str
    judge: JudgeConfig


    def __call__(self, client: LLMClient, unit: Unit) -> list[Judgment]:
        suite = get_suite(self.suite)
        judgments = suite.evaluate(client_for(client, unit), unit, self.judge, judge_counter(self.judge))
        for judgment in judgments:
            judgment.n_context_chunks = unit.n_context_chunks
            judgment.n_context_truncated = unit.n_context_truncated
            judgment.repeat = repeat_index(unit)
        return judgments


def repeat_index(unit: Unit) -> int | None:
    return unit.repeat.index if unit.repeat is not None else None


def judge_counter(judge: JudgeConfig):
    return token_counter(judge.tokenizer or default_tokenizer(judge.model))


def transport_failed(judgments: list[Judgment]) -> bool:
    """A request failure is not the judge's answer: not cached, not checkpointed, requeued."""
    return any(j.transport_failed for j in judgments)


def _restored(records: list[dict], unit: Unit, cached: bool) -> list[Judgment]:
    judgments = [Judgment(**{k: v for k, v in r.items() if k in Judgment.COLUMNS}) for r in records]
    for judgment in judgments:
        judgment.query_id, judgment.system = unit.sample.query_id, unit.sample.system
        judgment.n_context_chunks, judgment.n_context_truncated = (
            unit.n_context_chunks, unit.n_context_truncated
        )
        judgment.repeat = repeat_index(unit)
        judgment.cached = cached
    return judgments


def ordered_for_prefix_reuse(units: list[Unit]) -> tuple[list[Unit], list[str]]:
    """The units of one prefix group (question x retriever) together, by metric inside it (in the paper
    layout the prompts of one metric share template and context; context-first, all of them share the
    context), and each unit's group key for the fan-out's shard boundaries."""
    groups = [unit.prefix_group for unit in units]
    order = prefix_order(groups, ["+".join(unit.metrics) for unit in units])
    return [units[i] for i in order], [groups[i] for i in order]


@dataclass(frozen=True)
class RayFanOut:
    """The transport of a run: Ray tasks against `base_url`, bounded, shard by shard, requeueing what a
    lost worker or a failed request left (tasks/runtime/fanout.py)."""


    base_url: str


    def ask(self, evaluate: _Evaluate, units: list[Unit], client: ClientConfig, progress: Any,
            persist: Callable[[list[int], list[list[Judgment]]], None],
            groups: list[str] | None) -> tuple[list[list[Judgment]], FanOutReport]:
        return fan_out_report(evaluate, units, client, self.base_url, progress=progress,
                              desc=f"judge {evaluate.suite}", on_shard=persist, retry_if=transport_failed,
                              groups=groups, weigh=len)


@dataclass(frozen=True)
class InProcess:
    """The transport of a small set (unit tests, probes, a tool's sample): `llm` in this process, no
    requeue rounds."""


    llm: LLMClient


    def ask(self, evaluate: _Evaluate, units: list[Unit], client: ClientConfig, progress: Any,
            persist: Callable[[list[int], list[list[Judgment]]], None],
            groups: list[str] | None) -> tuple[list[list[Judgment]], FanOutReport]:
        return ask_here(evaluate, units, self.llm, progress, persist)


@dataclass
class JudgeSession:
    """One judge, the way lm-evaluation-harness has one LM wrapped in its CachingLM: a suite, the judge's
    settings, the judgment cache and a transport (`RayFanOut` for a run, `InProcess` for a small set).
    `judge(samples)` gives every selected metric of every sample: empty responses are recorded without a
    call; each unit comes from the cache, from the caller's checkpoint (a resumed run) or is asked now;
    what is asked now is saved to the checkpoint shard by shard and to the cache at the end, through
    judges.caching's CachingJudge (keyed on what the unit's metrics read, the judge settings that change a
    judgment and the endpoint's `identity`). `repeats`: each unit asked `repeats.k` times
    (judges/repeats.py; None: once). Every judging path of the project (the judge stage, the calibration
    gate, the probes, VERA's commands, meta-eval) judges through this class."""


    suite: JudgeSuite
    judge: JudgeConfig
    client: ClientConfig
    transport: RayFanOut | InProcess
    identity: dict[str, Any] | None = None
    cache: JudgmentCache | None = None
    repeats: RepeatOptions | None = None


    def __post_init__(self) -> None:
        if self.cache is None and self.judge.cache:
            self.cache = JudgmentCache(default_cache_dir())
        self.caching = CachingJudge(self.suite, self.judge, self.client.seed, self.identity, self.cache)


    @classmethod
    def of(cls, suite: str | JudgeSuite, judge: JudgeConfig, client: ClientConfig | None = None,
           base_url: str = "", llm: LLMClient | None = None, **options: Any) -> JudgeSession:
        """A session on the suite named (or given), asking through `llm` in this process where one is
        given, else through Ray tasks against `base_url`."""
        transport = InProcess(llm) if llm is not None else RayFanOut(base_url)
        suite = get_suite(suite) if isinstance(suite, str) else suite
        return cls(suite, judge, client or ClientConfig(), transport, **options)


    @classmethod
    def for_stage(cls, suite: JudgeSuite, judge: JudgeConfig, client: ClientConfig, base_url: str,
                  identity: dict[str, Any] | None) -> JudgeSession:
        """A judge stage's session: Ray tasks against `base_url`, each unit asked as many times as the
        judge's settings say (judges/repeats.py)."""
        return cls(suite, judge, client, RayFanOut(base_url), identity, repeats=stage_repeats(judge))


    @property
    def copies(self) -> int:
        """Judgments per (question, system, metric): one per repeat."""
        return self.repeats.k if self.repeats is not None else 1


    def summary_entries(self) -> dict[str, Any]:
        """What the session adds to a stage's summary: how its judgments were repeated ({}: once)."""
        return {"repeats": repeats_label(self.repeats)} if self.repeats is not None else {}


    def metrics(self) -> tuple[str, ...]:
        return self.suite.selected_metrics(self.judge)


    def judge_samples(self, samples: list[Sample], progress: Any = False,
                      checkpoint: StageCheckpoint | None = None) -> tuple[list[Judgment], dict[str, Any]]:
        """(every judgment, the counts: cache_hits, resumed, judge_requests (units asked now), requests).
        `progress`: True (a bar of the fan-out's own) or a bar advanced by judgments."""
        judgments, planned = self._plan(samples)
        done = checkpoint.load() if checkpoint is not None else {}
        todo: list[Unit] = []
        hits = resumed = 0
        for unit, records in zip(planned, self.caching.lookup(planned)):
            if records:
                hits += 1
                judgments += _restored(records, unit, cached=True)
            elif unit.id in done:
                resumed += 1
                judgments += _restored(done[unit.id], unit, cached=False)
            else:
                todo.append(unit)
        perturbed = self.repeats is not None and self.repeats.mode == "perturb"
        todo, twins = asked_once(todo, self.caching) if perturbed else (todo, [])
        if given_bar(progress) is not None:
            progress.update(len(judgments))
        todo, groups = ordered_for_prefix_reuse(todo) if self.client.prefix_order else (todo, None)


        def persist(indices: list[int], values: list[list[Judgment]]) -> None:
            if checkpoint is not None:
                checkpoint.save({todo[j].id: [x.record() for x in v] for j, v in zip(indices, values)
                                 if not transport_failed(v)})


        evaluate = _Evaluate(self.suite.name, self.judge)
        fresh, report = self.transport.ask(evaluate, todo, self.client, progress, persist, groups)
        answered = [(unit, values) for unit, values in zip(todo, fresh) if not transport_failed(values)]
        self.caching.save([unit for unit, _ in answered],
                          [[v.record() for v in values] for _, values in answered])
        judgments += twin_judgments(twins, todo, fresh, progress)
        stats = {"cache_hits": hits, "resumed": resumed, "judge_requests": len(todo),
                 "requests": report.as_dict()}
        if twins:
            stats["repeat_twins"] = len(twins)
        return judgments + [j for values in fresh for j in values], stats


    def by_sample(self, samples: list[Sample], progress: Any = False
                  ) -> tuple[dict[str, list[Judgment]], dict[str, Any]]:
        """{sample's query_id: its judgments} and the counts, plus `judge_calls` (requests sent now,
        re-asks included)."""
        judgments, stats = self.judge_samples(samples, progress)
        grouped: dict[str, list[Judgment]] = {}
        for judgment in judgments:
            grouped.setdefault(judgment.query_id, []).append(judgment)
        calls = sum(j.attempts for j in judgments if not j.cached)
        return grouped, {**stats, "judge_calls": calls}


    def failed_generations(self, failed: list[dict]) -> list[Judgment]:
        """A failed generation's rows: one failed judgment per metric (and repeat), nothing asked."""
        return failed_generation_judgments(self.suite, failed, self.judge, self.repeats)


    def _plan(self, samples: list[Sample]) -> tuple[list[Judgment], list[Unit]]:
        count = judge_counter(self.judge)
        judgments: list[Judgment] = []
        planned: list[Unit] = []
        for sample in samples:
            if not sample.response.strip():
                reason = "empty response: the judge is not called"
                empty = self.suite.not_judged(sample, self.judge, "empty_response", reason)
                judgments += repeated_judgments(empty, self.repeats)
                continue
            planned += plan_units(self.suite, sample, self.judge, self.client.seed, count, self.repeats)
        return judgments, planned


def keyed_judge_settings(judge: JudgeConfig) -> dict[str, Any]:
    """The judge settings a judge stage's key covers: all but where the judge is reached (the endpoint's
    identity is keyed instead) and, at k = 1, repeats (a run without them keeps the key it always had). A
    run extension's block under `judge.` is no JudgeConfig field: the stage's loop policy adds what it
    declares of it (JudgeLoopPolicy.key_settings)."""
    return judge.model_dump(mode="json", exclude=JUDGE_ENDPOINT_FIELDS | unrepeated_settings(judge))


def asked_once(units: list[Unit], caching: CachingJudge) -> tuple[list[Unit], list[tuple[Unit, Unit]]]:
    """Units to ask, each cache key once, and the (twin, unit asked) pairs of the rest: perturbed repeats
    that show the same prompt (a unit that reads no context, a permutation drawn twice for 2 chunks)."""
    first: dict[str, Unit] = {}
    todo, twins = [], []
    for unit in units:
        key = caching.key(unit)
        if key in first:
            twins.append((unit, first[key]))
        else:
            first[key] = unit
            todo.append(unit)
    return todo, twins


def twin_judgments(twins: list[tuple[Unit, Unit]], todo: list[Unit], fresh: list[list[Judgment]],
                   progress: Any) -> list[Judgment]:
    """Each twin's judgments: those of the unit asked for it (counted as cached: nothing was sent)."""
    answers = {id(unit): values for unit, values in zip(todo, fresh)}
    judgments = [j for twin, asked in twins
                 for j in _restored([v.record() for v in answers[id(asked)]], twin, cached=True)]
    if judgments and given_bar(progress) is not None:
        progress.update(len(judgments))
    return judgments


def ask_here(evaluate: _Evaluate, units: list[Unit], llm: LLMClient, progress: Any,
             persist: Callable[[list[int], list[list[Judgment]]], None]
             ) -> tuple[list[list[Judgment]], FanOutReport]:
    """The units asked through `llm` in this process, `progress` (a bar, if one is given) advanced by
    judgments as each unit finishes, the results persisted at the end."""
    bar = given_bar(progress)


    def one(unit: Unit) -> list[Judgment]:
        judgments = evaluate(llm, unit)
        if bar is not None:
            bar.update(len(judgments))
        return judgments


    fresh = llm.map(one, units)
    persist(list(range(len(units))), fresh)
    return fresh, FanOutReport(items=len(units))


def failed_generation_judgments(suite: JudgeSuite, failed: list[dict], judge: JudgeConfig,
                                repeats: RepeatOptions | None = None) -> list[Judgment]:
    judgments = []
    for f in failed:
        sample = Sample(f["query_id"], f["system"], "", "", "", [])
        judgments += suite.not_judged(sample, judge, "failed", f"generation failed: {f['error']}"[:2000])
    return repeated_judgments(judgments, repeats)


def suspicious_texts(samples: list[Sample]) -> dict[tuple[str, str], str]:
    """(query_id, system) -> the injection patterns found in the response or its retrieved context
    (judges/injection.py), e.g. "response:score_dictation;context:instruction_override"."""
    flags = {}
    chunk_markers: dict[str, tuple[str, ...]] = {}  # a chunk is shared by the readers of its retriever


    def markers(chunk: str) -> tuple[str, ...]:
        if chunk not in chunk_markers:
            chunk_markers[chunk] = injection_markers(chunk)
        return chunk_markers[chunk]


    for sample in samples:
        found = [f"response:{m}" for m in injection_markers(sample.response)]
        found += [f"context:{m}" for m in union_of_markers(markers(chunk) for chunk in sample.context)]
        if found:
            flags[(sample.query_id, sample.system)] = ";".join(found)
    return flags
