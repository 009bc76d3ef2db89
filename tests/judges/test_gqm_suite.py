"""judges/gqm.py: the GQM thesis' five LLM-judged 0-10 metrics, on a real BioASQ question."""
import pytest

from judges.config import JudgeConfig
from judges.gqm import GQM_METRICS, MULTI_HOP, render_prompt
from judges.suite import Sample, get_suite
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient

SUITE = get_suite("gqm")


def _sample(passages: int = 3) -> Sample:
    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    answer = ideal[0] if isinstance(ideal, list) else ideal
    snippets = [s["text"] for s in sample_field(question["snippets"])]
    return Sample(question["id"], "A", question["body"], answer, answer, snippets[:passages])


def test_five_metrics_one_unit_each_on_the_thesis_scale():
    units = SUITE.plan(_sample(), JudgeConfig(), 0, len)
    assert [u.metrics for u in units] == [(name,) for name in GQM_METRICS]
    assert {m.scale for m in GQM_METRICS.values()} == {(0, 10)}
    assert [u.n_context_chunks for u in units] == [0, 0, 3, 3, 3]  # only the context metrics show passages


def test_a_selection_plans_only_its_metrics_and_an_unknown_name_is_a_config_error():
    from judges.config import GqmOptions

    chosen = JudgeConfig(gqm=GqmOptions(metrics=["multi_hop", "attribution"]))
    planned = [u.metrics for u in SUITE.plan(_sample(), chosen, 0, len)]
    assert planned == [("gqm_multi_hop",), ("gqm_attribution",)]
    with pytest.raises(ValueError, match="judge.gqm.metrics: unknown"):
        SUITE.check_config(JudgeConfig(gqm=GqmOptions(metrics=["bleu"])))


def test_a_mark_is_normalized_and_prose_is_asked_again():
    sample, judge = _sample(), JudgeConfig(model="judge-m")
    unit = next(u for u in SUITE.plan(sample, judge, 0, len) if u.metrics == ("gqm_answer_correctness",))
    client = FakeLLMClient(["I would say seven out of ten.", "7"])
    (judgment,) = SUITE.evaluate(client, unit, judge, None)
    assert (judgment.status, judgment.llm_score, judgment.score, judgment.attempts) == ("ok", 7, 0.7, 2)
    assert judgment.prompt_version == "v1" and judgment.suite == "gqm"
    first = client.prompts[0]
    assert f"<ground_truth>\n{sample.ground_truth}" in first and "<passages>" not in first
    assert "0 to 10" in client.prompts[1]  # the re-ask


def test_each_unit_is_the_one_request_it_sends():
    sample, judge = _sample(), JudgeConfig(model="judge-m")
    for unit in SUITE.plan(sample, judge, 0, len):
        request = SUITE.single_request(unit, judge)
        client = FakeLLMClient("6")
        (judgment,) = SUITE.evaluate(client, unit, judge, None)
        assert client.requests == [request] and judgment.llm_score == 6
    (hop,) = [u for u in SUITE.plan(_sample(1), judge, 0, len) if u.metrics == (MULTI_HOP,)]
    assert SUITE.single_request(hop, judge) is None


def test_multi_hop_is_skipped_below_two_passages_without_a_call():
    judge = JudgeConfig()
    unit = next(u for u in SUITE.plan(_sample(1), judge, 0, len) if u.metrics == (MULTI_HOP,))
    client = FakeLLMClient("5")
    (judgment,) = SUITE.evaluate(client, unit, judge, None)
    assert judgment.status == "skipped" and judgment.score is None
    assert "2 retrieved passages" in judgment.reason
    assert client.requests == []


def test_an_unusable_reply_is_a_recorded_failure():
    judge = JudgeConfig(max_reasks=1)
    unit = SUITE.plan(_sample(), judge, 0, len)[0]
    (judgment,) = SUITE.evaluate(FakeLLMClient("eleven"), unit, judge, None)
    assert judgment.status == "failed" and judgment.score is None
    assert judgment.reason.endswith("no number in reply")


@pytest.mark.parametrize("name", list(GQM_METRICS))
def test_each_prompt_shows_its_declared_inputs_in_order(name):
    spec, sample = GQM_METRICS[name], _sample(2)
    prompt = render_prompt(spec, sample, sample.context, "v1")
    tags = {"question": "<question>", "ground_truth": "<ground_truth>", "response": "<response>",
            "context": "<passages>"}
    positions = [prompt.index(tags[field]) for field in spec.inputs]
    assert positions == sorted(positions)
    assert all(tags[field] not in prompt for field in tags if field not in spec.inputs)
