"""One request and one level of the load test (pipelines/tools/load/measure.py): percentile and report math
on hand-computed numbers, the client cap and the retries against a counting HTTP stub."""
from __future__ import annotations

import json

import pytest

from judges.client import LLMClient, LLMRequestError
from judges.config import ClientConfig
from pipelines.tools.load.measure import (
    LatencySummary,
    RequestRecord,
    error_kind,
    latency_summary,
    run_level,
    summarize_level,
)
from tests.pipelines.tools.load.test_pool import ccrs_judge, planned_units


def test_latency_percentiles_interpolate_linearly_between_order_statistics():
    summary = latency_summary([float(v) for v in range(10, 0, -1)])  # 1..10, unsorted
    # rank (n-1)*q: p50 -> 4.5 -> 5.5; p90 -> 8.1 -> 9 + 0.1; p99 -> 8.91 -> 9 + 0.91
    assert summary.p50_s == pytest.approx(5.5)
    assert summary.p90_s == pytest.approx(9.1)
    assert summary.p99_s == pytest.approx(9.91)
    assert (summary.max_s, summary.mean_s) == (10.0, 5.5)


def test_latency_summary_of_one_and_of_no_request():
    assert latency_summary([2.0]) == LatencySummary(2.0, 2.0, 2.0, 2.0, 2.0)
    assert latency_summary([]) == LatencySummary(None, None, None, None, None)


def record_of(start: float, end: float, ok: bool = True, tokens: int = 0, attempts: int = 1,
            kind: str | None = None, repeated: bool = False, parsed: bool = True) -> RequestRecord:
    return RequestRecord(mode="limited", level=4, client_limit=2, index=0, request_id="q/gold-w0/CC", ok=ok,
                         latency_s=end - start, start_s=start, end_s=end, attempts=attempts,
                         retries=attempts - 1, prompt_tokens=100 if ok else 0, completion_tokens=tokens,
                         parsed=ok and parsed, repeated=repeated, error_kind=kind)


def test_level_report_on_hand_computed_numbers():
    records = [
        record_of(0.0, 1.0, tokens=10),                                     # latency 1.0
        record_of(0.5, 2.5, tokens=20, attempts=2, parsed=False),           # 2.0, one retry
        record_of(1.0, 1.5, ok=False, attempts=1, kind="HTTP 400"),         # 0.5
        record_of(0.2, 4.2, ok=False, attempts=5, kind="gave up: ReadTimeout", repeated=True),  # 4.0
    ]
    report = summarize_level(records, "limited", 4, 2)
    assert (report.requests, report.ok, report.errors, report.error_rate) == (4, 2, 2, 0.5)
    assert report.errors_by_kind == {"HTTP 400": 1, "gave up: ReadTimeout": 1}
    assert (report.retries, report.unparsed_replies, report.repeated_requests) == (5, 1, 1)
    assert report.wall_s == pytest.approx(4.2)  # first send 0.0 .. last reply 4.2
    assert report.throughput_rps == pytest.approx(2 / 4.2)  # successful requests only
    assert report.completion_tokens_per_s == pytest.approx(30 / 4.2)
    assert (report.prompt_tokens, report.completion_tokens) == (200, 30)
    # all four latencies, failures included: sorted 0.5, 1, 2, 4; ranks 1.5, 2.7, 2.97
    assert report.latency.p50_s == pytest.approx(1.5)
    assert report.latency.p90_s == pytest.approx(3.4)
    assert report.latency.p99_s == pytest.approx(3.94)
    assert (report.latency.max_s, report.latency.mean_s) == (4.0, 1.875)
    row = report.row()
    assert row["latency_p90_s"] == pytest.approx(3.4) and json.loads(row["errors_by_kind"])["HTTP 400"] == 1


def test_a_level_without_requests_is_an_error():
    with pytest.raises(ValueError, match="at least one request"):
        summarize_level([], "limited", 1, 1)


def test_error_kinds_name_the_status_or_what_the_retries_gave_up_on():
    assert error_kind(LLMRequestError("HTTP 400: bad", 400, 1)) == "HTTP 400"
    assert error_kind(LLMRequestError("gave up after 5 attempts: ReadTimeout: timed out", attempts=5)) \
        == "gave up: ReadTimeout"
    assert error_kind(LLMRequestError("gave up after 5 attempts: HTTP 503: busy", attempts=5)) \
        == "gave up: HTTP 503"
    assert error_kind(ValueError("x")) == "ValueError"


def _level(base_url: str, limit: int, level: int, n: int):
    cfg = ClientConfig(max_concurrency=limit, backoff_base_s=0.0, max_retries=2)
    with LLMClient(cfg, base_url) as client:
        drawn = [(unit, False) for unit in planned_units(n)]
        records = run_level(client, ccrs_judge(), drawn, "limited", level, limit)
    return summarize_level(records, "limited", level, limit)


def test_the_client_limit_caps_requests_in_flight_whatever_the_offered_concurrency(stub):
    handler, url = stub
    report = _level(url, limit=2, level=8, n=16)
    assert handler.peak == 2
    assert (report.requests, report.errors, report.retries, report.unparsed_replies) == (16, 0, 0, 0)
    assert report.completion_tokens == 16 * 3
    handler.peak = 0
    _level(url, limit=8, level=8, n=16)
    assert handler.peak > 2


def test_retries_and_final_errors_are_recorded_per_request(stub):
    handler, url = stub
    handler.statuses = [503, 200]  # every request's first try is refused, the retry succeeds
    report = _level(url, limit=1, level=1, n=3)
    assert (report.ok, report.errors, report.retries) == (3, 0, 3)
    handler.statuses, handler.hits = [400], 0
    report = _level(url, limit=2, level=2, n=4)
    assert (report.errors, report.error_rate, report.errors_by_kind) == (4, 1.0, {"HTTP 400": 4})
    assert report.throughput_rps == 0.0 and report.latency.p50_s is not None
