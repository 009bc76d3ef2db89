"""A judge at an endpoint the user names, with no config of theirs (issue 33 item 2): the defaults that fit
an unknown OpenAI-compatible judge (judges.config.OPENAI_COMPATIBLE_JUDGE), `--scoring`, and the request
bodies such a judge receives. No server: the commands' options, the config and the suites' requests."""
from __future__ import annotations

import argparse

import pytest

from judges.client import VLLM_ONLY_FIELDS, LLMClient, LLMRequestError, response_format_refusal
from judges.config import IF_ACCEPTED, OPENAI_COMPATIBLE_JUDGE, ClientConfig, JudgeConfig
from judges.suite import Sample, get_suite, suites
from pipelines.config import judge_overrides, load_config
from tasks.judge import judge_settings_line
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient
from tests.tasks.test_outputs import EXAMPLE

URL = "https://judge.example/v1"
# the request fields of OpenAI's chat completions API that the project's judges may send
OPENAI_CHAT_FIELDS = {"model", "messages", "temperature", "max_tokens", "seed", "response_format", "top_p",
                      "logprobs", "top_logprobs"}


def test_an_endpoint_of_ones_own_without_a_config_gets_the_unknown_judge_defaults():
    profile = {f"judge.{key}": value for key, value in OPENAI_COMPATIBLE_JUDGE.settings.items()}
    assert judge_overrides(None, URL) == profile
    assert judge_overrides(None, URL, "expected") == {**profile, "judge.scoring": "expected"}
    assert judge_overrides("mine.yaml", URL) == {}  # the user's config decides
    assert judge_overrides(None, None) == {}  # the demo's own judge keeps the demo's settings
    assert judge_overrides("mine.yaml", None, "integer") == {"judge.scoring": "integer"}
    demo = load_config(None).judge
    assert (demo.scoring, demo.structured_output) == ("expected", True)
    fitted = load_config(None, {"judge.base_url": URL, **judge_overrides(None, URL)}).judge
    assert (fitted.scoring, fitted.structured_output) == ("integer", IF_ACCEPTED)


@pytest.mark.parametrize("command", ["run", "evaluate", "nightly"])
def test_run_evaluate_and_nightly_take_scoring(command):
    from pipelines import evaluate_cmd, nightly_cmd, options, run_cmd

    module = {"run": run_cmd, "evaluate": evaluate_cmd, "nightly": nightly_cmd}[command]
    parser = argparse.ArgumentParser()
    module.add_arguments(parser, command)
    files = ["answers.jsonl"] if command == "evaluate" else []
    args = parser.parse_args([*files, "--scoring", "integer", "--judge-base-url", URL])
    assert args.scoring == "integer" and args.judge_base_url == URL
    with pytest.raises(SystemExit):
        parser.parse_args([*files, "--scoring", "logits"])
    if command != "evaluate":
        overrides = options.config_overrides(args)
        assert overrides["judge.scoring"] == "integer"
        assert overrides["judge.structured_output"] == IF_ACCEPTED


def test_evaluate_and_the_python_api_fit_the_judge_the_same_way():
    from pipelines.evaluate import prepare_evaluation

    def judge(**options):
        return prepare_evaluation(EXAMPLE, limit=2, out="unused", **options)[0].judge

    hosted = judge(judge_base_url=URL, judge_model="any-judge")
    assert (hosted.model, hosted.base_url, hosted.scoring, hosted.structured_output) == (
        "any-judge", URL, "integer", IF_ACCEPTED)
    assert judge(judge_base_url=URL, judge_model="m", scoring="expected").scoring == "expected"
    assert judge(scoring="integer").structured_output is True  # the demo's own judge: only scoring changes


def _sample() -> Sample:
    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    answer = ideal[0] if isinstance(ideal, list) else str(ideal)
    snippets = [s["text"] for s in sample_field(question["snippets"])][:3]
    return Sample(question["id"], "A", question["body"], answer, answer, snippets)


@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("name", list(suites()))
def test_an_integer_judge_sends_only_openai_request_fields(name, structured):
    """Whatever the probe decides, every request of every suite (re-asks included: the fake's replies are
    unusable) carries only fields of OpenAI's chat completions, none of vLLM's own."""
    judge = JudgeConfig(scoring="integer", structured_output=structured)
    suite, fake = get_suite(name), FakeLLMClient("I cannot say.")
    for unit in suite.plan(_sample(), judge, 0, lambda text: len(text) // 4):
        suite.evaluate(fake, unit, judge, None)
    with LLMClient(ClientConfig(), URL) as client:
        bodies = [client.payload(request) for request in fake.requests]
    assert bodies
    for body in bodies:
        assert set(body) <= OPENAI_CHAT_FIELDS and not set(VLLM_ONLY_FIELDS) & set(body), sorted(body)
        assert ("response_format" in body) <= structured


def test_the_response_format_probe_turns_structured_output_on_only_where_the_schema_is_followed():
    follows = FakeLLMClient('{"legs": 4}')
    assert response_format_refusal(follows, "m") is None
    (request,) = follows.requests
    assert request.extra_body["response_format"]["type"] == "json_schema"
    assert "outside the schema" in response_format_refusal(FakeLLMClient("Four legs."), "m")
    refused = LLMRequestError("HTTP 400: response_format is not supported", 400)
    assert "HTTP 400" in response_format_refusal(FakeLLMClient([refused]), "m")
    for down in (LLMRequestError("HTTP 503: busy", 503), LLMRequestError("ConnectError: refused")):
        with pytest.raises(LLMRequestError):  # an endpoint that is down is not one that refuses
            response_format_refusal(FakeLLMClient([down]), "m")


def test_the_settings_line_says_what_the_judge_got():
    judge = JudgeConfig(scoring="integer", structured_output=True, context_window=8192)
    on = judge_settings_line(judge, None)
    assert on == ("judge: settings for an OpenAI-compatible endpoint: integer marks, no vLLM-only request "
                  "field, a window of 8,192 tokens, structured output through OpenAI's response_format (the "
                  "endpoint accepts it); --scoring or --config choose others")
    off = judge_settings_line(JudgeConfig(structured_output=False), "HTTP 400: unknown field")
    assert "free-text marks (the endpoint refused response_format: HTTP 400: unknown field)" in off
    assert "\n" not in on + off
