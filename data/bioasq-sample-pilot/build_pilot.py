"""Writes extractive_scores.parquet: a pilot with real variance from the BioASQ 12b sample, without an LLM.

Six systems answer each of the 32 questions of data/bioasq-sample with the project's extractive reader
(judges/readers.py): the 1, 2 or 3 best question-overlapping sentences (A/B, C/D, E/F) of all gold
snippets (A, C, E) or of the first two only (B, D, F). Two metrics compare an answer's tokens with the
ideal answer's (judges/em.py normalization): token recall and token F1, in [0, 1]. Run:
    .venv/bin/python data/bioasq-sample-pilot/build_pilot.py
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from judges.em import normalize_answer
from judges.readers import extractive_answer
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset

HERE = Path(__file__).parent
DATASET = HERE.parent / "bioasq-sample"
SYSTEMS = {"A": (1, None), "B": (1, 2), "C": (2, None), "D": (2, 2), "E": (3, None), "F": (3, 2)}


def overlap_scores(answer: str, ideal: str) -> dict[str, float]:
    got, want = Counter(normalize_answer(answer).split()), Counter(normalize_answer(ideal).split())
    common = sum((got & want).values())
    recall = common / max(sum(want.values()), 1)
    precision = common / max(sum(got.values()), 1)
    f1 = 0.0 if common == 0 else 2 * precision * recall / (precision + recall)
    return {"token_recall": recall, "token_f1": f1}


def main() -> None:
    loaded = load_dataset(DatasetConfig(path=str(DATASET)))
    texts = dict(zip(loaded.passages.column("doc_id").to_pylist(), loaded.passages.column("text").to_pylist()))
    rows = []
    for query in loaded.queries.to_pylist():
        if not query["answer"]:
            continue
        snippets = [texts[d] for d in query["relevant_doc_ids"] if d in texts]
        for system, (sentences, first) in SYSTEMS.items():
            answer = extractive_answer(query["text"], snippets[:first], sentences)
            for metric, score in overlap_scores(answer, query["answer"]).items():
                rows.append({"query_id": query["query_id"], "system": system, "metric": metric,
                             "score": round(score, 6)})
    pd.DataFrame(rows).to_parquet(HERE / "extractive_scores.parquet", index=False)
    print(f"{len(rows)} scores of {len(rows) // 12} questions -> {HERE / 'extractive_scores.parquet'}")


if __name__ == "__main__":
    main()
