"""infra/serving.py's wait for the app it deployed: what it tells while the cluster cannot place the app,
and the one line at ready_timeout_s (no Ray: nothing answers at the endpoint, the demand is given)."""
from __future__ import annotations

import time

import pytest

from infra import serving
from infra.serving import ServingConfig, cpu_app_cpus, wait_for_app
from tests.loopback import JsonHandler, LoopbackServer

DEMAND = "pending demand: tasks/actors 1 x {CPU: 1}; free: CPU 0 of 2"


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(serving, "WAIT_REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(serving, "POLL_S", 0.01)


def _wait(cfg: ServingConfig, told: list[str]) -> str:
    with pytest.raises(TimeoutError) as failed:
        wait_for_app(cfg, cfg.app_base_url(), time.monotonic() + cfg.ready_timeout_s, told.append)
    return str(failed.value)


def test_an_app_the_cluster_cannot_place_fails_in_one_line_at_the_deadline(fast, monkeypatch):
    monkeypatch.setattr(serving.ray_runtime, "pending_demand", lambda: DEMAND)
    told: list[str] = []
    cfg = ServingConfig.for_profile("cpu", port=9, ready_timeout_s=0.5)  # port 9 (discard): no answer
    message = _wait(cfg, told)
    assert told == [f"waiting for resources: {DEMAND}"]  # told once: the demand did not change
    assert message == (
        f"Serve app 'ccrs-llm' not ready within ready_timeout_s=0.5s: waiting for resources the cluster does "
        f"not have free ({DEMAND}; this app asks for 3 logical CPUs); give the cluster more (sizing a head: "
        "docs/cluster.md) or ask for less")


def test_an_app_that_waits_for_nothing_names_what_the_endpoint_said(fast, monkeypatch):
    monkeypatch.setattr(serving.ray_runtime, "pending_demand", lambda: "")
    told: list[str] = []
    message = _wait(ServingConfig.for_profile("cpu", port=9, ready_timeout_s=0.2), told)
    assert not told and len(message.splitlines()) == 1
    assert "not ready within ready_timeout_s=0.2s: ConnectError" in message and "ccrs serve status" in message


class IngressWithoutReplicas(JsonHandler):
    """What Ray Serve LLM's ingress answers while the model's replica is not placed: /models lists the
    configured model, a chat gets no engine (503 here; on Serve it hangs until the client gives up)."""

    def do_GET(self):  # noqa: N802
        self.send_json(200, {"data": [{"id": "smollm2-135m-instruct"}]})

    def do_POST(self):  # noqa: N802
        self.read_json()
        self.send_json(503, {"error": "no replica"})


def test_a_listed_model_that_never_answers_still_names_the_demand(fast, monkeypatch):
    monkeypatch.setattr(serving.ray_runtime, "pending_demand", lambda: DEMAND)
    ingress = LoopbackServer(IngressWithoutReplicas)
    try:
        port = int(ingress.url.rsplit(":", 1)[1])
        message = _wait(ServingConfig.for_profile("cpu", port=port, ready_timeout_s=0.5), [])
    finally:
        ingress.close()
    assert f"waiting for resources the cluster does not have free ({DEMAND}" in message


def test_the_cpu_profile_app_holds_three_logical_cpus():
    """The replica's placement group (the replica actor's CPU + the engine's 1) and the ingress's CPU;
    the real count is checked on a Ray head by tests/pipelines/test_ray_job.py."""
    assert cpu_app_cpus(ServingConfig.for_profile("cpu")) == 3
