"""Load test of the judge stage: real CCRS judge requests fired at an endpoint at several concurrency levels.

Requests are the judge stage's own (the registered CCRS suite's `plan`, judges/ccrs.py: same templates,
window policy, sampling parameters) over real BioASQ questions: response = the ideal answer, context = a
window of the question's gold snippets. For each offered concurrency level L, L caller threads send N
requests (closed loop: a caller sends its next request when its previous one returned) through ONE shared
LLMClient whose `max_concurrency` is the configured client limit, so at most that many requests are in
flight whatever L is. With `compare_unlimited` every level runs again, right after its limited run, through
a client whose limit is raised to L.

Per request: wall latency (including the wait for a client slot and the client's retries), success or the
error kind, transport attempts, tokens. Per level: errors by kind, error rate, retries, throughput
(successful requests/s, completion tokens/s over the level's wall time) and latency percentiles over all
requests of the level (failures included: that is what a caller waited for).

Every run draws fresh requests from the pool (a repeated prompt would hit vLLM's prefix cache and look
faster); when the pool is exhausted it starts over and the report counts the repeats.
"""
from __future__ import annotations

import json
import os
import platform
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from judges.caching import CachingJudge
from judges.ccrs import CCRS_METRICS, SUITE, parse_score, unit_request
from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.suite import Sample, Unit, get_suite
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from tasks.runtime.judge_session import judge_counter, parse_exact_answers

Mode = Literal["limited", "unlimited"]
PERCENTILES = (50, 90, 99)
LEVEL_COLUMNS = [
    "mode", "level", "client_limit", "requests", "ok", "errors", "error_rate", "errors_by_kind", "retries",
    "unparsed_replies", "repeated_requests", "wall_s", "throughput_rps", "completion_tokens_per_s",
    "prompt_tokens", "completion_tokens", "latency_mean_s", "latency_p50_s", "latency_p90_s",
    "latency_p99_s", "latency_max_s", "started_at",
]


class LoadTestError(RuntimeError):
    """The load test cannot run (no usable requests, or the endpoint fails the warm-up request)."""


class LoadTestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    levels: list[int] = Field(min_length=1, description="offered concurrency: caller threads per level")
    requests_per_level: int = Field(default=32, ge=1)
    compare_unlimited: bool = False
    warmup_requests: int = Field(default=1, ge=0)
    dataset: str = "data/bioasq-sample"
    chunks_per_sample: int = Field(default=5, ge=1, description="gold snippets per judge context")

    @field_validator("levels")
    @classmethod
    def _positive_levels(cls, levels: list[int]) -> list[int]:
        if any(level < 1 for level in levels):
            raise ValueError(f"concurrency levels must be >= 1, got {levels}")
        return levels


# --- requests ------------------------------------------------------------------------------------------

def judge_samples(dataset: str, chunks_per_sample: int) -> list[Sample]:
    """One sample per (question, window of gold snippets): first every question's first window, then
    every question's second window, and so on, so short runs still cover many questions."""
    loaded = load_dataset(DatasetConfig(path=dataset))
    texts = dict(zip(loaded.passages.column("doc_id").to_pylist(),
                     loaded.passages.column("text").to_pylist()))
    rounds: dict[int, list[Sample]] = {}
    for query in loaded.queries.to_pylist():
        if not query["answer"]:
            continue
        snippets = [texts[d] for d in query["relevant_doc_ids"] if d in texts] or [""]
        for start in range(0, len(snippets), chunks_per_sample):
            window = start // chunks_per_sample
            rounds.setdefault(window, []).append(Sample(
                query_id=query["query_id"], system=f"gold-w{window}", question=query["text"],
                response=query["answer"], ground_truth=query["answer"],
                context=snippets[start:start + chunks_per_sample],
                exact_answers=parse_exact_answers(query["exact_answer"])))
    return [sample for window in sorted(rounds) for sample in rounds[window]]


def plan_requests(samples: list[Sample], judge: JudgeConfig, client: ClientConfig,
                  limit: int | None = None) -> list[Unit]:
    """The judge stage's units for every (sample, metric) (the CCRS suite's `plan`; `unit_request` gives
    a unit's request), duplicates dropped (QR has no context, so its request is the same for every window of a
    question); at most `limit` of them."""
    count = judge_counter(judge)
    suite = get_suite(SUITE)
    caching = CachingJudge(suite, judge, client.seed)
    units: dict[str, Unit] = {}
    for sample in samples:
        for unit in suite.plan(sample, judge, client.seed, count):
            units.setdefault(caching.key(unit), unit)
            if limit is not None and len(units) >= limit:
                return list(units.values())
    return list(units.values())


class RequestPool:
    """Hands out the planned requests in a seeded random order (so every level gets a comparable mix of
    questions, metrics and prompt lengths), starting over when exhausted; counts the repeats."""

    def __init__(self, tasks: list[Unit], seed: int = 0):
        if not tasks:
            raise LoadTestError("no judge requests to send (empty dataset?)")
        self.tasks, self.cursor = list(tasks), 0
        random.Random(seed).shuffle(self.tasks)

    def take(self, n: int) -> list[tuple[Unit, bool]]:
        drawn = [(self.tasks[(self.cursor + i) % len(self.tasks)], self.cursor + i >= len(self.tasks))
                 for i in range(n)]
        self.cursor += n
        return drawn


# --- one request ------------------------------------------------------------------------------------------

@dataclass
class RequestRecord:
    mode: str
    level: int
    client_limit: int
    index: int
    request_id: str
    ok: bool
    latency_s: float
    start_s: float
    end_s: float
    attempts: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    parsed: bool
    repeated: bool
    error_kind: str | None = None
    status_code: int | None = None
    error: str | None = None


def error_kind(exc: BaseException) -> str:
    """'HTTP 503' for a final status, 'gave up: ReadTimeout' / 'gave up: HTTP 503' for exhausted retries,
    else the exception class."""
    status = getattr(exc, "status_code", None)
    if status:
        return f"HTTP {status}"
    message = str(exc)
    if message.startswith("gave up after"):
        return "gave up: " + message.split(": ", 1)[-1].split(":", 1)[0]
    return type(exc).__name__


def timed_request(client: LLMClient, judge: JudgeConfig, task: Unit, origin: float) -> dict[str, Any]:
    """Send one judge request (the unit's planned request, one ask); every failure a caller would see is
    recorded, whatever its class."""
    started = time.perf_counter()
    try:
        result = client.chat(unit_request(task, judge))
    except Exception as exc:  # noqa: BLE001 - a load test records failures instead of stopping at one
        ended = time.perf_counter()
        attempts = getattr(exc, "attempts", 0) or 1
        return {"ok": False, "latency_s": ended - started, "start_s": started - origin,
                "end_s": ended - origin,
                "attempts": attempts, "retries": attempts - 1, "prompt_tokens": 0, "completion_tokens": 0,
                "parsed": False, "error_kind": error_kind(exc),
                "status_code": getattr(exc, "status_code", None),
                "error": str(exc)[:300]}
    ended = time.perf_counter()
    expect_json = judge.structured_output or judge.ccrs.justification
    parsed = parse_score(result.text, expect_json=expect_json, scale=metric(task).scale).score is not None
    return {"ok": True, "latency_s": ended - started, "start_s": started - origin, "end_s": ended - origin,
            "attempts": result.attempts, "retries": result.attempts - 1,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "parsed": parsed}


def metric(task: Unit):
    return CCRS_METRICS[task.metrics[0]]


def request_id(task: Unit) -> str:
    return f"{task.sample.query_id}/{task.sample.system}/{'+'.join(task.metrics)}"


# --- one level --------------------------------------------------------------------------------------------

@dataclass
class LatencySummary:
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None


def latency_summary(latencies: list[float]) -> LatencySummary:
    """Mean, percentiles (numpy's linear interpolation between order statistics) and max; None when empty."""
    if not latencies:
        return LatencySummary(None, None, None, None, None)
    values = np.asarray(latencies, dtype=float)
    p50, p90, p99 = (float(v) for v in np.percentile(values, PERCENTILES))
    return LatencySummary(float(values.mean()), p50, p90, p99, float(values.max()))


@dataclass
class LevelReport:
    mode: str
    level: int
    client_limit: int
    requests: int
    ok: int
    errors: int
    error_rate: float
    errors_by_kind: dict[str, int]
    retries: int
    unparsed_replies: int
    repeated_requests: int
    wall_s: float
    throughput_rps: float
    completion_tokens_per_s: float
    prompt_tokens: int
    completion_tokens: int
    latency: LatencySummary
    started_at: str | None = None

    def row(self) -> dict[str, Any]:
        """Flat form for CSV and tables."""
        flat = {k: v for k, v in asdict(self).items() if k != "latency"}
        flat["errors_by_kind"] = json.dumps(self.errors_by_kind, sort_keys=True)
        flat.update({f"latency_{k}": v for k, v in asdict(self.latency).items()})
        return {column: flat[column] for column in LEVEL_COLUMNS}


def summarize_level(records: list[RequestRecord], mode: str, level: int, client_limit: int) -> LevelReport:
    """Throughput over the level's wall time (first send to last reply); successful requests only."""
    if not records:
        raise ValueError("a level needs at least one request")
    ok = [r for r in records if r.ok]
    wall = max(r.end_s for r in records) - min(r.start_s for r in records)
    completion = sum(r.completion_tokens for r in ok)
    errors = Counter(r.error_kind for r in records if not r.ok)
    return LevelReport(
        mode=mode, level=level, client_limit=client_limit, requests=len(records), ok=len(ok),
        errors=len(records) - len(ok), error_rate=(len(records) - len(ok)) / len(records),
        errors_by_kind=dict(sorted(errors.items())), retries=sum(r.retries for r in records),
        unparsed_replies=sum(not r.parsed for r in ok), repeated_requests=sum(r.repeated for r in records),
        wall_s=wall, throughput_rps=len(ok) / wall if wall > 0 else 0.0,
        completion_tokens_per_s=completion / wall if wall > 0 else 0.0,
        prompt_tokens=sum(r.prompt_tokens for r in ok), completion_tokens=completion,
        latency=latency_summary([r.latency_s for r in records]),
    )


def run_level(client: LLMClient, judge: JudgeConfig, drawn: list[tuple[Unit, bool]], mode: str, level: int,
              client_limit: int) -> list[RequestRecord]:
    """`level` caller threads share the requests; each sends its next one when the previous returned."""
    origin = time.perf_counter()
    with ThreadPoolExecutor(max_workers=level, thread_name_prefix=f"load-{mode}-{level}") as callers:
        futures = [callers.submit(timed_request, client, judge, task, origin) for task, _ in drawn]
        outcomes = [future.result() for future in futures]
    return [RequestRecord(mode=mode, level=level, client_limit=client_limit, index=i,
                          request_id=request_id(task), repeated=repeated, **outcome)
            for i, ((task, repeated), outcome) in enumerate(zip(drawn, outcomes))]


# --- the whole test ----------------------------------------------------------------------------------------

@dataclass
class LoadTestResult:
    model: str
    base_url: str
    config: dict[str, Any]
    client: dict[str, Any]
    environment: dict[str, Any]
    distinct_requests: int
    warmup: list[dict[str, Any]]
    levels: list[LevelReport]
    records: list[RequestRecord] = field(repr=False)
    seconds: float = 0.0


def environment() -> dict[str, Any]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_cores": cores, "machine": platform.machine(), "processor": platform.processor() or None,
            "platform": platform.platform(), "python": platform.python_version()}


def warm_up(client: LLMClient, judge: JudgeConfig, pool: RequestPool, n: int) -> list[dict[str, Any]]:
    """Requests before any level (not counted); a failing one means the endpoint is not usable."""
    done = []
    for task, _ in pool.take(n):
        outcome = timed_request(client, judge, task, time.perf_counter())
        if not outcome["ok"]:
            raise LoadTestError(f"warm-up request failed: {outcome['error']}")
        done.append({"request_id": request_id(task), "latency_s": outcome["latency_s"]})
    return done


def run_load_test(cfg: LoadTestConfig, judge: JudgeConfig, client_cfg: ClientConfig, base_url: str,
                  on_level: Callable[[LevelReport], None] | None = None) -> LoadTestResult:
    """Every level through one client capped at client_cfg.max_concurrency; with compare_unlimited each
    level is run again right after, through a client whose cap is raised to the level (adjacent in time,
    so a load drift on a shared machine hits both runs of a level alike). Reports: limited levels first."""
    started = time.perf_counter()
    runs = len(cfg.levels) * (2 if cfg.compare_unlimited else 1)
    needed = cfg.warmup_requests + runs * cfg.requests_per_level
    samples = judge_samples(cfg.dataset, cfg.chunks_per_sample)
    pool = RequestPool(plan_requests(samples, judge, client_cfg, needed), client_cfg.seed)
    reports: list[LevelReport] = []
    records: list[RequestRecord] = []

    def one_level(client: LLMClient, mode: Mode, level: int, limit: int) -> None:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        level_records = run_level(client, judge, pool.take(cfg.requests_per_level), mode, level, limit)
        report = summarize_level(level_records, mode, level, limit)
        report.started_at = started_at
        records.extend(level_records)
        reports.append(report)
        if on_level:
            on_level(report)

    with LLMClient(client_cfg, base_url) as client:
        warmup = warm_up(client, judge, pool, cfg.warmup_requests)
        for level in cfg.levels:
            one_level(client, "limited", level, client_cfg.max_concurrency)
            if cfg.compare_unlimited:
                with LLMClient(client_cfg.model_copy(update={"max_concurrency": level}), base_url) as raised:
                    one_level(raised, "unlimited", level, level)
    reports.sort(key=lambda r: r.mode != "limited")  # stable: levels stay in the given order
    return LoadTestResult(
        model=judge.model, base_url=base_url, config=cfg.model_dump(), client=client_cfg.model_dump(),
        environment=environment(), distinct_requests=len(pool.tasks), warmup=warmup, levels=reports,
        records=records, seconds=time.perf_counter() - started)


# --- outputs ------------------------------------------------------------------------------------------------

def result_dict(result: LoadTestResult) -> dict[str, Any]:
    data = {k: v for k, v in asdict(result).items() if k != "records"}
    data["client"] = {k: v for k, v in result.client.items() if k != "api_key_env"}
    return data


def write_outputs(result: LoadTestResult, out_dir: Path) -> dict[str, Path]:
    """load_test.json (config, environment, per-level reports), load_test.csv (one row per mode x level),
    load_test_requests.csv (one row per request) and load_test.png."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "load_test.json", "csv": out_dir / "load_test.csv",
             "requests": out_dir / "load_test_requests.csv", "plot": out_dir / "load_test.png"}
    paths["json"].write_text(json.dumps(result_dict(result), indent=2, default=str))
    pd.DataFrame([r.row() for r in result.levels], columns=LEVEL_COLUMNS).to_csv(paths["csv"], index=False)
    pd.DataFrame([asdict(r) for r in result.records]).to_csv(paths["requests"], index=False)
    plot_levels(result.levels, paths["plot"],
                f"{result.model}, client limit {result.client['max_concurrency']}")
    return paths


def plot_levels(levels: list[LevelReport], path: Path, title: str) -> Path:
    """Throughput and p90 latency against the offered concurrency, one line per mode."""
    from pipelines.reporting.plots import figure_file

    with figure_file(path, nrows=1, ncols=2, figsize=(10.0, 4.0)) as (figure, (left, right)):
        for mode in dict.fromkeys(r.mode for r in levels):
            rows = [r for r in levels if r.mode == mode]
            x = [r.level for r in rows]
            left.plot(x, [r.throughput_rps for r in rows], marker="o", label=mode)
            right.plot(x, [np.nan if r.latency.p90_s is None else r.latency.p90_s for r in rows], marker="o",
                       label=mode)
        for axis, label in ((left, "throughput (successful requests/s)"), (right, "p90 latency (s)")):
            axis.set_xscale("log", base=2)
            axis.set_xticks(sorted({r.level for r in levels}),
                            [str(v) for v in sorted({r.level for r in levels})])
            axis.set_xlabel("offered concurrency (caller threads)")
            axis.set_ylabel(label)
            axis.set_ylim(bottom=0)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize="small")
        figure.suptitle(title)
    return path
