"""The load test's requests: the judge stage's own (the registered CCRS suite's `plan`, judges/ccrs.py: same
templates, window policy, sampling parameters) over real BioASQ questions: response = the ideal answer,
context = a window of the question's gold snippets.

Every run draws fresh requests from the pool (a repeated prompt would hit vLLM's prefix cache and look
faster); when the pool is exhausted it starts over and the report counts the repeats.
"""
from __future__ import annotations

import random

from judges.caching import CachingJudge
from judges.ccrs import SUITE
from judges.config import ClientConfig, JudgeConfig
from judges.suite import Sample, Unit, get_suite
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from tasks.runtime.judge_session import judge_counter, parse_exact_answers


class LoadTestError(RuntimeError):
    """The load test cannot run (no usable requests, or the endpoint fails the warm-up request)."""


def judge_samples(dataset: str, chunks_per_sample: int) -> list[Sample]:
    """One sample per (question, window of gold snippets): first every question's first window, then
    every question's second window, and so on, so short runs still cover many questions."""
    loaded = load_dataset(DatasetConfig(path=dataset))
    texts = dict(zip(loaded.passages.column("doc_id").to_pylist(),
                     loaded.passages.column("text").to_pylist()))
    rounds: dict[int, list[Sample]] = {}
    for query in loaded.queries.to_pylist():
        if not query["answer"]:
            continue
        snippets = [texts[d] for d in query["relevant_doc_ids"] if d in texts] or [""]
        for start in range(0, len(snippets), chunks_per_sample):
            window = start // chunks_per_sample
            rounds.setdefault(window, []).append(Sample(
                query_id=query["query_id"], system=f"gold-w{window}", question=query["text"],
                response=query["answer"], ground_truth=query["answer"],
                context=snippets[start:start + chunks_per_sample],
                exact_answers=parse_exact_answers(query["exact_answer"])))
    return [sample for window in sorted(rounds) for sample in rounds[window]]


def plan_requests(samples: list[Sample], judge: JudgeConfig, client: ClientConfig,
                  limit: int | None = None) -> list[Unit]:
    """The judge stage's units for every (sample, metric) (the CCRS suite's `plan`; `unit_request` gives
    a unit's request), duplicates dropped (QR has no context, so its request is the same for every window of a
    question); at most `limit` of them."""
    count = judge_counter(judge)
    suite = get_suite(SUITE)
    caching = CachingJudge(suite, judge, client.seed)
    units: dict[str, Unit] = {}
    for sample in samples:
        for unit in suite.plan(sample, judge, client.seed, count):
            units.setdefault(caching.key(unit), unit)
            if limit is not None and len(units) >= limit:
                return list(units.values())
    return list(units.values())


class RequestPool:
    """Hands out the planned requests in a seeded random order (so every level gets a comparable mix of
    questions, metrics and prompt lengths), starting over when exhausted; counts the repeats."""

    def __init__(self, tasks: list[Unit], seed: int = 0):
        if not tasks:
            raise LoadTestError("no judge requests to send (empty dataset?)")
        self.tasks, self.cursor = list(tasks), 0
        random.Random(seed).shuffle(self.tasks)

    def take(self, n: int) -> list[tuple[Unit, bool]]:
        drawn = [(self.tasks[(self.cursor + i) % len(self.tasks)], self.cursor + i >= len(self.tasks))
                 for i in range(n)]
        self.cursor += n
        return drawn
