"""Repeated judgments (`judge.repeats`, docs/judges.md "Repeated judgments"): every unit of a suite's plan
asked k times, as k units that differ only in their `Repeat` (judges/suite.py).

- mode sample: the unit is planned once and asked k times, every request of repeat r at the configured
  temperature with the seed `repeat_seed(client seed, r, what the unit shows)`: each prompt draws a stream
  of its own, so that repeat r of one (question, system) shares nothing with repeat r of another (one seed
  per repeat for every prompt made the draws of a repeat move together: measured, repeat 1 of the 135M
  judge gave 100 to every sample). The prompts of a unit's repeats are the same, so the server's prefix
  cache computes each once.
- mode perturb: greedy, like every other judgment. Repeat 0 is the unit as planned (the retriever's order:
  the ordinary judgment, with its cache key); repeat r >= 1 shows the chunks the judge window kept in a
  seeded order other than the original (`chunk_order`): the suite plans the sample again over exactly
  those chunks in that order, so only their order changes, never which chunks are shown. A unit that shows
  fewer than 2 chunks (QR reads none) is the same unit in every repeat.

`plan_units` is what the judge stage calls instead of `suite.plan` (for k = 1 it is `suite.plan`);
`planned_judge_units` (it, with the judge's own repeats) what the calibration gate and the cost plan count;
`stage_repeats`, `unrepeated_settings` and `repeats_label` what the judge session tells the judge stage
(tasks/runtime/judge_session.py: the stage names no repeats);
`client_for` the client a unit asks through, `repeated_judgments` copies the records of a
sample that is not sent (an empty response, a failed generation) once per repeat.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import replace
from typing import Any

from judges.caching import unit_texts
from judges.client import ChatRequest, ChatResult
from judges.config import RepeatOptions
from judges.suite import Count, Judgment, JudgeSuite, Repeat, Sample, Unit


def repeat_seed(seed: int, index: int, shown: Any) -> int:
    """The request seed of sampled repeat `index` of a unit that shows `shown` (its metrics and the texts
    they read), under the client seed `seed`: a 31-bit integer (any server's seed type holds it), another
    for every repeat and every prompt, the same in every run. What it depends on is all in the unit's cache
    key (the client seed, the repeat's index, the texts)."""
    payload = json.dumps(["ccrs-judge-repeat", seed, index, shown], sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:4], "big") & 0x7FFFFFFF


def shown(suite: JudgeSuite, unit: Unit) -> list[Any]:
    """What a unit's prompts show: its metrics and the sample's texts they read (judges/caching.py)."""
    return [list(unit.metrics), unit_texts(suite, unit)]


def chunk_order(n: int, seed: int, index: int, query_id: str) -> list[int]:
    """The order in which perturbed repeat `index` shows a question's `n` kept chunks: the original for
    repeat 0 or fewer than 2 chunks, else a seeded permutation other than the original (the same for every
    system that kept n chunks of that question, so that their prompts stay paired)."""
    original = list(range(n))
    if index == 0 or n < 2:
        return original
    for attempt in itertools.count():
        order = sorted(original, key=lambda i: hashlib.sha256(
            f"ccrs-chunk-order/{seed}/{index}/{query_id}/{attempt}/{i}".encode()).digest())
        if order != original:
            return order
    raise AssertionError("unreachable")


def plan_units(suite: JudgeSuite, sample: Sample, judge: Any, seed: int, count: Count,
               repeats: RepeatOptions | None) -> list[Unit]:
    """The units of one sample: the suite's plan, asked `repeats.k` times (each unit's repeats together, in
    repeat order); the plan itself when there are no repeats."""
    units = suite.plan(sample, judge, seed, count)
    if repeats is None or not repeats.repeated:
        return units
    if repeats.mode == "sample":
        temperature = repeats.sampling_temperature
        return [_sampled(suite, unit, seed, r, temperature) for unit in units for r in range(repeats.k)]
    by_repeat = [_perturbed(suite, sample, judge, seed, count, units, r) for r in range(repeats.k)]
    return [repeat[i] for i in range(len(units)) for repeat in by_repeat]


def stage_repeats(judge: Any) -> RepeatOptions | None:
    """The judge's `judge.repeats` as the judge stage asks them (None: k = 1, each unit once)."""
    return judge.repeats if judge.repeats.repeated else None


def unrepeated_settings(judge: Any) -> frozenset[str]:
    """The judge settings a judge stage's key leaves out for repeats: `repeats` at k = 1 (a run without
    repeats keeps the key it always had)."""
    return frozenset() if judge.repeats.repeated else frozenset({"repeats"})


def repeats_label(repeats: RepeatOptions) -> str:
    """How a stage's judgments were repeated, for its summary and the verdict: `3 x sample (temperature
    0.7)`, `3 x perturb (chunk order)`."""
    how = (f"temperature {repeats.sampling_temperature:g}" if repeats.mode == "sample" else "chunk order")
    return f"{repeats.k} x {repeats.mode} ({how})"


def planned_judge_units(suite: JudgeSuite, sample: Sample, judge: Any, seed: int, count: Count) -> list[Unit]:
    """The units the judge stage asks of one judged sample under `judge`, its `judge.repeats` included: the
    one count of planned judge calls (at least one a unit) that the calibration gate's stop line and
    `ccrs plan cost` both make."""
    return plan_units(suite, sample, judge, seed, count, judge.repeats)


def _sampled(suite: JudgeSuite, unit: Unit, seed: int, index: int, temperature: float) -> Unit:
    seeded = repeat_seed(seed, index, shown(suite, unit))
    return replace(unit, repeat=Repeat(index, "sample", temperature, seeded))


def _perturbed(suite: JudgeSuite, sample: Sample, judge: Any, seed: int, count: Count, units: list[Unit],
               index: int) -> list[Unit]:
    """`units` as perturbed repeat `index`: each over its kept chunks in `chunk_order` (the sample planned
    again once per number of kept chunks, the units matched by their metrics)."""
    replanned: dict[int, dict[tuple[str, ...], Unit]] = {}
    out = []
    for unit in units:
        n = unit.n_context_chunks
        order = chunk_order(n, seed, index, sample.query_id)
        if order == list(range(n)):
            out.append(replace(unit, repeat=Repeat(index, "perturb")))
            continue
        if n not in replanned:
            kept = sample.context[:n]
            shuffled = replace(sample, context=[kept[i] for i in order])
            replanned[n] = {again.metrics: again for again in suite.plan(shuffled, judge, seed, count)}
        again = replanned[n].get(unit.metrics)
        if again is None:
            raise RuntimeError(f"suite {suite.name}: planning {sample.query_id}/{sample.system} with its "
                               f"chunks reordered gave no unit of {unit.metrics}")
        out.append(replace(again, repeat=Repeat(index, "perturb"),
                           n_context_truncated=unit.n_context_truncated + again.n_context_truncated))
    return out


def repeated_judgments(judgments: list[Judgment], repeats: RepeatOptions | None) -> list[Judgment]:
    """The records of a sample that is not sent, once per repeat (one row per (question, system, metric,
    repeat), as the judged ones have); as they are when there are no repeats."""
    if repeats is None or not repeats.repeated:
        return judgments
    return [replace(judgment, repeat=r) for judgment in judgments for r in range(repeats.k)]


class SampledClient:
    """The client a sampled repeat asks through: every request (re-asks and continuation requests too) at
    the repeat's temperature with its seed; everything else is the wrapped client's."""

    def __init__(self, client: Any, repeat: Repeat):
        self.client, self.repeat = client, repeat

    def chat(self, request: ChatRequest) -> ChatResult:
        return self.client.chat(replace(request, temperature=self.repeat.temperature, seed=self.repeat.seed))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def client_for(client: Any, unit: Unit) -> Any:
    """`client` itself, or for a sampled repeat the `SampledClient` around it."""
    repeat = unit.repeat
    return SampledClient(client, repeat) if repeat is not None and repeat.sampled else client
