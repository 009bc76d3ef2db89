"""GroUSE judging stage (alternative or addition to CCRS): the Figure 4 pipeline of at most four judge
calls per (query, system), fanned out from Ray tasks against the judge endpoint.

Inputs are the same as tasks/judge.py (queries, retrieved contexts, generations); the references of a
sample are the chunks its reader saw, ranked, cited [1], [2], ... Outputs in run_dir/judge_grouse/:
judgments.parquet (all six metrics per sample: value, status, failures with raw text and reason) and
scores.parquet (long format query_id, system, metric, score in [0, 1]; null marks, skipped metrics and
failures are absent, never NaN or 0). The stage is content-keyed (tasks/stage.py): a rerun with the same
inputs and config reuses the finished output.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.grouse import (
    GROUSE_METRICS,
    METRIC_ORDER,
    GrouseJudgment,
    GrouseSample,
    evaluate_sample,
    render_prompt,
    reply_tokens,
)
from judges.readers import fit_chunks
from judges.tokens import token_counter
from tasks.fanout import fan_out_report
from tasks.generate import default_tokenizer
from tasks.judge import JudgingOutputs, judging_outputs, load_samples, write_judgments
from tasks.stage import StageCheckpoint, file_fingerprint, run_stage, stage_key

CODE_VERSION = "grouse-judge-1"
STAGE = "judge_grouse"
JUDGMENT_COLUMNS = [
    "query_id", "system", "metric", "value", "score", "status", "reason", "raw", "justification", "attempts",
    "prompt_tokens", "completion_tokens", "prompt_version", "judge_model", "n_references",
    "n_references_truncated",
]


@dataclass
class GrouseTask:
    sample: GrouseSample
    cfg: JudgeConfig
    n_truncated: int


def fit_references(sample: GrouseSample, cfg: JudgeConfig, count: Callable[[str], int]) -> GrouseTask:
    """Drop the lowest-ranked references until the longest prompt (completeness) leaves room for the reply."""
    budget = cfg.context_window - reply_tokens(cfg) - 64
    spec = GROUSE_METRICS["completeness"]

    def render(chunks: list[str]) -> str:
        return render_prompt(spec, GrouseSample(sample.query_id, sample.system, sample.question, sample.answer,
                                                sample.expected_answer, chunks), cfg.prompt_version)

    fitted = fit_chunks(render, sample.references, budget, count)
    sample.references = fitted.chunks
    return GrouseTask(sample, cfg, fitted.n_truncated)


def _judge(client: LLMClient, task: GrouseTask) -> list[GrouseJudgment]:
    return evaluate_sample(client, task.sample, task.cfg)


def _not_judged(sample: GrouseSample, cfg: JudgeConfig, status: str, reason: str) -> list[dict]:
    return [{**asdict(GrouseJudgment(sample.query_id, sample.system, metric, None, None, status, reason, None, None,
                                     0, 0, 0, cfg.prompt_version, cfg.model)),
             "n_references": len(sample.references), "n_references_truncated": 0} for metric in METRIC_ORDER]


def _transport_failed(judgments: list[GrouseJudgment]) -> bool:
    return any(j.status == "failed" and (j.reason or "").startswith("request failed") for j in judgments)


def _key(task: GrouseTask) -> str:
    return f"{task.sample.system}/{task.sample.query_id}"


def judge_samples(samples: list[GrouseSample], cfg: JudgeConfig, client: ClientConfig, base_url: str,
                  progress: bool, checkpoint: StageCheckpoint | None = None) -> tuple[list[dict], dict]:
    """Rows of judgments.parquet. An empty answer is not sent to the judge (status empty_response).
    Finished samples are saved to `checkpoint` shard by shard and not asked again on a resumed run."""
    count = token_counter(cfg.tokenizer or default_tokenizer(cfg.model))
    rows, tasks = [], []
    for sample in samples:
        if not sample.answer.strip():
            rows += _not_judged(sample, cfg, "empty_response", "empty answer: not sent to the judge")
        else:
            tasks.append(fit_references(sample, cfg, count))
    done = checkpoint.load() if checkpoint is not None else {}
    todo = [t for t in tasks if _key(t) not in done]

    def persist(indices: list[int], values: list[list[GrouseJudgment]]) -> None:
        if checkpoint is not None:
            checkpoint.save({_key(todo[j]): [asdict(x) for x in v] for j, v in zip(indices, values)
                             if not _transport_failed(v)})

    fresh, report = fan_out_report(_judge, todo, client, base_url, progress=progress, desc="judge-grouse",
                                   on_shard=persist, retry_if=_transport_failed)
    results = dict(zip(map(_key, todo), fresh))
    for task in tasks:
        judgments = results.get(_key(task)) or [GrouseJudgment(**d) for d in done[_key(task)]]
        rows += [{**asdict(j), "n_references": len(task.sample.references),
                  "n_references_truncated": task.n_truncated} for j in judgments]
    return rows, {**report.as_dict(), "resumed": len(tasks) - len(todo)}


def to_grouse_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame,
                      top_k: int) -> tuple[list[GrouseSample], list[dict]]:
    inputs, failed = load_samples(queries, retrieved, generations, top_k)
    samples = [GrouseSample(s.query_id, s.system, s.question, s.response, s.ground_truth, list(s.context))
               for s in inputs]
    return samples, failed


def judgments_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=JUDGMENT_COLUMNS)
    frame["value"] = frame["value"].astype("Int64")
    frame["score"] = frame["score"].astype("float64")
    order = {m: i for i, m in enumerate(METRIC_ORDER)}
    frame["_order"] = frame["metric"].map(order)
    return frame.sort_values(["system", "query_id", "_order"]).drop(columns="_order").reset_index(drop=True)


def summary(frame: pd.DataFrame, seconds: float, cfg: JudgeConfig, requests: dict) -> dict:
    failed = frame[frame["status"] == "failed"]
    return {
        "judgments": len(frame),
        "prompt_version": cfg.prompt_version,
        "judge_model": cfg.model,
        "status_counts": {k: int(v) for k, v in frame["status"].value_counts().items()},
        "failures": {f"{m}/{s}": int(n) for (m, s), n in failed.groupby(["metric", "system"]).size().items()},
        "judge_calls": int(frame["attempts"].sum()),
        "prompt_tokens": int(frame["prompt_tokens"].sum()),
        "completion_tokens": int(frame["completion_tokens"].sum()),
        "references_truncated_samples": int((frame.groupby(["query_id", "system"])["n_references_truncated"].max() > 0).sum()),
        "requests": requests,
        "seconds": round(seconds, 2),
    }


def run_grouse_judging(
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
    key = stage_key(STAGE, config, upstream, CODE_VERSION)

    def compute(out_dir: Path) -> dict:
        started = time.perf_counter()
        samples, failed = to_grouse_samples(pd.read_parquet(queries_path), pd.read_parquet(retrieved_path),
                                            pd.read_parquet(generations_path), top_k)
        rows, requests = judge_samples(samples, judge, client, base_url, progress,
                                       StageCheckpoint(run_dir, STAGE, key))
        for f in failed:
            sample = GrouseSample(f["query_id"], f["system"], "", "", "", [])
            rows += _not_judged(sample, judge, "failed", f"generation failed: {f['error']}"[:2000])
        frame = judgments_frame(rows)
        write_judgments(frame, out_dir)
        return summary(frame, time.perf_counter() - started, judge, requests)

    return judging_outputs(run_stage(run_dir, STAGE, key, compute, force=force))
