"""The judgment cache around whatever answers a suite's units (lm-evaluation-harness' `CachingLM`).

`CachingJudge` is the one place a cache key is made: suites plan units and never list what determines
their replies. A unit's key hashes everything its judgments are computed from:
- the sample's texts that its metrics declare they read (`Metric.inputs` + `Metric.reads`, so QR's key has
  no context and VERA's answer relevance none of the ground truth);
- the unit's metrics, the seed, the suite's prompt files of the selected version (their contents);
- every judge setting (`JudgeConfig`, recursively) except those declared as not changing a judgment (a
  model's `not_in_judgment`: where the judge is reached, whether results are cached, a metric selection the
  unit's own metrics stand in for), other suites' blocks, and the scoring settings for a suite that does not
  read them; so a setting added to the config is in every key until someone declares otherwise
  (tests/judges/test_caching.py changes every field and checks);
- what the endpoint reports serving (`identity`: other weights behind the same model id, other entries) and
  the suite's `cache_salt` (code-level choices such as VERA's embedder);
- for a repeat of `judge.repeats` (the unit's `Repeat`): a sampled repeat's mode, index and temperature (its
  seed follows from the index, the seed and the unit's texts); a perturbed repeat adds nothing, its chunk
  order is in its texts (repeat 0, the retriever's order, is the ordinary judgment and shares its key). The
  repeat settings are not in `common`: k = 1 keys are those of a run without repeats, and a larger k reuses
  the repeats judged.

`lookup` answers a batch of units from the cache (only the key column of each part is scanned), `save` adds
what was judged now, except judgments whose request failed in transport (asked again next run). The object
holds no open file, so it can be pickled into a Ray task and used there.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from pydantic import BaseModel

from judges.cache import JudgmentCache
from judges.suite import JudgeSuite, Unit, suites
from judges.templates import PROMPTS_ROOT, version_chain

CACHE_FORMAT = 2  # bump when what a key hashes changes meaning; older entries are then never matched
SCORING_FIELDS = frozenset({"scoring", "expected"})  # read only by a suite with `reads_scoring`


def judgment_settings(judge: BaseModel, suite: JudgeSuite) -> dict[str, Any]:
    """The judge settings that can change `suite`'s judgments, as JSON-ready values."""
    others = set(suites()) - {suite.name}
    skipped = others | (set() if suite.reads_scoring else SCORING_FIELDS)
    return {name: value for name, value in _affecting(judge).items() if name not in skipped}


def _affecting(model: BaseModel) -> dict[str, Any]:
    neutral = getattr(type(model), "not_in_judgment", frozenset())
    return {name: _affecting(value) if isinstance(value, BaseModel) else _plain(value)
            for name in type(model).model_fields if name not in neutral
            for value in (getattr(model, name),)}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@cache
def prompt_files(suite: str, version: str) -> str:
    """Digest of the suite's template folder for `version` (names and contents), and of the folders it
    builds on (`templates.version_chain`): an edited template is a new key. A version without a folder
    (a suite with no files) hashes to the empty digest."""
    digest = hashlib.sha256()
    for depth, name in enumerate(version_chain(suite, version)):
        folder = PROMPTS_ROOT / suite / name
        if depth:
            digest.update(f"base {name}".encode() + b"\0")
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def unit_texts(suite: JudgeSuite, unit: Unit) -> dict[str, Any]:
    """The sample's texts that the unit's metrics declare they read: what its key hashes of the sample."""
    read = sorted({name for metric in unit.metrics for name in suite.metrics[metric].sample_fields})
    return {name: getattr(unit.sample, name) for name in read}


class CachingJudge:
    """Keys, looks up and saves the judgments of one suite under one judge configuration."""

    def __init__(self, suite: JudgeSuite, judge: BaseModel, seed: int,
                 identity: dict[str, Any] | None = None, store: JudgmentCache | None = None):
        self.suite = suite
        self.store = store
        common = {"format": CACHE_FORMAT, "suite": suite.name, "seed": seed,
                  "judge": judgment_settings(judge, suite),
                  "prompts": prompt_files(suite.name, suite.prompt_version(judge)),
                  "salt": suite.cache_salt, "endpoint": identity or None}
        self._common = json.dumps(common, sort_keys=True)

    def key(self, unit: Unit) -> str:
        parts: list[Any] = [self._common, list(unit.metrics), unit_texts(self.suite, unit)]
        repeat = unit.repeat.key() if unit.repeat is not None else None
        if repeat is not None:  # a sampled repeat; the one judgment (k = 1) keeps the key it always had
            parts.append({"repeat": repeat})
        payload = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    def lookup(self, units: Sequence[Unit]) -> list[list[dict[str, Any]] | None]:
        """Each unit's cached judgment records, or None (no cache, or not in it)."""
        if self.store is None:
            return [None] * len(units)
        keys = [self.key(unit) for unit in units]
        found = self.store.get_many(keys)
        return [found.get(key) or None for key in keys]

    def save(self, units: Iterable[Unit], records: Iterable[list[dict[str, Any]]]) -> int:
        """Adds each unit's records and writes them as one new part; returns how many were added."""
        if self.store is None:
            return 0
        added = 0
        for unit, unit_records in zip(units, records):
            self.store.put(self.key(unit), self.suite.name, unit_records)
            added += 1
        self.store.flush()
        return added
