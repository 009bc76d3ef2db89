import json

import pytest

from judges.config import JudgeConfig, RagCheckerOptions
from judges.ragchecker import (
    METRICS,
    RAGCHECKER_METRICS,
    RagCheckerSuite,
    claims_prompt,
    entail_prompt,
    entailment_share,
    parse_claims,
)
from judges.suite import Sample, get_suite
from tests.fakes import FakeLLMClient


def count(text):
    return len(text) // 4


CFG = JudgeConfig(ragchecker=RagCheckerOptions(max_reasks=1))
SUITE = RagCheckerSuite()
SAMPLE = Sample("q", "s", "What does aspirin inhibit?", "Aspirin inhibits COX-1. It cures cancer.",
                "Aspirin inhibits COX-1 and COX-2.", ["Aspirin irreversibly inhibits cyclooxygenase."])


def check(client, sample=SAMPLE, cfg=CFG):
    (unit,) = SUITE.plan(sample, cfg, 0, count)
    return {j.metric: j for j in SUITE.evaluate(client, unit, cfg, count)}


def test_parse_claims():
    assert parse_claims("1. a\n2. b\n3. c", 2) == ["a", "b"]
    assert parse_claims("NONE", 5) == [] and parse_claims("", 5) is None


def test_prompts_neutralize_and_list_claims():
    prompt = claims_prompt(CFG, "x </text> y")
    assert "[/text]" in prompt and prompt.count("</text>") == 1
    prompt = entail_prompt(CFG, "ref", ["c1", "c2"])
    assert "1. c1\n2. c2" in prompt and "<reference>\nref\n</reference>" in prompt


def test_precision_recall_faithfulness():
    replies = ["1. Aspirin inhibits COX-1.\n2. Aspirin cures cancer.",   # response claims
               "1. Aspirin inhibits COX-1.\n2. Aspirin inhibits COX-2.",  # ground-truth claims
               "1. yes\n2. no",   # response claims vs ground truth -> P = 0.5
               "1. yes\n2. no",   # gt claims vs response -> R = 0.5
               "1. yes\n2. no"]   # response claims vs context -> F = 0.5
    client = FakeLLMClient(replies, prompt_tokens=20, completion_tokens=4)
    r = check(client)
    assert {m: j.score for m, j in r.items()} == {"rc_precision": 0.5, "rc_recall": 0.5,
                                                  "rc_faithfulness": 0.5}
    assert list(r) == list(METRICS) and {j.suite for j in r.values()} == {"ragchecker"}
    # the sample's usage on the first metric's row only: sums count each call once
    assert sum(j.attempts for j in r.values()) == 5 == r["rc_precision"].attempts
    assert sum(j.prompt_tokens for j in r.values()) == 100
    assert sum(j.completion_tokens for j in r.values()) == 20
    assert r["rc_recall"].attempts == r["rc_faithfulness"].prompt_tokens == 0
    assert json.loads(r["rc_recall"].detail) == {"ground_truth_claims": ["Aspirin inhibits COX-1.",
                                                                         "Aspirin inhibits COX-2."],
                                                 "verdicts": [True, False]}
    context = "<reference>\n[1] Aspirin irreversibly inhibits cyclooxygenase.\n</reference>"
    assert context in client.prompts[-1]


def test_unparseable_verdicts_are_none_with_reason():
    replies = ["1. a", "1. b", "dunno", "still dunno", "1. yes", "1. no"]
    r = check(FakeLLMClient(replies))
    assert r["rc_precision"].score is None and "re-asks" in r["rc_precision"].reason
    assert r["rc_precision"].status == "failed"
    assert r["rc_recall"].score == 1.0 and r["rc_faithfulness"].score == 0.0


def test_no_claims_and_empty_response():
    r = check(FakeLLMClient(["NONE", "1. g", "1. yes"]))
    assert r["rc_precision"].score is None and r["rc_precision"].reason == "no claims extracted"
    assert r["rc_recall"].score == 1.0
    empty = check(FakeLLMClient([]), Sample("q", "s", "q?", " ", "gt", []))
    assert empty["rc_recall"].score == 0.0 and sum(j.attempts for j in empty.values()) == 0
    assert {j.status for j in empty.values()} == {"empty_response"}
    assert entailment_share([]) is None and entailment_share([True, False, True]) == pytest.approx(2 / 3)


def test_context_is_fitted_to_the_window_without_a_character_cap():
    chunks = [f"Chunk {i} says aspirin inhibits COX-{i}. " * 40 for i in range(3)]
    sample = Sample("q", "s", "q?", "Aspirin inhibits COX-1.", "Aspirin inhibits COX-1.", chunks)
    (roomy,) = SUITE.plan(sample, JudgeConfig(context_window=8192), 0, count)
    assert roomy.n_context_chunks == 3 and roomy.n_context_truncated == 0 and len(roomy.plan.context) > 3000
    cfg = JudgeConfig(context_window=1024)
    (tight,) = SUITE.plan(sample, cfg, 0, count)
    assert tight.n_context_chunks == 1 and tight.n_context_truncated == 2
    assert "Chunk 1" not in tight.plan.context
    client = FakeLLMClient(["1. c", "1. g", "1. yes", "1. yes", "1. yes"])
    SUITE.evaluate(client, tight, cfg, count)
    assert "Chunk 0" in client.prompts[-1] and count(client.prompts[-1]) <= 1024 - 192 - 64


PAPER = JudgeConfig(ragchecker=RagCheckerOptions(prompt_version="paper", max_claims=None, max_reasks=1))
CHUNKED = Sample("q", "s", "What does aspirin inhibit?", "Aspirin inhibits COX-1. It cures cancer.",
                 "Aspirin inhibits COX-1 and COX-2.", ["Aspirin cures nothing.", "Aspirin inhibits COX-1."])


def test_paper_version_labels_three_ways_and_checks_faithfulness_chunk_by_chunk():
    replies = ["1. Aspirin inhibits COX-1.\n2. Aspirin cures cancer.",
               "1. Aspirin inhibits COX-1.\n2. Aspirin inhibits COX-2.",
               "1. entailment\n2. neutral",         # response claims vs ground truth -> P = 1/2
               "1. entailment\n2. contradiction",   # ground-truth claims vs response -> R = 1/2
               "1. neutral\n2. contradiction",      # response claims vs chunk 1: none
               "1. entailment\n2. neutral"]         # vs chunk 2: the first -> F = 1/2
    client = FakeLLMClient(replies)
    r = check(client, CHUNKED, PAPER)
    assert {m: j.score for m, j in r.items()} == dict.fromkeys(METRICS, 0.5)
    assert r["rc_precision"].attempts == 6 and {j.prompt_version for j in r.values()} == {"paper"}
    assert json.loads(r["rc_recall"].detail)["verdicts"] == ["entailment", "contradiction"]
    assert json.loads(r["rc_faithfulness"].detail)["verdicts"] == [True, False]
    first, second = client.prompts[-2:]
    assert "<reference>\nAspirin cures nothing.\n</reference>" in first and "neutral: the reference" in first
    assert "<reference>\nAspirin inhibits COX-1.\n</reference>" in second


def test_per_chunk_stops_once_every_claim_is_entailed_and_a_failed_chunk_fails_the_metric():
    all_entailed = ["1. c", "1. g", "1. entailment", "1. entailment", "1. entailment"]
    done = check(FakeLLMClient(all_entailed), CHUNKED, PAPER)
    assert done["rc_faithfulness"].score == 1.0 and done["rc_precision"].attempts == 5  # chunk 2 not asked
    replies = ["1. c", "1. g", "1. neutral", "1. neutral", "yes", "still yes"]
    failed = check(FakeLLMClient(replies), CHUNKED, PAPER)["rc_faithfulness"]
    assert failed.score is None and failed.reason.startswith("chunk 1: invalid after 1 re-asks")
    no_context = Sample("q", "s", "q?", "Aspirin inhibits COX-1.", "Aspirin inhibits COX-1.", [])
    r = check(FakeLLMClient(["1. c", "1. g", "1. entailment", "1. entailment"]), no_context, PAPER)
    assert r["rc_faithfulness"].score == 0.0  # no chunk entails anything: no call


def test_paper_version_keeps_every_claim_and_plans_each_chunk_alone():
    assert parse_claims("1. a\n2. b\n3. c", None) == ["a", "b", "c"]
    chunks = [f"Chunk {i} says aspirin inhibits COX-{i}. " * 40 for i in range(3)]
    sample = Sample("q", "s", "q?", "Aspirin inhibits COX-1.", "Aspirin inhibits COX-1.", chunks)
    (unit,) = SUITE.plan(sample, PAPER.model_copy(update={"context_window": 1024}), 0, count)
    assert unit.plan.per_chunk and unit.n_context_chunks == 3 and unit.n_context_truncated == 0


def test_registry_and_not_judged():
    suite = get_suite("ragchecker")
    assert isinstance(suite, RagCheckerSuite) and suite.metrics is RAGCHECKER_METRICS
    assert suite.selected_metrics(CFG) == METRICS == ("rc_precision", "rc_recall", "rc_faithfulness")
    assert all(m.suite == "ragchecker" and m.scale == (0, 1) for m in RAGCHECKER_METRICS.values())
    failed = suite.not_judged(SAMPLE, CFG, "failed", "generation failed: HTTP 500")
    assert [j.metric for j in failed] == list(METRICS) and all(j.score is None for j in failed)


@pytest.mark.llm
def test_ragchecker_on_real_bioasq_questions(llm_endpoint, judge_cache_dir):
    from judges.config import ClientConfig
    from tasks.runtime.judge_session import JudgeSession
    from tests.conftest import sample_field, bioasq_questions

    samples = []
    for q in bioasq_questions(2):
        ideal = sample_field(q["ideal_answer"])
        ideal = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in sample_field(q["snippets"])][:3]
        samples.append(Sample(q["id"], "ideal", q["body"], ideal, ideal, snippets))
    # 3 claims a text (default 10): every step still asked (extraction of both texts, a check per claim)
    judge = JudgeConfig(model=llm_endpoint.judge_model,
                        ragchecker=RagCheckerOptions(max_tokens=96, max_claims=3))
    session = JudgeSession.of("ragchecker", judge, ClientConfig(max_concurrency=4, timeout_s=120),
                              llm_endpoint.base_url)
    judgments, stats = session.judge_samples(samples)
    assert len(judgments) == 6 and stats["judge_requests"] == 2
    assert sum(j.attempts for j in judgments) >= 2 * 5
    for j in judgments:
        assert (j.score is not None and 0 <= j.score <= 1) or j.reason
