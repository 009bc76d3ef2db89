"""`ccrs vera score` and `ccrs vera bootstrap`: the VERA suite over a run's generations plus the
cross-encoder aggregate, and bootstrap statistics with a convergence report.

Scoring goes through the judge session (tasks/runtime/judge_session.py `JudgeSession` with the registered
"vera" suite: cache, Ray fan-out, context fitted to the judge's window); `ccrs run` with
`judges: [..., vera]` computes the same four metrics as a stage of the run (RUN_DIR/judge_vera/).
Outputs (RunLayout(RUN_DIR).vera_dir): judgments.parquet (every metric of every (query, system) with
status/reason/usage, the tasks.judge judgments frame; aggregate rows carry logit, sigmoid and token
counts in `detail`), scores.parquet (long format query_id, system, metric, score of the scored rows:
vera_faithfulness, vera_retrieval_recall, vera_retrieval_precision, vera_answer_relevance, and, when a
trained cross-encoder is named, vera_aggregate (the logit, as the paper reports it) and
vera_aggregate_sigmoid) and bootstrap.json.

The aggregate is OFF by default: no trained cross-encoder ships as a package here (the paper's
ms-marco-MiniLM-L-12-v2 lives on the model hub, which is not reachable), and an untrained head is noise.
It is the VERA suite's (judges/vera.py, judge.vera.cross_encoder), so `ccrs run`, `ccrs vera score`,
`topicality` and `qrels` compute it the same way; `cross_encoder=PATH` here sets that field.
UNTRAINED_DEMO_HEAD (demo / tests) writes DEMO_AGGREGATE instead, a metric no goal tree reads.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from judges.config import ClientConfig, JudgeConfig
from judges.suite import Sample, get_suite
from judges.vera import SUITE, CrossEncoderAggregator, aggregate_names, cross_encoder_for
from stats.vera import SampleSize, bootstrap_metric, convergence, sample_size
from tasks import judge as judge_stage
from tasks.runtime import judge_session
from tasks.runtime.fanout import progress_bar
from tasks.runtime.layout import RunLayout

AGGREGATE_OFF = ("VERA aggregate off: no trained cross-encoder named (pass --cross-encoder PATH to a local "
                 "trained cross-encoder checkpoint, e.g. ms-marco-MiniLM-L-12-v2 as in the paper)")


CrossEncoder = str | CrossEncoderAggregator | None  # a model name / path, a loaded aggregator, or off
Size = int | SampleSize | None  # bootstrap sample size n: a number (refused above N), every value, or a rule


def cross_encoder_name(cross_encoder: CrossEncoder) -> str | None:
    if isinstance(cross_encoder, CrossEncoderAggregator):
        return cross_encoder.model_name
    return cross_encoder or None


def aggregate_metric(cross_encoder: CrossEncoder) -> str | None:
    """The column of the aggregate's logit: none when off, DEMO_AGGREGATE for the untrained head."""
    names = aggregate_names(cross_encoder_name(cross_encoder))
    return names[0] if names else None


def load_aggregator(cross_encoder: CrossEncoder, max_length: int = 512) -> CrossEncoderAggregator | None:
    """The named cross-encoder loaded in this process (the suite reuses it): a bad name fails here, before
    any LLM call."""
    if isinstance(cross_encoder, CrossEncoderAggregator) or not cross_encoder:
        return cross_encoder or None
    return cross_encoder_for(cross_encoder, max_length)


def with_cross_encoder(judge: JudgeConfig, cross_encoder: CrossEncoder) -> JudgeConfig:
    """The judge config whose VERA suite adds the aggregate of `cross_encoder` (None: the config's own)."""
    name = cross_encoder_name(cross_encoder)
    if name is None:
        return judge
    return judge.model_copy(update={"vera": judge.vera.model_copy(update={"cross_encoder": name})})


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
    return judge_session.load_samples(queries, retrieved, first_queries(queries, generations, limit), top_k)


def score_samples(samples: list[Sample], failed: list[dict], judge: JudgeConfig, client_cfg: ClientConfig,
                  base_url: str, cross_encoder: CrossEncoder = None,
                  progress: bool = False) -> tuple[pd.DataFrame, dict]:
    """Every selected VERA metric of every sample through the judge stage function (failed generations as
    failed rows), plus the aggregate when a cross-encoder is named here or in judge.vera.cross_encoder:
    (judgments frame, stage stats). `progress`: a bar counting judgments (samples x metrics), as the judge
    stage moves it."""
    judge = with_cross_encoder(judge, cross_encoder)
    session = judge_session.JudgeSession.of(SUITE, judge, client_cfg, base_url)
    metrics = session.metrics()
    bar = progress_bar(len(samples) * len(metrics), f"judge {SUITE}", "judgment") if progress else None
    try:
        judgments, stats = session.judge_samples(samples, bar if bar is not None else False)
    finally:
        if bar is not None:
            bar.close()
    judgments += session.failed_generations(failed)
    frame = judge_stage.judgments_frame(judgments, judge_session.suspicious_texts(samples), metrics)
    return frame, stats


def scores_long(judgments: pd.DataFrame) -> pd.DataFrame:
    ok = judgments[judgments["score"].notna()]
    return ok[["query_id", "system", "metric", "score"]].reset_index(drop=True)


def sample_size_fields(n: Size) -> dict:
    """The report's n (as asked; None: every observation) and what an n above a set's N does."""
    rule = sample_size(n)
    ratio = rule.ratio_above_observations
    return {"n": rule.n, "n_above_observations": "refused" if ratio is None else
            f"drawn at the paper's ratio n/N = {ratio:g}"}


def bootstrap_report(scores: pd.DataFrame, b: int, seed: int, n: Size = None,
                     b_grid: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000), tol: float = 0.01,
                     confidence: float = 0.95) -> dict:
    """Per (system, metric): bootstrap mean/SE/interval with sample size n and B resamples, and the
    convergence of the SE as B grows. One seeded stream per (system, metric) via SeedSequence."""
    out: dict = {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence,
                 "b_grid": list(b_grid), "tol": tol, "systems": {}}
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
             cross_encoder: CrossEncoder = None, b: int = 1000, n: Size = None, seed: int = 0,
             limit: int | None = None, progress: bool = False) -> dict:
    """Score a run's generations with the VERA suite (+ aggregate), write the outputs under the run's
    vera_dir, bootstrap every (system, metric); returns a summary (calls: judge asks made now). The
    cross-encoder is loaded before any judge call, so a bad name fails fast."""
    started = time.perf_counter()
    judge = with_cross_encoder(judge, cross_encoder)
    load_aggregator(judge.vera.cross_encoder, judge.vera.cross_encoder_max_length)  # fails before any call
    layout = RunLayout(Path(run_dir))
    queries = pd.read_parquet(layout.queries)
    generations = first_queries(queries, pd.read_parquet(layout.generations), limit)
    samples, failed = load_samples(queries, pd.read_parquet(layout.retrieved), generations, top_k)
    frame, stats = score_samples(samples, failed, judge, client_cfg, base_url, None, progress)
    judge_stage.check_complete(frame, generations, get_suite(SUITE).selected_metrics(judge))
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
            "aggregate": aggregate_metric(judge.vera.cross_encoder) or AGGREGATE_OFF, "out_dir": str(out)}
