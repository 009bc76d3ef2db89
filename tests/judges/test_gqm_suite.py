"""judges/gqm.py: the GQM thesis' five LLM-judged 0-10 metrics, and Context Precision (eq. 5.1) and
Faithfulness (eq. 5.7) from several calls, on a real BioASQ question."""
import pytest

from judges.config import JudgeConfig
from judges.gqm import (
    CONTEXT_PRECISION,
    FAITHFULNESS,
    GQM_METRICS,
    MARK_METRICS,
    MULTI_HOP,
    context_precision,
    length_weighted,
    render_prompt,
)
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
    from judges.config import GqmOptions

    units = SUITE.plan(_sample(), JudgeConfig(), 0, len)
    default = [f"gqm_{name}" for name in GqmOptions().metrics]
    assert [u.metrics for u in units] == [(name,) for name in default]
    assert set(default) < set(MARK_METRICS)  # gqm_factual_consistency is a mark too, selected by name
    assert {GQM_METRICS[m].scale for m in MARK_METRICS} == {(0, 10)}
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


@pytest.mark.parametrize("name", MARK_METRICS)
def test_each_prompt_shows_its_declared_inputs_in_order(name):
    spec, sample = GQM_METRICS[name], _sample(2)
    prompt = render_prompt(spec, sample, sample.context, "v1")
    tags = {"question": "<question>", "ground_truth": "<ground_truth>", "response": "<response>",
            "context": "<passages>"}
    positions = [prompt.index(tags[field]) for field in spec.inputs]
    assert positions == sorted(positions)
    assert all(tags[field] not in prompt for field in tags if field not in spec.inputs)


# --- eq. 5.1 and eq. 5.7 ------------------------------------------------------------------------------

@pytest.mark.parametrize("relevant,expected", [
    ([True, False, True, False, False], (1 / 1 + 2 / 3) / 2),  # P@1 = 1, P@3 = 2/3, two relevant
    ([False, True, True], (1 / 2 + 2 / 3) / 2),
    ([False, False, False, False, True], 1 / 5),
    ([True, True, True], 1.0),
    ([False, False], 0.0),  # no relevant passage: 0, as the thesis reports
    ([], 0.0),
])
def test_context_precision_is_eq_5_1(relevant, expected):
    assert context_precision(relevant) == pytest.approx(expected)


def test_faithfulness_weights_each_claim_by_its_word_count():
    claims = ["Aspirin inhibits COX-1.", "It was first synthesised in 1897 by Felix Hoffmann."]  # 3, 9 words
    assert length_weighted(claims, [1.0, 0.2]) == pytest.approx((3 * 1.0 + 9 * 0.2) / 12)
    assert length_weighted(["one claim only"], [0.7]) == pytest.approx(0.7)


def _select(*names: str) -> JudgeConfig:
    from judges.config import GqmOptions

    return JudgeConfig(model="judge-m", max_reasks=1, gqm=GqmOptions(metrics=list(names)))


def test_context_precision_asks_one_verdict_per_passage_in_rank_order():
    sample, judge = _sample(3), _select("context_precision")
    (unit,) = SUITE.plan(sample, judge, 0, len)
    assert unit.metrics == (CONTEXT_PRECISION,) and unit.n_context_chunks == 3
    assert SUITE.single_request(unit, judge) is None  # several calls
    client = FakeLLMClient(["0", "Maybe, in part.", "1", "relevant"])
    (judgment,) = SUITE.evaluate(client, unit, judge, None)
    assert judgment.status == "ok" and judgment.attempts == 4  # one re-ask for the prose reply
    assert judgment.score == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert '"relevant": [false, true, true]' in judgment.detail
    first = client.prompts[0]
    assert f"<question>\n{sample.question}" in first and f"<passage>\n{sample.context[0]}" in first
    assert sample.context[1] not in first and sample.response not in first  # one passage, no answer
    assert "1 (relevant) or 0 (not relevant)" in client.prompts[2]  # the re-ask


@pytest.mark.parametrize("reply,verdict", [
    ("1", True), ("0.", False), ("relevant", True), ("IRRELEVANT", False),
    ("The passage is irrelevant to the question.", False),  # the CPU judge's reply in the all-suites run
    ("Not relevant: it is about mice.", False), ("The passage is relevant; it names the gene.", True),
])
def test_a_verdict_is_the_digit_or_one_unambiguous_verdict_word(reply, verdict):
    from judges.gqm import parse_relevance

    assert parse_relevance(reply).ok and parse_relevance(reply).value is verdict


@pytest.mark.parametrize("reply", ["", "2", "Maybe, in part.", "It is not irrelevant.",
                                   "Relevant, though it does not name the gene.", "relevant or irrelevant"])
def test_an_ambiguous_relevance_reply_is_asked_again(reply):
    from judges.gqm import parse_relevance

    assert not parse_relevance(reply).ok


def test_context_precision_fails_whole_on_one_unusable_verdict_and_is_not_zeroed_by_an_empty_answer():
    sample, judge = _sample(2), _select("context_precision")
    (unit,) = SUITE.plan(sample, judge, 0, len)
    (judgment,) = SUITE.evaluate(FakeLLMClient(["relevant", "maybe", "perhaps"]), unit, judge, None)
    assert judgment.status == "failed" and judgment.score is None
    assert judgment.reason.startswith("passage 2: invalid after 1 re-asks")
    (empty,) = SUITE.not_judged(sample, judge, "empty_response", "empty")
    assert empty.score is None and "not judged" in empty.reason


def test_faithfulness_extracts_claims_scores_each_and_weights_by_length():
    sample, judge = _sample(2), _select("faithfulness")
    (unit,) = SUITE.plan(sample, judge, 0, len)
    assert unit.metrics == (FAITHFULNESS,) and unit.n_context_chunks == 2
    claims = "1. Aspirin inhibits COX-1.\n2. It was first synthesised in 1897 by Felix Hoffmann."
    client = FakeLLMClient([claims, "10", "2"])
    (judgment,) = SUITE.evaluate(client, unit, judge, None)
    assert judgment.status == "ok" and judgment.attempts == 3
    assert judgment.score == pytest.approx((3 * 1.0 + 9 * 0.2) / 12)
    assert f"<response>\n{sample.response}" in client.prompts[0] and "<passages>" not in client.prompts[0]
    assert "<claim>\nAspirin inhibits COX-1.\n</claim>" in client.prompts[1]
    assert f"<passage index=\"2\">\n{sample.context[1]}" in client.prompts[1]
    assert client.requests[0].max_tokens > client.requests[1].max_tokens  # a list, then one mark


def test_faithfulness_without_claims_is_skipped_and_a_bad_mark_fails_naming_the_claim():
    sample, judge = _sample(2), _select("faithfulness")
    (unit,) = SUITE.plan(sample, judge, 0, len)
    (none,) = SUITE.evaluate(FakeLLMClient("NONE"), unit, judge, None)
    assert none.status == "skipped" and none.score is None and "no claim" in none.reason
    (bad,) = SUITE.evaluate(FakeLLMClient(["1. A claim.\n2. Another claim.", "7", "high", "very"]), unit,
                            judge, None)
    assert bad.status == "failed" and bad.score is None and bad.reason.startswith("claim 2:")
