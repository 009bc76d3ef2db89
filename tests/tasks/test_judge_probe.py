"""The start-up probe of the judge endpoint (tasks.judge.probe_judge): `scoring: expected` against a judge
that is not vLLM fails at once with one clear line, not as integer fallbacks on every judgment.

The endpoints "that are not vLLM" are the real CPU vLLM server behind a loopback proxy that behaves as other
OpenAI-compatible APIs do: one rejects vLLM's extra chat arguments with a 400, as the OpenAI API does for an
unrecognized request argument; one answers without log-probabilities, as servers that ignore `logprobs` do."""
from __future__ import annotations

import httpx
import pytest

from judges.config import ClientConfig, JudgeConfig
from judges.scoring import ScoringUnsupportedError
from tasks.judge import probe_judge
from tests.loopback import JsonHandler, LoopbackServer

pytestmark = pytest.mark.llm
VLLM_ONLY_ARGUMENTS = ("continue_final_message", "add_generation_prompt")


class OtherApiProxy(LoopbackServer):
    def __init__(self, upstream: str, behaviour: str):
        class Handler(JsonHandler):
            def do_GET(self):  # noqa: N802
                response = httpx.get(f"{upstream}{self.path.removeprefix('/v1')}", timeout=60)
                self.send_json(response.status_code, response.content)

            def do_POST(self):  # noqa: N802
                body = self.read_json()
                unknown = [key for key in VLLM_ONLY_ARGUMENTS if key in body]
                if behaviour == "rejects_vllm_arguments" and unknown:
                    message = f"Unrecognized request argument supplied: {unknown[0]}"
                    self.send_json(400, {"error": {"message": message, "type": "invalid_request_error"}})
                    return
                response = httpx.post(f"{upstream}{self.path.removeprefix('/v1')}", json=body, timeout=120)
                if behaviour == "no_logprobs" and response.status_code == 200:
                    reply = response.json()
                    for choice in reply.get("choices", []):
                        choice["logprobs"] = None
                    self.send_json(200, reply)
                    return
                self.send_json(response.status_code, response.content)

        super().__init__(Handler, "/v1")


@pytest.mark.parametrize("behaviour, problem", [
    ("rejects_vllm_arguments", "refused continue_final_message"),
    ("no_logprobs", "returned no token log-probabilities"),
])
def test_expected_scoring_against_a_judge_that_is_not_vllm_fails_at_start_up(llm_endpoint, behaviour,
                                                                             problem):
    proxy = OtherApiProxy(llm_endpoint.base_url, behaviour)
    judge = JudgeConfig(model=llm_endpoint.judge_model, scoring="expected")
    try:
        with pytest.raises(ScoringUnsupportedError) as error:
            probe_judge(["ccrs"], judge, ClientConfig(), proxy.url)
    finally:
        proxy.close()
    message = str(error.value)
    assert problem in message and "set judge.scoring: integer" in message and "\n" not in message


def test_the_real_vllm_judge_passes_and_integer_scoring_is_not_probed(llm_endpoint):
    judge = JudgeConfig(model=llm_endpoint.judge_model, scoring="expected")
    probe_judge(["ccrs"], judge, ClientConfig(), llm_endpoint.base_url)  # no error
    nowhere = "http://127.0.0.1:9/v1"  # nothing listens: a probe would fail
    probe_judge(["ccrs"], judge.model_copy(update={"scoring": "integer"}), ClientConfig(), nowhere)
    probe_judge(["grouse"], judge, ClientConfig(), nowhere)  # GroUSE scores integers only


def test_the_endpoint_reports_the_weights_it_serves(llm_endpoint):
    from infra.readiness import endpoint_identity

    identity = endpoint_identity(llm_endpoint.base_url, llm_endpoint.judge_model)
    assert identity["id"] == llm_endpoint.judge_model
    # vLLM's own server names the loaded weights (`root`); Ray Serve LLM's card has its `metadata`
    assert identity.get("root") or identity["metadata"]["model_id"] == llm_endpoint.judge_model
    assert endpoint_identity(llm_endpoint.base_url, "no-such-model") == {}
