"""The whole load test: for each offered concurrency level L, L caller threads send N requests (closed loop: a
caller sends its next request when its previous one returned) through ONE shared LLMClient whose
`max_concurrency` is the configured client limit, so at most that many requests are in flight whatever L
is. With `compare_unlimited` every level runs again, right after its limited run, through a client whose
limit is raised to L.
"""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from pipelines.tools.load.measure import (
    LevelReport,
    RequestRecord,
    request_id,
    run_level,
    summarize_level,
    timed_request,
)
from pipelines.tools.load.pool import LoadTestError, RequestPool, judge_samples, plan_requests

Mode = Literal["limited", "unlimited"]


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
