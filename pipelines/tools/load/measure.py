"""One request and one level of the load test, measured. Per request: wall latency (including the wait for a
client slot and the client's retries), success or the error kind, transport attempts, tokens. Per level:
errors by kind, error rate, retries, throughput (successful requests/s, completion tokens/s over the
level's wall time) and latency percentiles over all requests of the level (failures included: that is
what a caller waited for).
"""
from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from judges.ccrs import CCRS_METRICS, parse_score, unit_request
from judges.client import LLMClient
from judges.config import JudgeConfig
from judges.suite import Unit

PERCENTILES = (50, 90, 99)
LEVEL_COLUMNS = [
    "mode", "level", "client_limit", "requests", "ok", "errors", "error_rate", "errors_by_kind", "retries",
    "unparsed_replies", "repeated_requests", "wall_s", "throughput_rps", "completion_tokens_per_s",
    "prompt_tokens", "completion_tokens", "latency_mean_s", "latency_p50_s", "latency_p90_s",
    "latency_p99_s", "latency_max_s", "started_at",
]


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
