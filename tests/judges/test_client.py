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
    with LLMClient(cfg, "http://127.0.0.1:9/v1") as client, pytest.raises(LLMRequestError, match="gave up after 3"):
        client.chat(ChatRequest("m", [{"role": "user", "content": "hi"}]))


def test_base_url_required():
    with pytest.raises(ValueError, match="base URL"):
        LLMClient(ClientConfig())
