"""`ccrs vera` tools: the VERA suite over a run's generations plus the cross-encoder aggregate, bootstrap
statistics with a convergence report, and repository topicality (positive vs negative queries).

Scoring goes through the generic judge stage function (tasks/judge.py `judge_suite` with the registered
"vera" suite: cache, Ray fan-out, context fitted to the judge's window); `ccrs run` with
`judges: [..., vera]` computes the same four metrics as a stage of the run (RUN_DIR/judge_vera/).
Outputs (RunLayout(RUN_DIR).vera_dir): judgments.parquet (every metric of every (query, system) with
status/reason/usage, the tasks.judge judgments frame; vera_aggregate rows carry the logit in `detail`),
scores.parquet (long format query_id, system, metric, score of the scored rows: vera_faithfulness,
vera_retrieval_recall, vera_retrieval_precision, vera_answer_relevance, and vera_aggregate (sigmoid) when a
trained cross-encoder is named) and bootstrap.json. Topicality writes topicality.json where asked.

The aggregate is OFF by default: no trained cross-encoder ships as a package here (the paper's
ms-marco-MiniLM-L-12-v2 lives on the model hub, which is not reachable), and an untrained head is noise.
`cross_encoder=PATH` (a local trained checkpoint) turns it on; UNTRAINED_DEMO_HEAD (demo / tests) writes
DEMO_AGGREGATE instead, a metric no goal tree reads.
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from judges.config import ClientConfig, JudgeConfig, ReaderConfig
from judges.suite import Judgment, Metric, Sample, get_suite
from judges.vera import SUITE, UNTRAINED_DEMO_HEAD, VERA_METRICS, CrossEncoderAggregator, enrich_answer
from stats.vera import bootstrap_metric, convergence, topicality
from infra.models import default_tokenizer
from pipelines.config import RESOURCE_ROOT
from tasks import generate as generate_stage
from tasks import judge as judge_stage
from tasks.layout import RunLayout

DEFAULT_NEGATIVE = RESOURCE_ROOT / "configs" / "vera" / "offtopic-queries.yaml"
QUERY_SETS = ("positive", "negative")  # on-topic queries and their contrastive (off-topic) controls
TOPICALITY_SYSTEM = "topicality"
AGGREGATE = "vera_aggregate"
DEMO_AGGREGATE = "vera_aggregate_untrained"  # the untrained demo head's scores: noise, read by no goal tree
AGGREGATE_OFF = ("VERA aggregate off: no trained cross-encoder named (pass --cross-encoder PATH to a local "
                 "trained cross-encoder checkpoint, e.g. ms-marco-MiniLM-L-12-v2 as in the paper)")


CrossEncoder = str | CrossEncoderAggregator | None  # a model name / path, a loaded aggregator, or off


def aggregate_metric(cross_encoder: CrossEncoder) -> str | None:
    """The column the aggregate is written under: none when off, DEMO_AGGREGATE for the untrained head."""
    if not cross_encoder:
        return None
    name = cross_encoder.model_name if isinstance(cross_encoder, CrossEncoderAggregator) else cross_encoder
    return DEMO_AGGREGATE if name == UNTRAINED_DEMO_HEAD else AGGREGATE


def load_aggregator(cross_encoder: CrossEncoder) -> CrossEncoderAggregator | None:
    if isinstance(cross_encoder, CrossEncoderAggregator) or not cross_encoder:
        return cross_encoder or None
    return CrossEncoderAggregator(cross_encoder)


def first_queries(queries: pd.DataFrame, generations: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """The generations of the first `limit` queries (in queries order); all of them without a limit."""
    if limit is None:
        return generations
    keep = set(queries["query_id"].astype(str).tolist()[:limit])
    return generations[generations["query_id"].astype(str).isin(keep)]


def load_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame, top_k: int,
                 limit: int | None = None) -> tuple[list[Sample], list[dict]]:
    """The judge stage's samples (tasks.judge.load_samples: the context the reader saw, ranked) and failed
    generations, for the first `limit` queries when given."""
    return judge_stage.load_samples(queries, retrieved, first_queries(queries, generations, limit), top_k)


def score_samples(samples: list[Sample], failed: list[dict], judge: JudgeConfig, client_cfg: ClientConfig,
                  base_url: str, cross_encoder: CrossEncoder = None,
                  progress: bool = False) -> tuple[pd.DataFrame, dict]:
    """Every selected VERA metric of every sample through the judge stage function (failed generations as
    failed rows), plus the aggregate when a cross-encoder is named: (judgments frame, stage stats)."""
    suite = get_suite(SUITE)
    judgments, stats = judge_stage.judge_suite(suite, samples, judge, client_cfg, base_url, progress)
    judgments += judge_stage.failed_generation_judgments(suite, failed, judge)
    metrics = suite.selected_metrics(judge)
    if cross_encoder:
        judgments += aggregate_judgments(samples, failed, judgments, cross_encoder, judge)
        metrics = (*metrics, aggregate_metric(cross_encoder))
    frame = judge_stage.judgments_frame(judgments, judge_stage.suspicious_texts(samples), metrics)
    return frame, stats


def aggregate_judgments(samples: list[Sample], failed: list[dict], judgments: list[Judgment],
                        cross_encoder: CrossEncoder, judge: JudgeConfig) -> list[Judgment]:
    """Cross-encoder aggregate per sample from its available metric values (logit in detail); a failed
    generation gets a failed aggregate row. The untrained demo head's rows are DEMO_AGGREGATE."""
    aggregator = load_aggregator(cross_encoder)
    metric, model = aggregate_metric(aggregator), aggregator.model_name
    values = {(j.query_id, j.system, j.metric): j.score for j in judgments}
    enriched = [enrich_answer(s.response, {m: values.get((s.query_id, s.system, m)) for m in VERA_METRICS},
                              judge.vera.prompt_version) for s in samples]
    scores = aggregator.score([s.question for s in samples], enriched)
    note = "UNTRAINED head: proves the mechanics only" if aggregator.untrained else None
    spec = Metric(SUITE, metric, (0, 1), ("question", "response"), (), "cross-encoder aggregate",
                  judged=False)
    version = judge.vera.prompt_version
    out = [Judgment.of(s, spec, status="ok", prompt_version=version, judge_model=model, score=a.sigmoid,
                       reason=note,
                       detail=json.dumps({"logit": a.logit, "sigmoid": a.sigmoid, "model": model}))
           for s, a in zip(samples, scores)]
    out += [Judgment.of(Sample(f["query_id"], f["system"], "", "", "", []), spec, status="failed",
                        prompt_version=version, judge_model=model,
                        reason=f"generation failed: {f['error']}"[:2000])
            for f in failed]
    return out


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


def run_vera(run_dir: str | Path, judge: JudgeConfig, client_cfg: ClientConfig, base_url: str, top_k: int = 5,
             cross_encoder: CrossEncoder = None, b: int = 1000, n: int | None = None, seed: int = 0,
             limit: int | None = None, progress: bool = False) -> dict:
    """Score a run's generations with the VERA suite (+ aggregate), write the outputs under the run's
    vera_dir, bootstrap every (system, metric); returns a summary (calls: judge asks made now). The
    cross-encoder is loaded before any judge call, so a bad name fails fast."""
    started = time.perf_counter()
    cross_encoder = load_aggregator(cross_encoder)  # a bad name fails before the judge calls
    layout = RunLayout(Path(run_dir))
    queries = pd.read_parquet(layout.queries)
    generations = first_queries(queries, pd.read_parquet(layout.generations), limit)
    samples, failed = load_samples(queries, pd.read_parquet(layout.retrieved), generations, top_k)
    frame, stats = score_samples(samples, failed, judge, client_cfg, base_url, cross_encoder, progress)
    metrics = get_suite(SUITE).selected_metrics(judge) + ((aggregate_metric(cross_encoder),) if cross_encoder
                                                           else ())
    judge_stage.check_complete(frame, generations, metrics)
    out = layout.vera_dir
    out.mkdir(parents=True, exist_ok=True)
    judge_stage.write_judgments(frame, out)
    scores = scores_long(frame)
    report = bootstrap_report(scores, b, seed, n)
    (out / "bootstrap.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    summary = judge_stage.judging_summary(frame, stats, time.perf_counter() - started, SUITE,
                                          judge.vera.prompt_version, judge.model)
    return {"n_samples": len(samples) + len(failed), "n_scores": len(scores),
            "n_failed": int((frame["status"] == "failed").sum()), "calls": summary["judge_calls"],
            "prompt_tokens": summary["prompt_tokens"], "completion_tokens": summary["completion_tokens"],
            "cache_hits": summary["cache_hits"],
            "context_truncated_judgments": summary["context_truncated_judgments"],
            "aggregate": aggregate_metric(cross_encoder) or AGGREGATE_OFF, "out_dir": str(out)}


# --- topicality --------------------------------------------------------------------------------------

def load_negative_queries(path: str | Path = DEFAULT_NEGATIVE) -> list[str]:
    data = yaml.safe_load(Path(path).read_text())
    queries = data["queries"] if isinstance(data, dict) else data
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise ValueError(f"{path}: expected a non-empty list of query strings under 'queries'")
    return list(queries)


def repository_hits(corpus_path: str | Path, queries: list[str], k: int = 5,
                    work_dir: str | Path | None = None) -> list[list]:
    """Per query its top-k kNN chunks (retrievers' Hit: text, score) in the repository: the BioASQ corpus
    indexed with the embedded index and MiniLM embeddings, through the retrieval library (retrievers/)."""
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
        return index.search_knn(embedder.embed_queries(queries), k)


def repository_relevance(corpus_path: str | Path, queries: list[str], k: int = 5,
                         work_dir: str | Path | None = None) -> np.ndarray:
    """Per query: mean cosine of its top-k kNN chunks in the repository (the cosine method)."""
    hits = repository_hits(corpus_path, queries, k, work_dir)
    return np.array([np.mean([h.score for h in row]) if row else 0.0 for row in hits])


def topicality_samples(corpus_path: str | Path, positive: list[str], negative: list[str],
                       positive_truth: list[str], reader: ReaderConfig, client_cfg: ClientConfig,
                       base_url: str, k: int = 5, progress: bool = False) -> tuple[list[Sample], list[dict]]:
    """VERA section 3.4's retrieval and answering step: each query's top-k repository chunks, an answer by
    the reader LLM (tasks.generate), as judge samples; query ids "positive-<i>" / "negative-<i>".
    Positives carry their ground truth (retrieval recall needs it); off-topic queries have none."""
    queries = positive + negative
    ids = [f"{QUERY_SETS[0]}-{i}" for i in range(len(positive))] + \
          [f"{QUERY_SETS[1]}-{i}" for i in range(len(negative))]
    truths = list(positive_truth) + [""] * len(negative)
    hits = repository_hits(corpus_path, queries, k)
    budget = reader.context_window - reader.max_tokens
    tokenizer = reader.tokenizer or default_tokenizer(reader.model)
    items = [generate_stage.GenerationItem(qid, TOPICALITY_SYSTEM, "knn", reader, question,
                                           [h.text for h in row], [h.chunk_id for h in row], budget,
                                           tokenizer)
             for qid, question, row in zip(ids, queries, hits)]
    rows, _ = generate_stage.generate_all(items, client_cfg, base_url, progress)
    by_id = {row["query_id"]: row for row in rows}
    samples, failed = [], []
    for item, truth in zip(items, truths):
        row = by_id[item.query_id]
        if row["status"] != "ok":
            failed.append({"query_id": item.query_id, "system": TOPICALITY_SYSTEM, "error": row["error"]})
            continue
        answer = str(row["answer"] or "")
        samples.append(Sample(item.query_id, TOPICALITY_SYSTEM, item.question, answer, truth,
                              item.chunks[: row["n_chunks_used"]]))
    return samples, failed


def judged_topicality_scores(samples: list[Sample], failed: list[dict], judge: JudgeConfig,
                             client_cfg: ClientConfig, base_url: str, progress: bool = False) -> pd.DataFrame:
    """The VERA LLM metrics of the topicality samples (the judge stage function): long format
    query_id, query_set, metric, score (None where not computable), status, reason."""
    frame, _ = score_samples(samples, failed, judge, client_cfg, base_url, None, progress)
    frame = frame[["query_id", "metric", "score", "status", "reason"]].copy()
    frame.insert(1, "query_set", frame["query_id"].str.rsplit("-", n=1).str[0])
    return frame.reset_index(drop=True)


def topicality_from_scores(scores: pd.DataFrame, b: int = 500, n: int | None = None, seed: int = 0,
                           confidence: float = 0.95) -> dict:
    """VERA section 3.4's comparison on judged scores (columns query_set, metric, score): per metric, the
    bootstrap distributions of the positive and negative sets' means and of their difference, its interval
    and a verdict. A metric without a finite score in either set is reported not computable. One seeded
    stream per metric (SeedSequence([seed, i]))."""
    unknown = set(scores["query_set"]) - set(QUERY_SETS)
    if unknown:
        raise ValueError(f"query_set must be one of {QUERY_SETS}, got {sorted(unknown)}")
    order = {m: i for i, m in enumerate(VERA_METRICS)}
    metrics = sorted(set(scores["metric"]), key=lambda m: (order.get(m, len(order)), m))
    out: dict = {}
    for i, metric in enumerate(metrics):
        rows = scores[scores["metric"] == metric]
        sets = {name: _finite(rows.loc[rows["query_set"] == name, "score"]) for name in QUERY_SETS}
        entry: dict = {f"n_{name}": int(values.size) for name, values in sets.items()}
        empty = [name for name, values in sets.items() if values.size == 0]
        if empty:
            entry.update(computable=False, reason=f"no finite {metric} score for the {' and '.join(empty)} "
                                                  "queries")
        else:
            rng = np.random.default_rng(np.random.SeedSequence([seed, i]))
            result = topicality(sets["positive"], sets["negative"], b, rng, n, confidence)
            entry.update(computable=True, **_jsonable(asdict(result)))
        out[metric] = entry
    return out


def _finite(values: pd.Series) -> np.ndarray:
    array = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return array[np.isfinite(array)]


def topicality_summary(per_metric: dict) -> dict:
    """Which metrics separate the on-topic from the off-topic queries (difference interval above 0)."""
    computable = {m: e for m, e in per_metric.items() if e["computable"]}
    return {"separated": [m for m, e in computable.items() if e["separated"]],
            "not_separated": [m for m, e in computable.items() if not e["separated"]],
            "not_computable": [m for m, e in per_metric.items() if not e["computable"]]}


def llm_topicality_report(scores: pd.DataFrame, b: int = 500, n: int | None = None, seed: int = 0,
                          confidence: float = 0.95, **meta) -> dict:
    per_metric = topicality_from_scores(scores, b, n, seed, confidence)
    return {"method": "llm", "b": b, "n": n, "seed": seed, "confidence": confidence, **meta,
            "n_positive": int(scores.loc[scores.query_set == "positive", "query_id"].nunique()),
            "n_negative": int(scores.loc[scores.query_set == "negative", "query_id"].nunique()),
            **topicality_summary(per_metric), "metrics": per_metric}


def topicality_report(corpus_path: str | Path, positive: list[str], negative: list[str], b: int = 500,
                      n: int | None = None, seed: int = 0, k: int = 5, confidence: float = 0.95) -> dict:
    """The cosine method (ours, no LLM): per-query repository relevance (mean kNN cosine) of on-topic
    (positive) and off-topic (negative) queries, bootstrap distributions compared, verdict with intervals."""
    scores = repository_relevance(corpus_path, positive + negative, k)
    pos, neg = scores[: len(positive)], scores[len(positive):]
    result = topicality(pos, neg, b, np.random.default_rng(seed), n, confidence)
    return {"method": "cosine", "metric": f"mean kNN cosine of the top-{k} chunks (all-MiniLM-L6-v2)", "k": k,
            "b": b, "n": n, "seed": seed, "n_positive": len(positive), "n_negative": len(negative),
            **_jsonable(asdict(result))}


def _jsonable(tree):
    if isinstance(tree, dict):
        return {k: _jsonable(v) for k, v in tree.items()}
    if isinstance(tree, float) and not math.isfinite(tree):
        return None
    return tree
