"""`ccrs vera qrels`, the section 5.1 experiment: perfectly relevant vs irrelevant contexts built from a
TREC qrels file (its queries and corpus read by retrievers/trec.py), answered and judged as query sets,
reported as the paper's Tables 1-2.

Two ways to build the contexts: straight from the qrels (`qrels_asks`, one system), or retrieved
(`retrieved_asks`, the paper's rows: LLM x retriever): per condition the pool of the passages judged at its
grade, each of the condition's queries' top k ranked by each retriever, every reader answering every
retriever's contexts (`answer_grid`), one row per (reader, retriever).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from judges.config import ClientConfig, ReaderConfig
from retrievers.trec import QrelsError
from pipelines.tools.vera.query_sets import Ask, answer_asks, compare_sets_from_scores, finite_values
from pipelines.tools.vera.scoring import Size, sample_size_fields

QRELS_SYSTEM = "qrels"
PERFECTLY_RELEVANT, IRRELEVANT = "perfectly_relevant", "irrelevant"
CONDITIONS = (PERFECTLY_RELEVANT, IRRELEVANT)
QRELS_UNITS = ("pair", "query")
GRID_COLUMNS = ("reader", "retriever")  # the scores' columns of a retrieved (grid) experiment
# (pool {passage id: text}, query texts, retriever names, k) -> {retriever: per query its top-k passage ids}
Ranker = Callable[[dict[str, str], list[str], list[str], int], dict[str, list[list[str]]]]


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
    top, usable, dropped = _usable_judgments(qrels, queries, corpus, relevant_grade)
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
    return QrelsAsks(asks, top, dropped)


def _usable_judgments(qrels: pd.DataFrame, queries: dict, corpus: dict, relevant_grade: int | None
                      ) -> tuple[int, pd.DataFrame, dict[str, int]]:
    """(the relevant grade, the judgments whose query and passage texts are known, the others counted)."""
    top = int(qrels["grade"].max()) if relevant_grade is None else relevant_grade
    if top <= 0:
        raise QrelsError(f"no relevant grade: the highest grade is {top}; the experiment needs grade > 0 "
                         "judgments for its perfectly relevant contexts")
    has_query = qrels["query_id"].isin(list(queries))
    has_passage = qrels["doc_id"].isin(list(corpus))
    dropped = {"query text missing": int((~has_query).sum()),
               "passage text missing": int((has_query & ~has_passage).sum())}
    return top, qrels[has_query & has_passage], {k: v for k, v in dropped.items() if v}


@dataclass(frozen=True)
class RetrievedAsks:
    asks: list[Ask]  # system: the retriever
    relevant_grade: int
    dropped: dict[str, int]
    # retriever -> condition -> what its top-k held, by the qrels grade of each passage for ITS query
    retrieved: dict[str, dict[str, dict[str, int]]]


def retrieved_asks(qrels: pd.DataFrame, queries: dict[str, tuple[str, str]], corpus: dict[str, str],
                   retrievers: Sequence[str], rank: Ranker, k: int = 5, limit: int | None = None,
                   relevant_grade: int | None = None, seed: int = 0) -> RetrievedAsks:
    """The section 5.1 contexts as the paper retrieves them ("we feed the top 5 retrieved passages for a
    given query"). A condition's pool: every passage judged at its grade, for any query (perfectly relevant:
    `relevant_grade`, default the file's highest; irrelevant: 0), the paper's PR or IR data set; its
    queries: those with a judgment at that grade (`limit`: at most that many, drawn with a seeded
    generator, the same for every retriever). Each retriever ranks the pool for each query and its top k
    are the context (system = the retriever). A retrieved passage is perfectly relevant for its query only
    where the qrels judge that pair at the relevant grade: `retrieved` counts the top k by that grade (a
    pool passage judged for another query only is `unjudged`). A query whose top k is empty (BM25: no term
    shared) has no ask, counted in `dropped`."""
    top, usable, dropped = _usable_judgments(qrels, queries, corpus, relevant_grade)
    grades = {(q, d): int(g) for q, d, g in zip(usable["query_id"], usable["doc_id"], usable["grade"])}
    rng = np.random.default_rng(seed)
    asks: list[Ask] = []
    retrieved: dict[str, dict[str, dict[str, int]]] = {name: {} for name in retrievers}
    for condition, grade in ((PERFECTLY_RELEVANT, top), (IRRELEVANT, 0)):
        rows = usable[usable["grade"] == grade]
        if rows.empty:
            continue
        pool = {doc: corpus[doc] for doc in dict.fromkeys(rows["doc_id"])}
        qids = list(dict.fromkeys(rows["query_id"]))
        if limit is not None and len(qids) > limit:
            qids = [qids[i] for i in sorted(rng.choice(len(qids), size=limit, replace=False))]
        ranked = rank(pool, [queries[q][0] for q in qids], list(retrievers), k)
        for name in retrievers:
            counts: Counter = Counter(queries=len(qids))
            for qid, docs in zip(qids, ranked[name]):
                docs = docs[:k]
                counts.update(_grade_label(grades.get((qid, doc)), top) for doc in docs)
                if not docs:
                    counts["queries_without_passage"] += 1
                    continue
                text, truth = queries[qid]
                asks.append(Ask(f"{condition}/{qid}", condition, name, text, truth,
                                tuple(corpus[d] for d in docs), tuple(docs)))
            retrieved[name][condition] = dict(counts)
            if counts["queries_without_passage"]:
                dropped[f"{name}, {condition}: no passage retrieved"] = counts["queries_without_passage"]
    if not any(a.query_set == PERFECTLY_RELEVANT for a in asks):
        raise QrelsError(f"no usable judgment at grade {top} (dropped: {dropped})")
    return RetrievedAsks(asks, top, dropped, retrieved)


def _grade_label(grade: int | None, relevant: int) -> str:
    if grade is None:
        return "unjudged"
    return "at_relevant_grade" if grade == relevant else "at_grade_0" if grade == 0 else "at_other_grade"


def grid_system(reader: str, retriever: str) -> str:
    """A grid row's system name, as the paper names its rows ("Llama3 + bge-large-en-v1.5")."""
    return f"{reader} + {retriever}"


def answer_grid(asks: list[Ask], readers: Sequence[tuple[str, ReaderConfig]], client_cfg: ClientConfig,
                base_url: str, progress: bool = False) -> tuple[list[Ask], list, list[dict], dict]:
    """Every retriever's asks answered by every reader (label, config): (the asks with their grid system,
    the samples, the failed generations, {system: (reader label, retriever)})."""
    answered: list[Ask] = []
    samples: list = []
    failed: list[dict] = []
    cells: dict[str, tuple[str, str]] = {}
    labels = [label for label, _ in readers]
    if len(set(labels)) != len(labels):
        raise ValueError(f"readers must have distinct names, got {labels}")
    for label, reader in readers:
        mine = [replace(a, system=grid_system(label, a.system)) for a in asks]
        cells.update({grid_system(label, a.system): (label, a.system) for a in asks})
        got, lost = answer_asks(mine, reader, client_cfg, base_url, progress)
        answered, samples, failed = answered + mine, samples + got, failed + lost
    return answered, samples, failed, cells


def with_grid_columns(scores: pd.DataFrame, cells: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The judged scores with the reader and retriever of each row's system, in the cells' order (the
    readers', then the retrievers')."""
    order = {system: i for i, system in enumerate(cells)}
    frame = scores.iloc[scores["system"].map(order).argsort(kind="stable")].reset_index(drop=True)
    for position, column in enumerate(GRID_COLUMNS):
        frame[column] = frame["system"].map({system: cell[position] for system, cell in cells.items()})
    return frame


def qrels_report(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                 confidence: float = 0.95, **meta) -> dict:
    """Paper Tables 1-2: per metric the mean over the perfectly relevant and over the irrelevant contexts
    (with n), and the bootstrap difference between them (compare_sets_from_scores). Scores with reader and
    retriever columns (a retrieved experiment) give one such table per (reader, retriever): `grid`."""
    compared = compare_sets_from_scores(scores, b, n, seed, confidence)
    common = {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence, **meta}
    if not set(GRID_COLUMNS) <= set(scores.columns):
        return {**common, "n_asks": _n_asks(scores),
                "metrics": _condition_table(scores, compared[QRELS_SYSTEM])}
    cells = scores[["system", *GRID_COLUMNS]].drop_duplicates("system")
    return {**common, "grid": [{"reader": reader, "retriever": retriever, "system": system,
                                "n_asks": _n_asks(scores[scores["system"] == system]),
                                "metrics": _condition_table(scores[scores["system"] == system],
                                                            compared[system])}
                               for system, reader, retriever in cells.itertuples(index=False)]}


def _n_asks(scores: pd.DataFrame) -> dict[str, int]:
    return {c: int(scores.loc[scores["query_set"] == c, "query_id"].nunique()) for c in CONDITIONS}


def _condition_table(scores: pd.DataFrame, compared: dict) -> dict:
    table = {}
    for metric, entry in compared["metrics"].items():
        rows = scores[scores["metric"] == metric]
        table[metric] = {condition: {"mean": _mean_or_none(rows.loc[rows["query_set"] == condition, "score"]),
                                     "n": entry["n_scored"].get(condition, 0)}
                         for condition in CONDITIONS}
        if entry["computable"]:
            table[metric]["difference"] = entry["pairs"][0]
    return table


def _mean_or_none(values: pd.Series) -> float | None:
    finite = finite_values(values)
    return float(finite.mean()) if finite.size else None
