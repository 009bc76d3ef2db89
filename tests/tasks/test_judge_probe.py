"""The start-up probe of the judge endpoint (tasks.judge.probe_judge): `scoring: expected` against a judge
that is not vLLM fails at once with one clear line, not as integer fallbacks on every judgment.

The endpoints "that are not vLLM" are the real CPU vLLM server behind a loopback proxy that behaves as other
OpenAI-compatible APIs do: one rejects vLLM's extra chat arguments with a 400, as the OpenAI API does for an
unrecognized request argument; one answers without log-probabilities, as servers that ignore `logprobs` do."""
from __future__ import annotations

import pytest

from judges.client import VLLM_ONLY_FIELDS
from judges.config import ClientConfig, JudgeConfig
from judges.scoring import ScoringUnsupportedError
from tasks.judge import probe_judge
from tests.loopback import JudgeProxy

pytestmark = pytest.mark.llm


def probe_refusal(proxy: JudgeProxy, judge: JudgeConfig) -> str:
    """The one line probe_judge stops with at the proxy (the proxy closed after)."""
    try:
        with pytest.raises(ScoringUnsupportedError) as error:
            probe_judge(["ccrs"], judge, ClientConfig(), proxy.url)
    finally:
        proxy.close()
    return str(error.value)


def other_api_proxy(upstream: str, behaviour: str) -> JudgeProxy:
    if behaviour == "rejects_vllm_arguments":
        return JudgeProxy(upstream, refused=VLLM_ONLY_FIELDS)
    return JudgeProxy(upstream, logprobs=False)


@pytest.mark.parametrize("behaviour, problem", [
    ("rejects_vllm_arguments", "refused continue_final_message"),
    ("no_logprobs", "returned no token log-probabilities"),
])
def test_expected_scoring_against_a_judge_that_is_not_vllm_fails_at_start_up(llm_endpoint, behaviour,
                                                                             problem):
    judge = JudgeConfig(model=llm_endpoint.judge_model, scoring="expected")
    message = probe_refusal(other_api_proxy(llm_endpoint.base_url, behaviour), judge)
    assert problem in message and "set judge.scoring: integer" in message and "\n" not in message


def test_batched_continuations_against_a_judge_without_vllms_fields_fail_at_start_up(llm_endpoint):
    """expected.continuation: batched asks for vLLM's return_prompt_text (and then its completions with a list
    of prompts): an endpoint refusing the field fails in one line that names the way back to chat."""
    judge = JudgeConfig(model=llm_endpoint.judge_model, scoring="expected",
                        expected={"continuation": "batched"})
    message = probe_refusal(JudgeProxy(llm_endpoint.base_url, refused=("return_prompt_text",)), judge)
    assert "return_prompt_text" in message and "set judge.expected.continuation: chat" in message
    probe_judge(["ccrs"], judge, ClientConfig(), llm_endpoint.base_url)  # the real vLLM passes


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
