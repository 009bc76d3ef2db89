"""judges/gqm.py: the thesis' Context Recall (eq. 5.2), Context Relevance (eq. 5.3), Context Entities Recall
(eq. 5.4, the judge's entities for spaCy's) and Factual Consistency (eq. 5.8, the judge for HHEM), and the
suite's one empty-answer rule, on a real BioASQ question."""
import json

import pytest

from judges.config import GqmOptions, JudgeConfig
from judges.gqm import (
    CONTEXT_PRECISION,
    CONTEXT_RECALL,
    CONTEXT_RELEVANCE,
    ENTITY_RECALL,
    FACTUAL_CONSISTENCY,
    GQM_METRICS,
    MULTI_HOP,
    entity_recall,
    entity_set,
    normalize_entity,
    parse_attribution,
    share,
)
from judges.suite import EMPTY_REASON, Sample, get_suite
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient

SUITE = get_suite("gqm")
NEW = (CONTEXT_RECALL, CONTEXT_RELEVANCE, ENTITY_RECALL, FACTUAL_CONSISTENCY)


def _sample(passages: int = 2, response: str | None = None) -> Sample:
    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    answer = ideal[0] if isinstance(ideal, list) else ideal
    snippets = [s["text"] for s in sample_field(question["snippets"])]
    return Sample(question["id"], "A", question["body"], answer if response is None else response, answer,
                  snippets[:passages])


def _judge(*names: str) -> JudgeConfig:
    return JudgeConfig(model="judge-m", max_reasks=1, gqm=GqmOptions(metrics=list(names)))


def _unit(sample: Sample, metric: str):
    (unit,) = SUITE.plan(sample, _judge(metric.removeprefix("gqm_")), 0, len)
    return unit


def test_the_four_metrics_are_declared_with_their_equation_and_inputs():
    assert all(name in GQM_METRICS for name in NEW)
    assert GQM_METRICS[CONTEXT_RECALL].inputs == ("ground_truth", "context")
    assert GQM_METRICS[CONTEXT_RELEVANCE].inputs == ("question", "context")
    assert GQM_METRICS[ENTITY_RECALL].inputs == ("ground_truth", "context")
    assert GQM_METRICS[FACTUAL_CONSISTENCY].inputs == ("context", "response")
    for name, equation in zip(NEW, ("eq. 5.2", "eq. 5.3", "eq. 5.4", "eq. 5.8")):
        assert equation in GQM_METRICS[name].description
    assert "deviation" in GQM_METRICS[ENTITY_RECALL].description
    assert "HHEM" in GQM_METRICS[FACTUAL_CONSISTENCY].description


def test_they_are_listed_by_ccrs_metrics():
    from pipelines.metrics_cmd import metric_rows

    listed = {row["metric"]: row for row in metric_rows(["gqm"])}
    assert set(NEW) <= set(listed) and all(listed[name]["prompt_version"] == "v1" for name in NEW)


@pytest.mark.parametrize("verdicts,expected", [([True, False, True, True], 0.75), ([False], 0.0),
                                               ([True, True], 1.0)])
def test_eq_5_2_and_5_3_are_the_share_of_positive_verdicts(verdicts, expected):
    assert share(verdicts) == pytest.approx(expected)


def test_eq_5_4_normalizes_as_the_thesis_says():
    assert normalize_entity("  The   BRCA1  Gene ") == "brca1 gene"
    assert normalize_entity("A Tale of an Island") == "tale of island"
    assert normalize_entity("the") == ""
    expected = entity_set(["The BRCA1 gene", "breast cancer", "Theophylline", "the"])
    assert expected == {"brca1 gene", "breast cancer", "theophylline"}  # whole words only; empty dropped
    retrieved = entity_set(["BRCA1  gene", "Breast Cancer", "mice"])
    assert entity_recall(expected, retrieved) == pytest.approx(2 / 3)


@pytest.mark.parametrize("reply,verdict", [("1", True), ("0", False), ("Supported.", True),
                                           ("The claim is not supported by the passages.", False),
                                           ("unsupported", False)])
def test_an_attribution_verdict_is_the_digit_or_one_verdict_word(reply, verdict):
    assert parse_attribution(reply).ok and parse_attribution(reply).value is verdict


def test_context_recall_attributes_each_reference_claim_to_the_passages():
    sample = _sample(2)
    unit = _unit(sample, CONTEXT_RECALL)
    assert unit.n_context_chunks == 2 and SUITE.single_request(unit, _judge("context_recall")) is None
    client = FakeLLMClient(["1. Claim one.\n2. Claim two.\n3. Claim three.", "1", "maybe", "0", "1"])
    (judgment,) = SUITE.evaluate(client, unit, _judge("context_recall"), None)
    assert judgment.status == "ok" and judgment.score == pytest.approx(2 / 3) and judgment.attempts == 5
    assert json.loads(judgment.detail)["attributed"] == [True, False, True]
    first, second = client.prompts[0], client.prompts[1]
    assert f"<ground_truth>\n{sample.ground_truth}" in first and "<passages>" not in first
    assert "<claim>\nClaim one.\n</claim>" in second and f'<passage index="2">\n{sample.context[1]}' in second


def test_context_recall_without_a_reference_claim_is_skipped_and_a_bad_verdict_fails():
    unit = _unit(_sample(2), CONTEXT_RECALL)
    (none,) = SUITE.evaluate(FakeLLMClient("NONE"), unit, _judge("context_recall"), None)
    assert none.status == "skipped" and none.score is None and "eq. 5.2" in none.reason
    (bad,) = SUITE.evaluate(FakeLLMClient(["1. A.\n2. B.", "1", "perhaps", "who knows"]), unit,
                            _judge("context_recall"), None)
    assert bad.status == "failed" and bad.score is None and bad.reason.startswith("claim 2:")


def test_context_relevance_classifies_every_statement_of_every_passage():
    sample = _sample(2)
    unit = _unit(sample, CONTEXT_RELEVANCE)
    assert unit.n_context_chunks == 2
    replies = ["1. S one.\n2. S two.", "1. S three.", "1", "0", "relevant"]
    client = FakeLLMClient(replies)
    (judgment,) = SUITE.evaluate(client, unit, _judge("context_relevance"), None)
    assert judgment.status == "ok" and judgment.score == pytest.approx(2 / 3)  # M = 3 statements
    detail = json.loads(judgment.detail)
    assert detail["statements_per_passage"] == [2, 1] and detail["relevant"] == [True, False, True]
    first, third = client.prompts[0], client.prompts[2]
    assert f"<passage>\n{sample.context[0]}" in first and sample.context[1] not in first
    assert f"<question>\n{sample.question}" in third and "<statement>\nS one." in third
    assert sample.context[0] not in client.prompts[2]  # the statement stands alone
    (none,) = SUITE.evaluate(FakeLLMClient("NONE"), unit, _judge("context_relevance"), None)
    assert none.status == "skipped" and "M = 0" in none.reason


def test_entity_recall_extracts_from_the_reference_and_from_the_passages_combined():
    sample = _sample(2)
    unit = _unit(sample, ENTITY_RECALL)
    client = FakeLLMClient(["1. The BRCA1 gene\n2. Breast cancer", "1. BRCA1   gene\n2. an ovary"])
    (judgment,) = SUITE.evaluate(client, unit, _judge("entity_recall"), None)
    assert judgment.status == "ok" and judgment.score == pytest.approx(1 / 2)
    detail = json.loads(judgment.detail)
    assert detail["found"] == ["brca1 gene"] and "for spaCy" in detail["entity_extractor"]
    assert f"<text>\n{sample.ground_truth}\n</text>" in client.prompts[0]
    assert f"<text>\n{sample.context[0]}\n\n{sample.context[1]}\n</text>" in client.prompts[1]
    (none,) = SUITE.evaluate(FakeLLMClient("NONE"), unit, _judge("entity_recall"), None)
    assert none.status == "skipped" and none.score is None


def test_entity_recall_with_no_passage_is_zero_without_a_second_call():
    unit = _unit(_sample(0), ENTITY_RECALL)
    client = FakeLLMClient(["1. BRCA1"])
    (judgment,) = SUITE.evaluate(client, unit, _judge("entity_recall"), None)
    assert (judgment.status, judgment.score, len(client.requests)) == ("ok", 0.0, 1)


def test_entity_recall_fits_the_passages_with_room_for_a_list_reply():
    from judges.gqm import CLAIMS_MAX_TOKENS, passage_entities_prompt
    from judges.suite import WINDOW_MARGIN

    sample = _sample(3)
    needed = len(passage_entities_prompt(sample.context, "v1")) + CLAIMS_MAX_TOKENS + WINDOW_MARGIN
    for window, kept in ((needed, 3), (needed - 1, 2)):
        judge = JudgeConfig(model="judge-m", context_window=window, gqm=GqmOptions(metrics=["entity_recall"]))
        (unit,) = SUITE.plan(sample, judge, 0, len)
        assert unit.n_context_chunks == kept, window


def test_factual_consistency_is_one_mark_on_the_whole_answer_against_all_passages():
    sample = _sample(2)
    unit = _unit(sample, FACTUAL_CONSISTENCY)
    request = SUITE.single_request(unit, _judge("factual_consistency"))
    client = FakeLLMClient("8")
    (judgment,) = SUITE.evaluate(client, unit, _judge("factual_consistency"), None)
    assert client.requests == [request] and judgment.score == pytest.approx(0.8) and judgment.llm_score == 8
    prompt = client.prompts[0]
    assert prompt.index("<passages>") < prompt.index(f"<response>\n{sample.response}")
    assert "<claim>" not in prompt and "as a whole" in prompt  # no decomposition (eq. 5.8)


# --- the empty-answer rule ----------------------------------------------------------------------------

def test_an_empty_answer_scores_0_where_the_metric_reads_it_and_nothing_where_it_does_not():
    every = [name.removeprefix("gqm_") for name in GQM_METRICS]
    judge = _judge(*every)
    sample = _sample(2, response="")
    sample = Sample(sample.query_id, sample.system, sample.question, "", sample.ground_truth, sample.context,
                    sampled_responses=("An answer sampled.",))
    records = {r.metric: r for r in SUITE.not_judged(sample, judge, "empty_response", "empty")}
    assert set(records) == set(GQM_METRICS)
    for name, record in records.items():
        assert record.status == "empty_response"
        if "response" in GQM_METRICS[name].inputs:
            assert record.score == 0.0 and record.reason == EMPTY_REASON, name
        else:
            assert record.score is None and "does not read the answer" in record.reason, name
    assert {n for n, r in records.items() if r.score is None} == {
        CONTEXT_PRECISION, CONTEXT_RECALL, CONTEXT_RELEVANCE, ENTITY_RECALL}


def test_an_empty_answer_leaves_the_thesis_multi_hop_rule_first():
    judge = _judge("multi_hop", "bertscore", "self_consistency", "faithfulness")
    records = {r.metric: r for r in SUITE.not_judged(_sample(1, response=""), judge, "empty_response", "x")}
    assert records[MULTI_HOP].score is None and "section 5.4.3" in records[MULTI_HOP].reason
    assert records["gqm_self_consistency"].score is None  # no sampled answer: no value whatever the answer
    assert records["gqm_bertscore"].score == 0.0 and records["gqm_faithfulness"].score == 0.0


def test_a_failed_generation_has_no_score_anywhere():
    judge = _judge(*[name.removeprefix("gqm_") for name in NEW])
    records = SUITE.not_judged(_sample(2), judge, "failed", "generation failed: boom")
    assert all(r.score is None and r.reason == "generation failed: boom" for r in records)
