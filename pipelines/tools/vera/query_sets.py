"""Query sets answered, judged and compared, shared by `ccrs vera topicality` and `ccrs vera qrels`: each
ask is answered with VERA's summarisation prompt (reader prompt `vera-summary`, temperature 0, top_p 0.01,
section 5.1) through the generate stage function, judged with the "vera" suite through the judge stage
function, and the query sets compared with stats.vera.compare_query_sets.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from judges.config import ClientConfig, JudgeConfig, ReaderConfig
from judges.suite import Sample
from judges.vera import VERA_METRICS
from stats.vera import compare_query_sets
from infra.models import default_tokenizer
from tasks import generate as generate_stage
from pipelines.tools.vera.scoring import Size, score_samples

TOPICALITY_SYSTEM = "topicality"  # the system of a scores file written before the sets had retrievers


@dataclass(frozen=True)
class Ask:
    """One query to answer from given passages, in a named query set (a system: the retriever)."""

    query_id: str
    query_set: str
    system: str
    question: str
    ground_truth: str
    passages: tuple[str, ...]
    passage_ids: tuple[str, ...]


def vera_reader(model: str, max_tokens: int = 512, context_window: int = 2048) -> ReaderConfig:
    """The reader of VERA's experiments: its summarisation prompt (judges/readers.py `vera-summary`, top_p
    0.01) at temperature 0 (section 5.1)."""
    return ReaderConfig(name="vera-summary", model=model, prompt="vera-summary", temperature=0.0,
                        max_tokens=max_tokens, context_window=context_window)


def answer_asks(asks: list[Ask], reader: ReaderConfig, client_cfg: ClientConfig, base_url: str,
                progress: bool = False) -> tuple[list[Sample], list[dict]]:
    """Each ask answered by the reader (tasks.generate, its passages fitted to the reader's window): judge
    samples, and the failed generations as {query_id, system, error}."""
    budget = reader.context_window - reader.max_tokens
    tokenizer = reader.tokenizer or default_tokenizer(reader.model)
    items = [generate_stage.GenerationItem(a.query_id, a.system, a.system, reader, a.question,
                                           list(a.passages), list(a.passage_ids), budget, tokenizer)
             for a in asks]
    rows, _ = generate_stage.generate_all(items, client_cfg, base_url, progress)
    by_key = {(row["system"], row["query_id"]): row for row in rows}
    samples, failed = [], []
    for ask, item in zip(asks, items):
        row = by_key[(ask.system, ask.query_id)]
        if row["status"] != "ok":
            failed.append({"query_id": ask.query_id, "system": ask.system, "error": row["error"]})
            continue
        samples.append(Sample(ask.query_id, ask.system, ask.question, str(row["answer"] or ""),
                              ask.ground_truth, item.chunks[: row["n_chunks_used"]]))
    return samples, failed


def judged_set_scores(asks: list[Ask], samples: list[Sample], failed: list[dict], judge: JudgeConfig,
                      client_cfg: ClientConfig, base_url: str, progress: bool = False) -> pd.DataFrame:
    """The VERA metrics of the answered asks (the judge stage function), long format: query_id, query_set,
    set_order (the sets' order of first appearance in `asks`), system, metric, score (None where not
    computable), status, reason."""
    frame, _ = score_samples(samples, failed, judge, client_cfg, base_url, None, progress)
    sets = {a.query_id: a.query_set for a in asks}
    order = {name: i for i, name in enumerate(dict.fromkeys(a.query_set for a in asks))}
    frame = frame[["query_id", "system", "metric", "score", "status", "reason"]].copy()
    frame.insert(1, "query_set", frame["query_id"].map(sets))
    frame.insert(2, "set_order", frame["query_set"].map(order).astype(int))
    return frame.reset_index(drop=True)


def set_order(scores: pd.DataFrame) -> list[str]:
    """The query sets in their declared order (`set_order`), else in order of first appearance."""
    if "set_order" in scores:
        pairs = scores[["query_set", "set_order"]].drop_duplicates().sort_values("set_order", kind="stable")
        return pairs["query_set"].tolist()
    return list(dict.fromkeys(scores["query_set"]))


def compare_sets_from_scores(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                             confidence: float = 0.95) -> dict:
    """Per system and metric: every query set's bootstrap mean and interval, every pair's difference
    (earlier set minus later, interval, separated or not), the sets ranked by mean, and whether the means
    follow the declared order (`expected_order_holds`) with every neighbouring pair separated
    (`expected_order_separated`). A set without a finite score of a metric (e.g. retrieval recall of
    queries without ground truth) is listed under `sets_without_scores`; fewer than two sets with scores:
    not computable, with the reason. One seeded stream per (system, metric)."""
    order, metric_rank = set_order(scores), {m: i for i, m in enumerate(VERA_METRICS)}
    if "system" not in scores:
        scores = scores.assign(system=TOPICALITY_SYSTEM)
    out: dict = {}
    for s_index, (system, rows) in enumerate(sorted(scores.groupby("system"), key=lambda kv: kv[0])):
        metrics = sorted(set(rows["metric"]), key=lambda m: (metric_rank.get(m, len(metric_rank)), m))
        per_metric = {metric: _compare_metric(rows[rows["metric"] == metric], order, b, n, confidence,
                                              np.random.SeedSequence([seed, s_index, m_index]))
                      for m_index, metric in enumerate(metrics)}
        out[system] = {**_order_summary(per_metric), "metrics": per_metric}
    return out


def _compare_metric(rows: pd.DataFrame, order: list[str], b: int, n: Size, confidence: float,
                    seed: np.random.SeedSequence) -> dict:
    values = {name: finite_values(rows.loc[rows["query_set"] == name, "score"]) for name in order}
    scored = {name: v for name, v in values.items() if v.size}
    entry: dict = {"n_scored": {name: int(v.size) for name, v in values.items()},
                   "sets_without_scores": [name for name in order if name not in scored]}
    if len(scored) < 2:
        scored_names = sorted(scored) or "none"
        return {**entry, "computable": False,
                "reason": f"fewer than two query sets have a finite score (scored: {scored_names})"}
    result = compare_query_sets(scored, b, np.random.default_rng(seed), n, confidence)
    return {**entry, "computable": True, "sets": {k: _jsonable(asdict(v)) for k, v in result.sets.items()},
            "pairs": [_jsonable(asdict(p)) for p in result.pairs], "ranking": list(result.ranking),
            "expected_order": list(scored), "expected_order_holds": result.expected_order_holds,
            "expected_order_separated": result.expected_order_separated}


def _order_summary(per_metric: dict) -> dict:
    computable = {m: e for m, e in per_metric.items() if e["computable"]}
    return {"order_holds": [m for m, e in computable.items() if e["expected_order_holds"]],
            "order_separated": [m for m, e in computable.items() if e["expected_order_separated"]],
            "order_broken": [m for m, e in computable.items() if not e["expected_order_holds"]],
            "not_computable": [m for m, e in per_metric.items() if not e["computable"]]}


def finite_values(values: pd.Series) -> np.ndarray:
    array = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return array[np.isfinite(array)]


def _jsonable(tree):
    if isinstance(tree, dict):
        return {k: _jsonable(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_jsonable(v) for v in tree]
    if isinstance(tree, float) and not math.isfinite(tree):
        return None
    return tree
