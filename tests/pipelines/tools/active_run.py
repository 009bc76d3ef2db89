"""A synthetic finished run for the active labeling design (no LLM, no BioASQ: enough questions for the
anytime intervals): `questions` questions x three systems, the judge metric answer_relevancy (1-5) scored
for every answer, and a simulated person whose marks the page receives. System A's human mean is well
above B's and C's; B and C are equal; the judge sees every answer's quality with noise that varies from
question to question (its uncertainty: the systems' disagreement)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.runtime.layout import RunLayout

METRIC = "answer_relevancy"  # a judge metric on 1-5
SYSTEMS = ("A", "B", "C")
QUALITY = {"A": 0.75, "B": 0.35, "C": 0.35}  # the human mean on [0, 1]


def write_active_run(root: Path, questions: int = 160, seed: int = 0) -> RunLayout:
    rng = np.random.default_rng(seed)
    layout = RunLayout(root)
    ids = [f"q{i:03d}" for i in range(questions)]
    queries = pd.DataFrame({"query_id": ids, "text": [f"Question {i}?" for i in range(questions)],
                            "answer": [f"Reference {i}." for i in range(questions)]})
    generations, scores = [], []
    noise = rng.lognormal(-2.5, 1.0, questions)
    for i, query_id in enumerate(ids):
        for system in SYSTEMS:
            generations.append({"query_id": query_id, "system": system, "retriever": "bm25",
                                "reader": f"reader-{system}", "answer": f"Answer of {system} to {i}.",
                                "n_chunks_used": 0, "status": "ok", "error": None})
            judged = np.clip(QUALITY[system] + rng.normal(0.0, noise[i]), 0.0, 1.0)
            scores.append({"query_id": query_id, "system": system, "metric": METRIC, "score": float(judged)})
    layout.queries.parent.mkdir(parents=True, exist_ok=True)
    queries.to_parquet(layout.queries, index=False)
    layout.generations.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(generations).to_parquet(layout.generations, index=False)
    from judges.suite import all_metrics

    suite = next(metric.suite for metric in all_metrics() if metric.name == METRIC)
    layout.judge_dir(suite).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(scores).to_parquet(layout.scores(suite), index=False)
    return layout


def human_mark(system: str, query_id: str) -> int:
    """The simulated person's mark on 1-5: the system's quality plus a question's own deviation."""
    rng = np.random.default_rng([int(query_id[1:]), SYSTEMS.index(system)])
    quality = np.clip(QUALITY[system] + rng.normal(0.0, 0.15), 0.0, 1.0)
    return int(round(1 + 4 * quality))
