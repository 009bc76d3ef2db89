"""VERA stage glue: LLM metrics over a run's generations, the cross-encoder aggregate, bootstrap statistics
with a convergence report, and repository topicality (positive vs negative queries).

Outputs (RUN_DIR/vera): scores.parquet (long format query_id, system, metric, score: vera_faithfulness,
vera_retrieval_recall, vera_retrieval_precision, vera_answer_relevance, vera_aggregate (sigmoid),
vera_aggregate_logit is in judgments only), judgments.parquet (every metric with status/reason/usage),
bootstrap.json. Topicality writes topicality.json where asked.
"""
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from judges.config import ClientConfig
from judges.vera import (
    UNTRAINED_MINILM,
    CrossEncoderAggregator,
    VeraInput,
    VeraJudgeConfig,
    enrich_answer,
    evaluate_sample,
    minilm_embedder,
)
from stats.vera import bootstrap_metric, convergence, topicality

REPO = Path(__file__).resolve().parents[2]
DEFAULT_NEGATIVE = REPO / "configs" / "vera" / "offtopic-queries.yaml"
AGGREGATE = "vera_aggregate"


def load_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame, top_k: int,
                 limit: int | None = None) -> list[VeraInput]:
    text = dict(zip(queries["query_id"].astype(str), queries["text"]))
    retrieved = retrieved.sort_values(["query_id", "retriever", "rank"])
    contexts = {(str(q), r): list(g["text"])[:top_k] for (q, r), g in retrieved.groupby(["query_id", "retriever"])}
    samples = []
    for row in generations.itertuples():
        qid = str(row.query_id)
        if limit is not None and qid not in list(text)[:limit]:
            continue
        samples.append(VeraInput(qid, row.system, text.get(qid, ""), str(row.answer or ""),
                                 contexts.get((qid, row.retriever), [])))
    return samples


def score_samples(samples: list[VeraInput], cfg: VeraJudgeConfig, client_cfg: ClientConfig, base_url: str,
                  cross_encoder: str | None = UNTRAINED_MINILM) -> pd.DataFrame:
    """Every VERA metric of every sample (judgments frame), plus the aggregate when cross_encoder is set."""
    from judges.client import LLMClient

    embed = minilm_embedder()
    with LLMClient(client_cfg, base_url) as client:
        results = client.map(lambda s: evaluate_sample(client, cfg, s, embed), samples)
    rows = [{**{k: v for k, v in asdict(r).items() if k != "detail"}, "detail": json.dumps(r.detail, default=str)}
            for per_sample in results for r in per_sample]
    frame = pd.DataFrame(rows)
    if cross_encoder:
        frame = pd.concat([frame, aggregate_frame(samples, frame, cross_encoder)], ignore_index=True)
    return frame


def aggregate_frame(samples: list[VeraInput], judgments: pd.DataFrame, model: str) -> pd.DataFrame:
    """Cross-encoder aggregate per sample from its available metric values (logit in detail)."""
    aggregator = CrossEncoderAggregator(model)
    values = {(r.query_id, r.system, r.metric): r.score for r in judgments.itertuples()}
    enriched = [enrich_answer(s.answer, {m: values.get((s.query_id, s.system, m)) for m in
                                         ("vera_faithfulness", "vera_answer_relevance", "vera_retrieval_precision",
                                          "vera_retrieval_recall")}) for s in samples]
    scores = aggregator.score([s.question for s in samples], enriched)
    note = "UNTRAINED head: proves the mechanics only" if aggregator.untrained else None
    return pd.DataFrame([{
        "query_id": s.query_id, "system": s.system, "metric": AGGREGATE, "score": a.sigmoid, "status": "ok",
        "reason": note, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
        "detail": json.dumps({"logit": a.logit, "sigmoid": a.sigmoid, "model": model}),
    } for s, a in zip(samples, scores)])


def scores_long(judgments: pd.DataFrame) -> pd.DataFrame:
    ok = judgments[judgments["score"].notna()]
    return ok[["query_id", "system", "metric", "score"]].reset_index(drop=True)


def bootstrap_report(scores: pd.DataFrame, b: int, seed: int, n: int | None = None,
                     b_grid: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000), tol: float = 0.01,
                     confidence: float = 0.95) -> dict:
    """Per (system, metric): bootstrap mean/SE/interval with sample size n and B resamples, and the
    convergence of the SE as B grows. One seeded stream per (system, metric) via SeedSequence."""
    out: dict = {"b": b, "n": n, "seed": seed, "confidence": confidence, "b_grid": list(b_grid), "tol": tol,
                 "systems": {}}
    groups = sorted(scores.groupby(["system", "metric"]), key=lambda kv: kv[0])
    for i, ((system, metric), frame) in enumerate(groups):
        values = frame["score"].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        entry: dict = {"n_observed": int(values.size)}
        if values.size == 0:
            entry.update(computable=False, reason="no finite score")
        else:
            seq = np.random.SeedSequence([seed, i])
            rng_b, rng_c = (np.random.default_rng(s) for s in seq.spawn(2))
            stats = bootstrap_metric(values, b, rng_b, n, confidence)
            grid = sorted({g for g in b_grid if 2 <= g <= b} | {max(b, 2)})  # the grid ends at B
            conv = convergence(values, grid, rng_c, n, tol, confidence)
            entry.update(computable=True, **asdict(stats), convergence=asdict(conv))
            if values.size < 30:
                entry["note"] = f"only {values.size} observations; VERA recommends n >= 30 (ideally 50+)"
        out["systems"].setdefault(system, {})[metric] = entry
    return out


def run_vera(run_dir: str | Path, cfg: VeraJudgeConfig, client_cfg: ClientConfig, base_url: str, top_k: int = 5,
             cross_encoder: str | None = UNTRAINED_MINILM, b: int = 1000, n: int | None = None, seed: int = 0,
             limit: int | None = None) -> dict:
    run_dir = Path(run_dir)
    queries = pd.read_parquet(run_dir / "retrieve" / "queries.parquet")
    retrieved = pd.read_parquet(run_dir / "retrieve" / "retrieved.parquet")
    generations = pd.read_parquet(run_dir / "generate" / "generations.parquet")
    samples = load_samples(queries, retrieved, generations, top_k, limit)
    judgments = score_samples(samples, cfg, client_cfg, base_url, cross_encoder)
    out = run_dir / "vera"
    out.mkdir(parents=True, exist_ok=True)
    judgments.to_parquet(out / "judgments.parquet", index=False)
    scores = scores_long(judgments)
    scores.to_parquet(out / "scores.parquet", index=False)
    report = bootstrap_report(scores, b, seed, n)
    (out / "bootstrap.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    summary = {"n_samples": len(samples), "n_scores": len(scores),
               "n_failed": int((judgments["status"] == "failed").sum()),
               "calls": int(judgments["calls"].sum()), "prompt_tokens": int(judgments["prompt_tokens"].sum()),
               "completion_tokens": int(judgments["completion_tokens"].sum()), "out_dir": str(out)}
    return summary


# --- topicality --------------------------------------------------------------------------------------

def load_negative_queries(path: str | Path = DEFAULT_NEGATIVE) -> list[str]:
    data = yaml.safe_load(Path(path).read_text())
    queries = data["queries"] if isinstance(data, dict) else data
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise ValueError(f"{path}: expected a non-empty list of query strings under 'queries'")
    return list(queries)


def repository_relevance(corpus_path: str | Path, queries: list[str], k: int = 5,
                         work_dir: str | Path | None = None) -> np.ndarray:
    """Per query: mean cosine of its top-k kNN chunks in the repository (the BioASQ sample corpus indexed
    with the embedded index and MiniLM embeddings). Uses the retrieval library (retrievers/)."""
    import pyarrow as pa

    from retrievers.config import EmbedderConfig, IndexConfig
    from retrievers.embedders import load_embedder
    from retrievers.indexes import build_embedded, open_embedded
    from retrievers.loaders import load_bioasq_json

    dataset = load_bioasq_json(Path(corpus_path))
    passages = dataset.passages
    chunks = pa.table({"chunk_id": passages.column("doc_id"), "doc_id": passages.column("doc_id"),
                       "text": passages.column("text")})
    embedder = load_embedder(EmbedderConfig())
    vectors = embedder.embed_passages(chunks.column("text").to_pylist())
    index_cfg = IndexConfig()
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        build_embedded(index_cfg, chunks, vectors, Path(tmp) / "index")
        index = open_embedded(index_cfg, Path(tmp) / "index")
        hits = index.search_knn(embedder.embed_queries(queries), k)
    return np.array([np.mean([h.score for h in row]) if row else 0.0 for row in hits])


def topicality_report(corpus_path: str | Path, positive: list[str], negative: list[str], b: int = 500,
                      n: int | None = None, seed: int = 0, k: int = 5, confidence: float = 0.95) -> dict:
    """VERA section 3.4 on one repository: per-query repository relevance of on-topic (positive) and
    off-topic (negative) queries, bootstrap distributions compared, verdict with intervals."""
    scores = repository_relevance(corpus_path, positive + negative, k)
    pos, neg = scores[: len(positive)], scores[len(positive):]
    result = topicality(pos, neg, b, np.random.default_rng(seed), n, confidence)
    return {"metric": f"mean kNN cosine of the top-{k} chunks (all-MiniLM-L6-v2)", "k": k, "b": b, "n": n,
            "seed": seed, "n_positive": len(positive), "n_negative": len(negative), **_jsonable(asdict(result))}


def _jsonable(tree):
    if isinstance(tree, dict):
        return {k: _jsonable(v) for k, v in tree.items()}
    if isinstance(tree, float) and not math.isfinite(tree):
        return None
    return tree
