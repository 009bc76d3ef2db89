"""`ccrs vera qrels`, the section 5.1 experiment: perfectly relevant vs irrelevant contexts built from a
TREC qrels file (its queries and corpus read by retrievers/trec.py), answered and judged as query sets,
reported as the paper's Tables 1-2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrievers.trec import QrelsError
from pipelines.tools.vera.query_sets import Ask, compare_sets_from_scores, finite_values
from pipelines.tools.vera.scoring import Size, sample_size_fields

QRELS_SYSTEM = "qrels"
PERFECTLY_RELEVANT, IRRELEVANT = "perfectly_relevant", "irrelevant"
QRELS_UNITS = ("pair", "query")


@dataclass(frozen=True)
class QrelsAsks:
    asks: list[Ask]
    relevant_grade: int
    dropped: dict[str, int]  # judgments left out, by reason (counted, never silent)


def qrels_asks(qrels: pd.DataFrame, queries: dict[str, tuple[str, str]], corpus: dict[str, str],
               unit: str = "pair", k: int = 5, limit: int | None = None, relevant_grade: int | None = None,
               seed: int = 0) -> QrelsAsks:
    """The section 5.1 contexts. "Perfectly relevant": judgments at `relevant_grade` (default: the file's
    highest grade; TREC DL's 3); "irrelevant": judgments at grade 0. unit `pair` (the paper's query-passage
    pairs): one ask per judgment, its one passage as the context; unit `query`: one ask per query and
    condition, its first k judged passages of that grade (qrels order). `limit`: at most that many asks
    per condition, drawn with a seeded generator (the paper sampled 500). Judgments whose query or passage
    text is missing are dropped and counted."""
    if unit not in QRELS_UNITS:
        raise ValueError(f"unit must be one of {QRELS_UNITS}, got {unit!r}")
    top = int(qrels["grade"].max()) if relevant_grade is None else relevant_grade
    if top <= 0:
        raise QrelsError(f"no relevant grade: the highest grade is {top}; the experiment needs grade > 0 "
                         "judgments for its perfectly relevant contexts")
    known = qrels["query_id"].isin(list(queries)) & qrels["doc_id"].isin(list(corpus))
    dropped = {"query text missing": int((~qrels["query_id"].isin(list(queries))).sum()),
               "passage text missing": int((qrels["query_id"].isin(list(queries))
                                            & ~qrels["doc_id"].isin(list(corpus))).sum())}
    usable = qrels[known]
    rng = np.random.default_rng(seed)
    asks = []
    for condition, grade in ((PERFECTLY_RELEVANT, top), (IRRELEVANT, 0)):
        rows = usable[usable["grade"] == grade]
        groups = ([((q, d), [d]) for q, d in zip(rows["query_id"], rows["doc_id"])] if unit == "pair" else
                  [((q,), list(g["doc_id"])[:k]) for q, g in rows.groupby("query_id", sort=False)])
        if limit is not None and len(groups) > limit:
            groups = [groups[i] for i in sorted(rng.choice(len(groups), size=limit, replace=False))]
        for key, docs in groups:
            text, truth = queries[key[0]]
            asks.append(Ask(f"{condition}/{'/'.join(key)}", condition, QRELS_SYSTEM, text, truth,
                            tuple(corpus[d] for d in docs), tuple(docs)))
    if not any(a.query_set == PERFECTLY_RELEVANT for a in asks):
        raise QrelsError(f"no usable judgment at grade {top} (dropped: {dropped})")
    return QrelsAsks(asks, top, {k: v for k, v in dropped.items() if v})


def qrels_report(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                 confidence: float = 0.95, **meta) -> dict:
    """Paper Tables 1-2: per metric the mean over the perfectly relevant and over the irrelevant contexts
    (with n), and the bootstrap difference between them (compare_sets_from_scores)."""
    compared = compare_sets_from_scores(scores, b, n, seed, confidence)[QRELS_SYSTEM]
    table = {}
    for metric, entry in compared["metrics"].items():
        rows = scores[scores["metric"] == metric]
        table[metric] = {condition: {"mean": _mean_or_none(rows.loc[rows["query_set"] == condition, "score"]),
                                     "n": entry["n_scored"].get(condition, 0)}
                         for condition in (PERFECTLY_RELEVANT, IRRELEVANT)}
        if entry["computable"]:
            table[metric]["difference"] = entry["pairs"][0]
    return {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence, **meta,
            "n_asks": {c: int(scores.loc[scores["query_set"] == c, "query_id"].nunique())
                       for c in (PERFECTLY_RELEVANT, IRRELEVANT)},
            "metrics": table}


def _mean_or_none(values: pd.Series) -> float | None:
    finite = finite_values(values)
    return float(finite.mean()) if finite.size else None
