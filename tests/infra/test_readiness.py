"""infra/readiness.py: the one readiness poll (the OpenAI /models route), against a tiny local server."""
from __future__ import annotations

import pytest

from infra.readiness import (
    EndpointIdentityError,
    already_serving,
    endpoint_identity,
    served_models,
    wait_until_ready,
)
from tests.loopback import JsonHandler, LoopbackServer


@pytest.fixture
def models_server():
    """An endpoint whose /models answer the test sets: (status, model ids); records the request headers."""
    state = {"status": 200, "models": ["judge"], "headers": [], "busy": 0}

    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            state["headers"].append(dict(self.headers))
            entries = [{"id": m, "root": f"/weights/{m}"} for m in state["models"]]
            status = state["status"] if self.path == "/v1/models" else 404
            if state["busy"]:  # a server still busy with a killed run's requests
                state["busy"] -= 1
                status = 503
            self.send_json(status, {"data": entries})

    server = LoopbackServer(Handler, "/v1")
    try:
        yield server.url, state
    finally:
        server.close()


def test_ready_endpoint_returns_the_served_models(models_server):
    url, state = models_server
    assert wait_until_ready(url + "/", 5, ["judge"]) == ["judge"]
    assert served_models(url) == (["judge"], "")
    assert already_serving(url, ["judge"]) and not already_serving(url, ["judge", "reader"])


def test_missing_model_times_out_naming_what_it_waits_for(models_server):
    url, _ = models_server
    expected = r"not ready after 0s \(models served \['judge'\], waiting for \['reader'\]\)"
    with pytest.raises(TimeoutError, match=expected):
        wait_until_ready(url, 0, ["judge", "reader"])


def test_http_error_and_no_server(models_server):
    url, state = models_server
    state["status"] = 503
    with pytest.raises(TimeoutError, match=r"LLM endpoint .* not ready after 0s \(HTTP 503\)"):
        wait_until_ready(url, 0)
    assert served_models(url) == (None, "HTTP 503") and not already_serving(url, [])
    with pytest.raises(TimeoutError, match=r"\(ConnectError: "):
        wait_until_ready("http://127.0.0.1:9/v1", 0)


def test_api_key_is_sent_from_the_named_env_var(models_server, monkeypatch):
    url, state = models_server
    monkeypatch.setenv("CCRS_T_READY_KEY", "sk-ready-123")
    wait_until_ready(url, 5, api_key_env="CCRS_T_READY_KEY")
    served_models(url)  # no key env: no header
    assert state["headers"][0].get("Authorization") == "Bearer sk-ready-123"
    assert "Authorization" not in state["headers"][1]


def test_identity_waits_out_a_busy_server_and_never_guesses(models_server):
    url, state = models_server
    state["busy"] = 2
    assert endpoint_identity(url, "judge", timeout_s=1) == {"id": "judge", "root": "/weights/judge"}
    assert endpoint_identity(url, "no-such-model") == {}  # it answered: nothing to tell apart
    state["busy"] = 3
    no_answer = r"GET .*/v1/models gave no answer in 3 tries \(HTTP 503\)"
    with pytest.raises(EndpointIdentityError, match=no_answer):
        endpoint_identity(url, "judge", timeout_s=1, attempts=3)
