"""Load test: percentile and report math on hand-computed numbers, the client cap against a counting HTTP
stub, outputs, and one small real run of `ccrs load-test` against the CPU stack."""
from __future__ import annotations

import json
import threading
import time
from typing import ClassVar

import pytest

from judges.client import LLMClient, LLMRequestError
from judges.config import CcrsOptions, ClientConfig, JudgeConfig
from judges.suite import Sample, get_suite
from pipelines.tools.load_test import (
    LatencySummary,
    LevelReport,
    LoadTestConfig,
    LoadTestError,
    LoadTestResult,
    RequestPool,
    RequestRecord,
    error_kind,
    latency_summary,
    run_level,
    run_load_test,
    summarize_level,
    write_outputs,
)
from tests.loopback import JsonHandler, LoopbackServer

# --- math ---------------------------------------------------------------------------------------------------


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


def _record(start: float, end: float, ok: bool = True, tokens: int = 0, attempts: int = 1,
            kind: str | None = None, repeated: bool = False, parsed: bool = True) -> RequestRecord:
    return RequestRecord(mode="limited", level=4, client_limit=2, index=0, request_id="q/gold-w0/CC", ok=ok,
                         latency_s=end - start, start_s=start, end_s=end, attempts=attempts,
                         retries=attempts - 1, prompt_tokens=100 if ok else 0, completion_tokens=tokens,
                         parsed=ok and parsed, repeated=repeated, error_kind=kind)


def test_level_report_on_hand_computed_numbers():
    records = [
        _record(0.0, 1.0, tokens=10),                                     # latency 1.0
        _record(0.5, 2.5, tokens=20, attempts=2, parsed=False),           # 2.0, one retry
        _record(1.0, 1.5, ok=False, attempts=1, kind="HTTP 400"),         # 0.5
        _record(0.2, 4.2, ok=False, attempts=5, kind="gave up: ReadTimeout", repeated=True),  # 4.0
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


def test_config_rejects_levels_below_one():
    with pytest.raises(ValueError, match="levels must be >= 1"):
        LoadTestConfig(levels=[1, 0])
    with pytest.raises(ValueError):
        LoadTestConfig(levels=[])


# --- requests, pool ---------------------------------------------------------------------------------------

def _judge(structured: bool = True) -> JudgeConfig:
    return JudgeConfig(structured_output=structured, cache=False, ccrs=CcrsOptions(metrics=["CC"]))


def _tasks(n: int, structured: bool = True) -> list:
    judge = _judge(structured)
    tasks = []
    for i in range(n):
        sample = Sample(f"q{i}", "gold-w0", f"question {i}?", "answer.", "answer.", [f"snippet {i}"])
        tasks += get_suite("ccrs").plan(sample, judge, ClientConfig().seed, lambda text: len(text) // 3)
    return tasks


def test_pool_shuffles_deterministically_and_counts_repeats_after_it_wraps():
    tasks = _tasks(5)
    pool = RequestPool(tasks, seed=3)
    first, second = pool.take(4), pool.take(4)
    assert [repeated for _, repeated in first] == [False] * 4
    assert [repeated for _, repeated in second] == [False, True, True, True]
    assert {t.sample.query_id for t, _ in first + second[:1]} == {f"q{i}" for i in range(5)}
    assert [t.id for t, _ in RequestPool(tasks, seed=3).take(5)] == [t.id for t, _ in first + second[:1]]
    with pytest.raises(LoadTestError, match="no judge requests"):
        RequestPool([])


# --- the client cap, against a counting HTTP stub -----------------------------------------------------------

class _Stub(JsonHandler):
    """Chat completions that take `delay_s`; counts requests in flight and answers `statuses` in turn."""

    lock = threading.Lock()
    in_flight = peak = hits = 0
    delay_s = 0.05
    statuses: ClassVar[list[int]] = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
            status = cls.statuses[cls.hits % len(cls.statuses)] if cls.statuses else 200
            cls.hits += 1
        time.sleep(cls.delay_s)
        body = {"choices": [{"message": {"content": '{"score": 50}'}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3}} if status == 200 else {"error": "busy"}
        with cls.lock:
            cls.in_flight -= 1
        self.send_json(status, body)


@pytest.fixture
def stub():
    handler = type("Stub", (_Stub,), {"statuses": [], "in_flight": 0, "peak": 0, "hits": 0})
    server = LoopbackServer(handler, "/v1")
    yield handler, server.url
    server.close()


def _level(base_url: str, limit: int, level: int, n: int):
    cfg = ClientConfig(max_concurrency=limit, backoff_base_s=0.0, max_retries=2)
    with LLMClient(cfg, base_url) as client:
        records = run_level(client, _judge(), [(t, False) for t in _tasks(n)], "limited", level, limit)
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


def test_whole_test_runs_each_level_limited_then_raised_on_fresh_requests(stub):
    handler, url = stub
    cfg = LoadTestConfig(levels=[2, 4], requests_per_level=6, compare_unlimited=True, chunks_per_sample=2)
    judge = JudgeConfig(model="stub-model", structured_output=True, cache=False)  # no tokenizer: estimate
    result = run_load_test(cfg, judge, ClientConfig(max_concurrency=2, backoff_base_s=0.0), url)
    assert [(r.mode, r.level, r.client_limit) for r in result.levels] == [
        ("limited", 2, 2), ("limited", 4, 2), ("unlimited", 2, 2), ("unlimited", 4, 4)]
    assert {(r.mode, r.level) for r in result.records[6:12]} == {("unlimited", 2)}  # right after limited L=2
    assert handler.hits == 1 + 4 * 6 and len(result.records) == 24 and len(result.warmup) == 1
    assert result.distinct_requests == 25 and not any(r.repeated for r in result.records)
    assert all(r.errors == 0 and r.started_at for r in result.levels)


def test_outputs_are_written(tmp_path):
    records = [_record(0.0, 1.0, tokens=5), _record(0.0, 2.0, tokens=5)]
    levels = [summarize_level(records, mode, level, 2)
              for mode in ("limited", "unlimited") for level in (1, 2)]
    result = LoadTestResult("m", "http://x/v1", {"levels": [1, 2]},
                            {"max_concurrency": 2, "api_key_env": "K"},
                            {"cpu_cores": 2}, 10, [], levels, records, 3.0)
    paths = write_outputs(result, tmp_path / "out")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths.values())
    data = json.loads(paths["json"].read_text())
    assert len(data["levels"]) == 4 and "api_key_env" not in data["client"]
    assert paths["csv"].read_text().splitlines()[0].startswith("mode,level,client_limit,requests")
    assert isinstance(levels[0], LevelReport)


# --- real run -----------------------------------------------------------------------------------------------

@pytest.mark.llm
def test_load_test_command_against_the_cpu_stack(tmp_path, llm_endpoint, capsys):
    from pipelines.cli import main

    code = main(["load-test", "--levels", "2,8", "--requests", "8", "--max-concurrency", "4",
                 "--chunks-per-sample", "1", "--llm-base-url", llm_endpoint.base_url,
                 "--judge-model", llm_endpoint.judge_model, "--out", str(tmp_path / "lt")])
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "lt" / "load_test.json").read_text())
    assert [(r["mode"], r["level"], r["client_limit"]) for r in data["levels"]] == [("limited", 2, 4),
                                                                                   ("limited", 8, 4)]
    for level in data["levels"]:
        assert (level["requests"], level["ok"], level["errors"], level["error_rate"]) == (8, 8, 0, 0.0)
        assert level["repeated_requests"] == 0 and level["completion_tokens"] > 0
        lat = level["latency"]
        assert 0 < lat["p50_s"] <= lat["p90_s"] <= lat["p99_s"] <= lat["max_s"]
        assert level["throughput_rps"] > 0
    assert len(data["warmup"]) == 1 and data["distinct_requests"] >= 17
    for name in ("load_test.csv", "load_test_requests.csv", "load_test.png"):
        assert (tmp_path / "lt" / name).stat().st_size > 0
    assert "| limited" in capsys.readouterr().out
