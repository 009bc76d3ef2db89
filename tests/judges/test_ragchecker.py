import pytest

from judges.client import ChatResult
from judges.ragchecker import (
    RagCheckerConfig,
    RagCheckerInput,
    check_sample,
    claims_prompt,
    entail_prompt,
    entailment_share,
    parse_claims,
)


class FakeClient:
    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def chat(self, request):
        self.prompts.append(request.messages[-1]["content"])
        return ChatResult(self.replies.pop(0), 20, 4, "stop", 1)


CFG = RagCheckerConfig(max_reasks=1)
SAMPLE = RagCheckerInput("q", "s", "Aspirin inhibits COX-1. It cures cancer.", "Aspirin inhibits COX-1 and COX-2.",
                         ["Aspirin irreversibly inhibits cyclooxygenase."])


def test_parse_claims():
    assert parse_claims("1. a\n2. b\n3. c", 2) == ["a", "b"]
    assert parse_claims("NONE", 5) == [] and parse_claims("", 5) is None


def test_prompts_neutralize_and_list_claims():
    assert "[tag]" in claims_prompt(CFG, "x </text> y")
    prompt = entail_prompt(CFG, "ref", ["c1", "c2"])
    assert "1. c1\n2. c2" in prompt and "<reference>\nref\n</reference>" in prompt


def test_precision_recall_faithfulness():
    replies = ["1. Aspirin inhibits COX-1.\n2. Aspirin cures cancer.",   # response claims
               "1. Aspirin inhibits COX-1.\n2. Aspirin inhibits COX-2.",  # ground-truth claims
               "1. yes\n2. no",   # response claims vs ground truth -> P = 0.5
               "1. yes\n2. no",   # gt claims vs response -> R = 0.5
               "1. yes\n2. no"]   # response claims vs context -> F = 0.5
    r = check_sample(FakeClient(replies), CFG, SAMPLE)
    assert r.scores == {"rc_precision": 0.5, "rc_recall": 0.5, "rc_faithfulness": 0.5}
    assert r.calls == 5 and r.prompt_tokens == 100 and r.completion_tokens == 20


def test_unparseable_verdicts_are_none_with_reason():
    replies = ["1. a", "1. b", "dunno", "still dunno", "1. yes", "1. no"]
    r = check_sample(FakeClient(replies), CFG, SAMPLE)
    assert r.scores["rc_precision"] is None and "re-asks" in r.reasons["rc_precision"]
    assert r.scores["rc_recall"] == 1.0 and r.scores["rc_faithfulness"] == 0.0


def test_no_claims_and_empty_response():
    r = check_sample(FakeClient(["NONE", "1. g", "1. yes"]), CFG, SAMPLE)
    assert r.scores["rc_precision"] is None and r.reasons["rc_precision"] == "no claims extracted"
    assert r.scores["rc_recall"] == 1.0
    empty = check_sample(FakeClient([]), CFG, RagCheckerInput("q", "s", " ", "gt", []))
    assert empty.scores["rc_recall"] == 0.0 and empty.calls == 0
    assert entailment_share([]) is None and entailment_share([True, False, True]) == pytest.approx(2 / 3)


@pytest.mark.llm
def test_ragchecker_on_real_bioasq_questions(llm_endpoint):
    from judges.config import ClientConfig
    from tasks.ragchecker_stage import run_ragchecker
    from tests.conftest import _field, bioasq_questions

    samples = []
    for q in bioasq_questions(2):
        ideal = _field(q["ideal_answer"])
        ideal = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in _field(q["snippets"])][:3]
        samples.append(RagCheckerInput(q["id"], "ideal", ideal, ideal, snippets))
    frame = run_ragchecker(samples, RagCheckerConfig(model=llm_endpoint.judge_model, max_tokens=96),
                           ClientConfig(max_concurrency=4, timeout_s=120), llm_endpoint.base_url)
    assert len(frame) == 6 and frame["calls"].sum() >= 2 * 5
    for row in frame.itertuples():
        assert (row.score is not None and 0 <= row.score <= 1) or row.reason
