"""The judge stage's loop policy: which questions the judge stage judges in which looks (its batches), and
whether it stops after a look. The stage (tasks/judge.py) sees only this interface, as Ray Tune's trial loop
sees only its `Stopper`: the default judges every question in bounded batches and never stops early; a run
extension (pipelines/extensions/) may hand the stage another policy for a run that turns it on.

A policy also says what it adds to the stage's key (`key_settings`, merged into the key's config: a run
without a policy keeps the key it always had) and what it records when the stage ends (`record`: files it
writes beside the stage's outputs and the entries it adds to the stage's summary)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.runtime.judge_batches import question_batches

# a question a policy stopped before (never sent to the judge), in the per-sample table, where the policy
# says no reason of its own
NOT_JUDGED = "not judged: the judge loop stopped before this question"


@dataclass(frozen=True)
class Baseline:
    """The run a night is compared with (`ccrs nightly`), for the extensions that read one: its MLflow run id
    and its scores (query_id, system, metric, score)."""

    run_id: str
    scores: pd.DataFrame


class JudgeLoopPolicy:
    """The default: every question, in batches of `batch_samples` (ClientConfig.batch_samples) whole
    questions; never stops early, records nothing, adds nothing to the key. `not_judged`: why a question the
    policy stopped before has no judgment (the stage's summary says it where the stage stopped early)."""

    not_judged = NOT_JUDGED

    def looks(self, generations: Path, batch_samples: int) -> list[list[str]]:
        """The question ids in the order they are judged, cut into looks (the stage's batches)."""
        return question_batches(generations, batch_samples)

    def stop_after(self, parts: Sequence[Path], judged: Sequence[str]) -> bool:
        """After each look: the stage's judged parts so far and the question ids judged, in order. True
        ends the stage (the questions left are never sent)."""
        return False

    def record(self, out_dir: Path, judged: int) -> dict[str, Any]:
        """When the stage ends, `judged` questions judged: the entries the policy adds to the stage's
        summary (it may write its files into `out_dir`)."""
        return {}

    def key_settings(self) -> dict[str, Any]:
        """What the stage's key takes of the policy (nested dicts are merged into the key's config)."""
        return {}


BOUNDED_BATCHES = JudgeLoopPolicy()


def merged_settings(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, nested dicts merged key by key (the stage key's config)."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merged_settings(merged[key], value)
        else:
            merged[key] = value
    return merged
