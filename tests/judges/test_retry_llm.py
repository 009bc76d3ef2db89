"""Fault injection in front of the REAL server: tests/fault_proxy.py answers HTTP 500, hangs, drops the
connection or returns a non-JSON 200 for a share of the calls and forwards the rest to the CPU vLLM stack."""
import time

import pytest

from tests.fault_proxy import FaultPlan, FaultProxy
from judges.client import ChatRequest, CircuitOpenError, LLMClient, LLMRequestError
from judges.config import ClientConfig

pytestmark = pytest.mark.llm

CLIENT_KIND = {"http_500": "http_500", "timeout": "timeout", "drop": "connection", "garbage": "invalid_body"}


def _hello(model: str) -> ChatRequest:
    return ChatRequest(model, [{"role": "user", "content": "Say hello."}], max_tokens=8)


@pytest.mark.parametrize("kind", ["http_500", "drop", "timeout", "garbage"])
def test_an_outage_of_each_kind_is_retried_until_the_real_server_answers(llm_endpoint, kind):
    plan = FaultPlan(outage=2, outage_kind=kind, hang_s=8.0)
    with FaultProxy(llm_endpoint.base_url, plan) as proxy:
        cfg = ClientConfig(max_retries=3, backoff_base_s=0.05, backoff_max_s=0.2,
                           timeout_s=5.0 if kind == "timeout" else 60)
        with LLMClient(cfg, proxy.base_url) as client:
            result = client.chat(_hello(llm_endpoint.judge_model))
            stats = client.stats
    assert result.attempts == 3 and proxy.stats.injected[kind] == 2 and proxy.stats.forwarded == 1
    assert result.text and result.completion_tokens > 0
    assert stats["errors"] == {CLIENT_KIND[kind]: 2} and stats["retries"] == 2 and stats["ok"] == 1


def test_mixed_faults_on_a_share_of_calls_all_end_answered(llm_endpoint):
    plan = FaultPlan(http_500=0.1, timeout=0.05, drop=0.1, garbage=0.05, hang_s=8.0, seed=3)
    with FaultProxy(llm_endpoint.base_url, plan) as proxy:
        cfg = ClientConfig(max_retries=6, backoff_base_s=0.02, backoff_max_s=0.1, timeout_s=5.0,
                           max_concurrency=4, circuit_failure_threshold=20)
        with LLMClient(cfg, proxy.base_url) as client:
            results = client.map(lambda _: client.chat(_hello(llm_endpoint.judge_model)), range(16))
            stats = client.stats
    injected = proxy.stats.injected
    assert sum(injected.values()) > 0 and all(r.text for r in results)
    assert stats["ok"] == 16 and stats["failed"] == 0
    assert stats["retries"] == sum(injected.values())
    assert {CLIENT_KIND[k]: n for k, n in injected.items() if n} == stats["errors"]


def test_retries_are_bounded(llm_endpoint):
    with FaultProxy(llm_endpoint.base_url, FaultPlan(outage=10)) as proxy:
        cfg = ClientConfig(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.05)
        with (
            LLMClient(cfg, proxy.base_url) as client,
            pytest.raises(LLMRequestError, match="gave up after 3"),
        ):
            client.chat(_hello(llm_endpoint.judge_model))
    assert proxy.stats.received == 3


def test_the_circuit_stops_hammering_a_dead_endpoint_then_a_probe_closes_it(llm_endpoint):
    with FaultProxy(llm_endpoint.base_url, FaultPlan(outage=3)) as proxy:
        cfg = ClientConfig(max_retries=5, backoff_base_s=0.01, backoff_max_s=0.02,
                           circuit_failure_threshold=3, circuit_cooldown_s=1.0)
        with LLMClient(cfg, proxy.base_url) as client:
            for _ in range(10):
                with pytest.raises(CircuitOpenError):
                    client.chat(_hello(llm_endpoint.judge_model))
            assert proxy.stats.received == 3  # 10 calls x 6 attempts would have been 60 requests
            time.sleep(1.1)
            assert client.chat(_hello(llm_endpoint.judge_model)).text  # the half-open probe succeeds
            assert client.breaker.state == "closed"
            stats = client.stats
    assert stats["circuit_opens"] == 1 and stats["short_circuited"] == 10 and stats["failed"] == 10
