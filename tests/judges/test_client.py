import random

import pytest

from judges.client import ChatRequest, LLMClient, backoff_delay
from judges.config import ClientConfig


def test_backoff_is_bounded_exponential_with_jitter():
    rng = random.Random(0)
    delays = [backoff_delay(n, 0.5, 4.0, rng) for n in range(8) for _ in range(50)]
    assert all(0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 100
    assert max(backoff_delay(0, 0.5, 4.0, rng) for _ in range(100)) <= 0.5


def test_every_request_carries_the_seed_and_no_key_in_body(monkeypatch):
    monkeypatch.setenv("CCRS_LLM_API_KEY", "secret-key")
    with LLMClient(ClientConfig(seed=7), "http://127.0.0.1:9/v1") as client:
        body = client.payload(ChatRequest("m", [{"role": "user", "content": "hi"}], max_tokens=4))
        assert body["seed"] == 7 and body["temperature"] == 0.0 and body["max_tokens"] == 4
        assert "secret-key" not in str(body)
        assert client._http.headers["Authorization"] == "Bearer secret-key"


def test_unreachable_server_fails_after_bounded_retries():
    from judges.client import LLMRequestError

    cfg = ClientConfig(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.02, timeout_s=2)
    with (
        LLMClient(cfg, "http://127.0.0.1:9/v1") as client,
        pytest.raises(LLMRequestError, match="gave up after 3"),
    ):
        client.chat(ChatRequest("m", [{"role": "user", "content": "hi"}]))


def test_base_url_required():
    with pytest.raises(ValueError, match="base URL"):
        LLMClient(ClientConfig())


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_circuit_breaker_opens_after_threshold_and_lets_one_probe_through():
    from judges.client import CircuitBreaker

    clock = FakeClock()
    breaker = CircuitBreaker(threshold=3, cooldown_s=10.0, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow() and breaker.opens == 1
    clock.now = 10.0
    assert breaker.allow() and not breaker.allow()  # one probe only
    breaker.record_failure()  # the probe failed: open again for another cooldown
    assert breaker.state == "open" and breaker.opens == 2 and not breaker.allow()
    clock.now = 20.0
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed" and breaker.allow()


def test_a_success_resets_the_consecutive_failure_count():
    from judges.client import CircuitBreaker

    breaker = CircuitBreaker(threshold=2, cooldown_s=1.0, clock=FakeClock())
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state == "closed"


def test_client_stats_merge_adds_counts_and_error_kinds():
    from judges.client import ClientStats

    merged = ClientStats.merge([
        {"calls": 2, "ok": 1, "failed": 1, "attempts": 4, "retries": 2, "errors": {"http_500": 2}},
        {"calls": 1, "ok": 1, "attempts": 2, "retries": 1, "circuit_opens": 1,
         "errors": {"http_500": 1, "timeout": 1}},
    ])
    assert merged["calls"] == 3 and merged["attempts"] == 6 and merged["circuit_opens"] == 1
    assert merged["errors"] == {"http_500": 3, "timeout": 1}


def test_fair_slots_cap_concurrency_and_serve_waiters_in_arrival_order():
    import threading
    import time

    from judges.client import FairSlots

    slots = FairSlots(2)
    slots.acquire()
    slots.acquire()
    order, started = [], []

    def waiter(name):
        started.append(name)
        slots.acquire()
        order.append(name)  # keeps its slot: the test releases slots one at a time

    threads = []
    for name in "abc":
        thread = threading.Thread(target=waiter, args=(name,))
        thread.start()
        threads.append(thread)
        while len(started) < len(threads):
            time.sleep(0.001)
        time.sleep(0.02)  # the waiter is now queued
    assert order == []  # both slots are held
    for expected in (["a"], ["a", "b"], ["a", "b", "c"]):
        slots.release()
        deadline = time.monotonic() + 5
        while order != expected and time.monotonic() < deadline:
            time.sleep(0.001)
        assert order == expected
    for thread in threads:
        thread.join(timeout=5)


def test_prefix_cached_prompt_tokens_are_read_from_vllm_usage_details():
    from judges.client import cached_prompt_tokens

    # the usage block of a vLLM chat completion with enable_prompt_tokens_details
    body = {"choices": [{"message": {"content": "42"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 6542, "completion_tokens": 2, "total_tokens": 6544,
                      "prompt_tokens_details": {"cached_tokens": 6400}}}
    result = LLMClient._result(body, 1)
    assert (result.prompt_tokens, result.cached_tokens) == (6542, 6400)
    assert cached_prompt_tokens({"prompt_tokens": 10}) == 0  # a server that does not report it
    assert cached_prompt_tokens({"prompt_tokens_details": None}) == 0


def test_reset_gives_fresh_stats_and_a_closed_circuit():
    client = LLMClient(ClientConfig(circuit_failure_threshold=1), "http://127.0.0.1:9/v1")
    client._count(calls=2, retries=1)
    client._error("timeout")
    client.breaker.record_failure()
    client.reset()
    assert client.stats["calls"] == 0 and client.stats["errors"] == {} and client.breaker.state == "closed"
    client.close()
