"""The run's questions with each system's answer, their seeded order (labels/order.json) and the blind
order of a question's answers on the page ("Answer 1..k")."""
from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.options import UsageError
from pipelines.tools.labeling.files import write_json
from tasks.runtime.layout import RunLayout


@dataclass(frozen=True)
class Answer:
    system: str
    text: str
    contexts: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    query_id: str
    text: str
    reference: str
    answers: tuple[Answer, ...]  # the systems that answered (failed generations have nothing to label)


def load_questions(layout: RunLayout) -> list[Question]:
    """The run's questions in queries order, each with its systems' answers and the contexts each reader
    saw (the judge stage's samples: tasks.runtime.judge_session.load_samples)."""
    from tasks.runtime.judge_session import load_samples

    for path in (layout.queries, layout.generations):
        if not path.exists():
            raise UsageError(f"{layout.root} is not a run folder with answers: {path} is missing")
    queries = pd.read_parquet(layout.queries)
    generations = pd.read_parquet(layout.generations)
    retrieved = (pd.read_parquet(layout.retrieved) if layout.retrieved.exists()
                 else pd.DataFrame(columns=["query_id", "retriever", "rank", "text"]))
    top_k = int(retrieved["rank"].max()) if len(retrieved) else 0  # the reader's own n_chunks_used cuts it
    samples, _ = load_samples(queries, retrieved, generations, top_k)
    answers: dict[str, list[Answer]] = {}
    for sample in samples:
        answers.setdefault(sample.query_id, []).append(Answer(sample.system, sample.response,
                                                              tuple(sample.context)))
    return [Question(str(row.query_id), str(row.text), str(getattr(row, "answer", "") or ""),
                     tuple(sorted(answers.get(str(row.query_id), []), key=lambda a: a.system)))
            for row in queries.itertuples(index=False)]


def question_order(layout: RunLayout, query_ids: Sequence[str], seed: int) -> list[str]:
    """The seeded random order of the run's questions: labels/order.json when there (drawn with the same
    seed, of the same questions), else drawn from `seed` and written."""
    if layout.labels_order.exists():
        stored = json.loads(layout.labels_order.read_text())
        if seed != stored["seed"]:
            raise UsageError(f"{layout.labels_order} holds the order of seed {stored['seed']}, not {seed}: "
                             f"give --seed {stored['seed']} (a new order would make the labeled set no "
                             "uniform sample)")
        if sorted(stored["question_ids"]) != sorted(query_ids):
            raise UsageError(f"{layout.labels_order} lists other questions than the run's "
                             f"({len(stored['question_ids'])} against {len(query_ids)})")
        return list(stored["question_ids"])
    order = [str(query_ids[i]) for i in np.random.default_rng(seed).permutation(len(query_ids))]
    write_json(layout.labels_order, {"seed": seed, "question_ids": order})
    return order


def blinded(question: Question, seed: int) -> list[Answer]:
    """The question's answers in the page's order ("Answer 1..k"): shuffled by (seed, question id)."""
    answers = list(question.answers)
    random.Random(f"{seed}:{question.query_id}").shuffle(answers)
    return answers


