"""CCRS judging stage: fans out over (query, system, metric) from Ray tasks against the Serve endpoint.

Each judgment goes through judges/ccrs.py (render, ask, parse, re-ask at most twice). The Parquet cache
(judges/cache.py) is consulted first, so a rerun only asks the judge about requests that changed.
Outputs: judgments.parquet (every judgment, failures with raw text and reason) and scores.parquet (long
format, successful judgments only: a failed judgment is absent, never a NaN or a 0).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from judges.cache import CACHE_COLUMNS, JudgmentCache, default_cache_dir, judgment_key
from judges.ccrs import (
    CCRS_METRICS,
    JudgeInput,
    Judgment,
    MetricSpec,
    build_request,
    empty_judgment,
    make_judgment,
    render_prompt,
    run_judgment,
)
from judges.client import ChatRequest, LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.em import flatten_answers
from judges.injection import context_markers, injection_markers
from judges.readers import fit_chunks
from judges.tokens import token_counter
from tasks.fanout import fan_out_report
from tasks.generate import default_tokenizer, top_k_contexts
from tasks.stage import StageCheckpoint, StageResult, file_fingerprint, run_stage, stage_key

CODE_VERSION = "judge-1"
JUDGMENT_COLUMNS = [
    "query_id", "system", "metric", "score", "llm_score", "em", "status", "reason", "raw", "attempts",
    "prompt_tokens", "completion_tokens", "prompt_version", "judge_model", "n_context_chunks",
    "n_context_truncated", "cached", "suspicious", "injection_markers",
]
SCORE_COLUMNS = ["query_id", "system", "metric", "score"]


@dataclass
class JudgingOutputs:
    judgments_path: Path
    scores_path: Path
    summary: dict[str, Any]
    reused: bool = False


@dataclass
class JudgeTask:
    spec: MetricSpec
    sample: JudgeInput
    request: ChatRequest
    key: str
    n_context_chunks: int
    n_context_truncated: int
    cfg: JudgeConfig


def parse_exact_answers(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    return flatten_answers(value)


def load_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame,
                 top_k: int) -> tuple[list[JudgeInput], list[dict]]:
    """Judge inputs for generated rows; failed generations come back separately (judged as failed)."""
    contexts = top_k_contexts(retrieved, top_k)
    by_id = {str(q.query_id): q for q in queries.itertuples(index=False)}
    samples, failed = [], []
    for row in generations.itertuples(index=False):
        if row.status != "ok":
            failed.append({"query_id": str(row.query_id), "system": row.system, "error": row.error})
            continue
        query = by_id[str(row.query_id)]
        context = contexts.get((str(row.query_id), str(row.retriever)))
        texts = [] if context is None else context["text"].astype(str).tolist()[: int(row.n_chunks_used)]
        samples.append(JudgeInput(
            query_id=str(row.query_id), system=row.system, question=str(query.text),
            response=str(row.answer or ""), answer=str(row.answer or ""),
            ground_truth=str(getattr(query, "answer", "") or ""), context=texts,
            exact_answers=parse_exact_answers(getattr(query, "exact_answer", None)),
        ))
    return samples, failed


def plan_task(spec: MetricSpec, sample: JudgeInput, cfg: JudgeConfig, client: ClientConfig, count) -> JudgeTask:
    """The judge window gets the same policy as readers: drop lowest-ranked context chunks until it fits."""
    budget = cfg.context_window - max(cfg.max_tokens, 96 if cfg.structured_output or cfg.justification else 0) - 64
    values = {"question": sample.question, "response": sample.response, "ground_truth": sample.ground_truth}
    chunks = sample.context if "context" in spec.inputs else []
    fitted = fit_chunks(lambda c: render_prompt(spec, {**values, "context": c}, cfg), chunks, budget, count)
    request = build_request(spec, sample, fitted.chunks, cfg)
    key = judgment_key(request, cfg.prompt_version, client.seed, cfg.max_reasks)
    return JudgeTask(spec, sample, request, key, len(fitted.chunks), fitted.n_truncated, cfg)


def judge_task(client: LLMClient, task: JudgeTask) -> Judgment:
    judgment = run_judgment(client, task.spec, task.sample, task.request, task.cfg)
    return with_context(judgment, task)


def with_context(judgment: Judgment, task: JudgeTask) -> Judgment:
    judgment.n_context_chunks = task.n_context_chunks
    judgment.n_context_truncated = task.n_context_truncated
    return judgment


def _from_cache(task: JudgeTask, record: dict, cfg: JudgeConfig, cached: bool = True) -> Judgment:
    llm_score = None if record["llm_score"] is None or pd.isna(record["llm_score"]) else int(record["llm_score"])
    judgment = make_judgment(task.spec, task.sample, cfg, llm_score, record["status"], record["reason"],
                             record["raw"], int(record["attempts"]), int(record["prompt_tokens"]),
                             int(record["completion_tokens"]))
    judgment.cached = cached
    return with_context(judgment, task)


def _cacheable(judgment: Judgment) -> bool:
    """Scores and invalid-after-re-asks are the judge's answers; request failures are not."""
    return judgment.status == "ok" or (judgment.status == "failed" and not _transport_failed(judgment))


def _transport_failed(judgment: Judgment) -> bool:
    return judgment.status == "failed" and (judgment.reason or "").startswith("request failed")


def _record(judgment: Judgment) -> dict[str, Any]:
    return {column: getattr(judgment, column) for column in CACHE_COLUMNS if column != "key"}


def task_id(task: JudgeTask) -> str:
    return f"{task.sample.system}/{task.sample.query_id}/{task.spec.name}"


def judge_all(samples: list[JudgeInput], cfg: JudgeConfig, client: ClientConfig, base_url: str,
              progress: bool, checkpoint: StageCheckpoint | None = None) -> tuple[list[Judgment], dict[str, Any]]:
    """One judgment per (sample, metric): from the cache, from this stage's checkpoint (a resumed run) or
    asked now; what is asked now is saved to the checkpoint shard by shard and to the cache at the end."""
    count = token_counter(cfg.tokenizer or default_tokenizer(cfg.model))
    cache = JudgmentCache(default_cache_dir()) if cfg.cache else None
    done = checkpoint.load() if checkpoint is not None else {}
    judgments, todo = [], []
    hits = resumed = 0
    for sample in samples:
        for name in cfg.metrics:
            spec = CCRS_METRICS[name]
            if not sample.response.strip():
                judgments.append(empty_judgment(spec, sample, cfg))
                continue
            task = plan_task(spec, sample, cfg, client, count)
            record = cache.get(task.key) if cache is not None else None
            if record:
                hits += 1
                judgments.append(_from_cache(task, record, cfg))
            elif task_id(task) in done:
                resumed += 1
                judgments.append(_from_cache(task, done[task_id(task)], cfg, cached=False))
            else:
                todo.append(task)

    def persist(indices: list[int], values: list[Judgment]) -> None:
        if checkpoint is not None:
            checkpoint.save({task_id(todo[j]): _record(v) for j, v in zip(indices, values) if _cacheable(v)})

    fresh, report = fan_out_report(judge_task, todo, client, base_url, progress=progress, desc="judge",
                                   on_shard=persist, retry_if=_transport_failed)
    if cache is not None:
        for task, judgment in zip(todo, fresh):
            if _cacheable(judgment):
                cache.put(task.key, asdict(judgment))
        cache.flush()
    stats = {"cache_hits": hits, "resumed": resumed, "judge_requests": len(todo), "requests": report.as_dict()}
    return judgments + fresh, stats


class IncompleteJudgingError(RuntimeError):
    """The judging stage did not end with exactly one row per (query, system, metric)."""


def check_complete(frame: pd.DataFrame, generations: pd.DataFrame, metrics: list[str]) -> None:
    """Exactly one judgment or recorded failure per generated (query, system) and metric: no duplicate,
    none missing. Checked before the stage's output is written, so a broken run never lands."""
    keys = ["query_id", "system", "metric"]
    duplicated = frame[frame.duplicated(keys, keep=False)]
    if not duplicated.empty:
        raise IncompleteJudgingError(f"{len(duplicated)} duplicate judgment rows, e.g. "
                                     f"{duplicated[keys].head(3).to_dict('records')}")
    expected = {(str(q), str(s), m) for q, s in zip(generations["query_id"], generations["system"]) for m in metrics}
    present = set(zip(frame["query_id"].astype(str), frame["system"].astype(str), frame["metric"]))
    if expected != present:
        missing, extra = sorted(expected - present), sorted(present - expected)
        raise IncompleteJudgingError(f"{len(missing)} judgments missing (e.g. {missing[:3]}), "
                                     f"{len(extra)} unexpected (e.g. {extra[:3]})")


def failed_generation_judgments(failed: list[dict], cfg: JudgeConfig) -> list[Judgment]:
    return [
        Judgment(f["query_id"], f["system"], metric, None, None, None, "failed",
                 f"generation failed: {f['error']}"[:2000], None, 0, 0, 0, cfg.prompt_version, cfg.model)
        for f in failed for metric in cfg.metrics
    ]


def suspicious_texts(samples: list[JudgeInput]) -> dict[tuple[str, str], str]:
    """(query_id, system) -> the injection patterns found in the response or its retrieved context
    (judges/injection.py), e.g. "response:score_dictation;context:instruction_override"."""
    flags = {}
    for sample in samples:
        found = [f"response:{m}" for m in injection_markers(sample.response)]
        found += [f"context:{m}" for m in context_markers(sample.context)]
        if found:
            flags[(sample.query_id, sample.system)] = ";".join(found)
    return flags


def flag_suspicious(frame: pd.DataFrame, flags: dict[tuple[str, str], str]) -> pd.DataFrame:
    """Judgments of steering-looking inputs stay scored but are flagged, so a reader can filter them."""
    keys = list(zip(frame["query_id"].astype(str), frame["system"].astype(str)))
    frame["injection_markers"] = [flags.get(key, "") for key in keys]
    frame["suspicious"] = frame["injection_markers"] != ""
    return frame


def judging_summary(frame: pd.DataFrame, stats: dict[str, int], seconds: float, cfg: JudgeConfig) -> dict:
    failed = frame[frame["status"] == "failed"]
    fresh = frame[~frame["cached"]]
    flagged = frame.loc[frame["suspicious"], ["query_id", "system"]].drop_duplicates()
    return {
        "judgments": len(frame),
        "prompt_version": cfg.prompt_version,
        "judge_model": cfg.model,
        "status_counts": {k: int(v) for k, v in frame["status"].value_counts().items()},
        "failures": {f"{m}/{s}": int(n) for (m, s), n in failed.groupby(["metric", "system"]).size().items()},
        "failure_reasons": {k: int(v) for k, v in failed["reason"].str.slice(0, 60).value_counts().head(10).items()},
        "prompt_tokens": int(fresh["prompt_tokens"].sum()),
        "completion_tokens": int(fresh["completion_tokens"].sum()),
        "cached_prompt_tokens": int(frame.loc[frame["cached"], "prompt_tokens"].sum()),
        "context_truncated_judgments": int((frame["n_context_truncated"] > 0).sum()),
        "suspicious_samples": len(flagged),
        "suspicious_by_system": {k: int(v) for k, v in flagged["system"].value_counts().sort_index().items()},
        **stats,
        "seconds": round(seconds, 2),
    }


def judgments_frame(judgments: list[Judgment], flags: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    frame = flag_suspicious(pd.DataFrame([asdict(j) for j in judgments], columns=JUDGMENT_COLUMNS), flags or {})
    frame["llm_score"] = frame["llm_score"].astype("Int64")
    frame["score"] = frame["score"].astype("float64")
    frame["em"] = frame["em"].astype("float64")
    return frame.sort_values(["system", "query_id", "metric"]).reset_index(drop=True)


def run_judging(
    run_dir: Path,
    queries_path: Path,
    retrieved_path: Path,
    generations_path: Path,
    judge: JudgeConfig,
    client: ClientConfig,
    base_url: str,
    top_k: int,
    force: bool = False,
    progress: bool = True,
) -> JudgingOutputs:
    config = {"judge": judge, "seed": client.seed, "top_k": top_k}
    upstream = [file_fingerprint(p) for p in (queries_path, retrieved_path, generations_path)]
    key = stage_key("judge", config, upstream, CODE_VERSION)

    def compute(out_dir: Path) -> dict:
        started = time.perf_counter()
        generations = pd.read_parquet(generations_path)
        samples, failed = load_samples(pd.read_parquet(queries_path), pd.read_parquet(retrieved_path),
                                       generations, top_k)
        judgments, stats = judge_all(samples, judge, client, base_url, progress, StageCheckpoint(run_dir, "judge", key))
        frame = judgments_frame(judgments + failed_generation_judgments(failed, judge), suspicious_texts(samples))
        check_complete(frame, generations, judge.metrics)
        write_judgments(frame, out_dir)
        return judging_summary(frame, stats, time.perf_counter() - started, judge)

    return judging_outputs(run_stage(run_dir, "judge", key, compute, force=force))


def write_judgments(frame: pd.DataFrame, out_dir: Path) -> None:
    """Every judgment (failures included) and, for the reducer, the long-format scores of the
    successful ones only: a failed judgment is absent there, never a NaN or a 0."""
    frame.to_parquet(out_dir / "judgments.parquet", index=False)
    frame.loc[frame["score"].notna(), SCORE_COLUMNS].to_parquet(out_dir / "scores.parquet", index=False)


def judging_outputs(result: StageResult) -> JudgingOutputs:
    return JudgingOutputs(result.out_dir / "judgments.parquet", result.out_dir / "scores.parquet",
                          result.summary, result.reused)
