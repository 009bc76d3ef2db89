"""The test set of `ccrs probe` (docs/probes.md): real BioASQ questions, their ideal answer as the response
and the ground truth, their gold snippets (the passages the question lists as relevant, file order) as the
context."""
from __future__ import annotations

import json
from pathlib import Path

from judges.bias_probes import ProbeSample
from judges.em import flatten_answers
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset


def load_probe_samples(dataset_path: str | Path, limit: int | None = None,
                       max_chunks: int = 5) -> list[ProbeSample]:
    """The first `limit` questions that have an ideal answer, each with at most `max_chunks` snippets."""
    loaded = load_dataset(DatasetConfig(path=str(dataset_path)))
    passages = dict(zip(loaded.passages.column("doc_id").to_pylist(),
                        loaded.passages.column("text").to_pylist()))
    samples = []
    for row in loaded.queries.to_pylist():
        if limit is not None and len(samples) >= limit:
            break
        if not (row["answer"] or "").strip():
            continue
        chunks = tuple(passages[d] for d in row["relevant_doc_ids"] if d in passages)[:max_chunks]
        exact = flatten_answers(json.loads(row["exact_answer"])) if row["exact_answer"] else []
        samples.append(ProbeSample(row["query_id"], row["text"], row["answer"], row["answer"], chunks,
                                   tuple(exact)))
    return samples
