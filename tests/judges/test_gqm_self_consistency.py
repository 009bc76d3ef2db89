"""judges/gqm.py gqm_self_consistency: our interpretation of the thesis' Self-Consistency Score (the reader's
answer against the answers it sampled for the same prompt, one contradiction verdict each), on a real
BioASQ question."""
import pytest

from judges.caching import CachingJudge
from judges.config import GqmOptions, JudgeConfig
from judges.gqm import SELF_CONSISTENCY, parse_contradiction, self_consistency
from judges.suite import Sample, get_suite
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient

SUITE = get_suite("gqm")
JUDGE = JudgeConfig(model="judge-m", max_reasks=1, gqm=GqmOptions(metrics=["self_consistency",
                                                                          "answer_correctness"]))


def _sample(sampled: tuple[str, ...] = ("Sampled answer one.", "Sampled answer two.")) -> Sample:
    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    answer = ideal[0] if isinstance(ideal, list) else ideal
    snippets = [s["text"] for s in sample_field(question["snippets"])]
    return Sample(question["id"], "A", question["body"], answer, answer, snippets[:3],
                  sampled_responses=sampled)


def _unit(sample: Sample):
    return next(u for u in SUITE.plan(sample, JUDGE, 0, len) if u.metrics == (SELF_CONSISTENCY,))


def test_not_in_the_default_selection_and_planned_without_passages():
    default = SUITE.plan(_sample(), JudgeConfig(), 0, len)
    assert SELF_CONSISTENCY not in {m for u in default for m in u.metrics}
    unit = _unit(_sample())
    assert (unit.n_context_chunks, unit.n_context_truncated) == (0, 0)
    assert SUITE.single_request(unit, JUDGE) is None  # one call per sampled answer


@pytest.mark.parametrize("contradicts,expected", [
    ([False, False], 1.0), ([True, False, False], 2 / 3), ([True], 0.0), ([False, True, True, False], 0.5),
])
def test_the_score_is_the_share_of_sampled_answers_not_contradicting(contradicts, expected):
    assert self_consistency(contradicts) == pytest.approx(expected)


def test_one_verdict_per_sampled_answer_against_the_readers_answer():
    sample = _sample(("First sample.", "Second sample.", "Third sample."))
    client = FakeLLMClient(["0", "1", "They do not contradict each other."])
    (judgment,) = SUITE.evaluate(client, _unit(sample), JUDGE, None)
    assert (judgment.status, judgment.score, judgment.attempts) == ("ok", pytest.approx(2 / 3), 3)
    assert '"contradicts": [false, true, false]' in judgment.detail
    for prompt, sampled in zip(client.prompts, sample.sampled_responses):
        assert f"<answer_1>\n{sample.response}\n</answer_1>" in prompt
        assert f"<answer_2>\n{sampled}\n</answer_2>" in prompt and "<passages>" not in prompt


@pytest.mark.parametrize("reply,verdict", [
    ("1", True), ("0", False), ("The answers contradict each other.", True), ("They are consistent.", False),
    ("The second answer doesn't contradict the first.", False), ("They are not consistent.", True),
    ("Consistent, but it may contradict it.", None), ("maybe", None),
])
def test_a_verdict_is_the_digit_or_one_unambiguous_verdict_word(reply, verdict):
    parsed = parse_contradiction(reply)
    assert (parsed.value if parsed.ok else None) == verdict


def test_no_sampled_answer_is_skipped_with_the_reason_and_no_call():
    client = FakeLLMClient("0")
    (judgment,) = SUITE.evaluate(client, _unit(_sample(())), JUDGE, None)
    assert judgment.status == "skipped" and judgment.score is None
    assert "readers[].samples >= 2" in judgment.reason and client.requests == []


def test_one_unusable_verdict_fails_the_sample_naming_the_sampled_answer():
    client = FakeLLMClient(["0", "perhaps", "still unsure"])  # the second sample's reply and its re-ask
    (judgment,) = SUITE.evaluate(client, _unit(_sample()), JUDGE, None)
    assert judgment.status == "failed" and judgment.score is None
    assert judgment.reason.startswith("sampled answer 2: ")
    assert "only the digit 1 (they contradict)" in client.prompts[-1]  # the re-ask


def test_the_cache_key_follows_the_sampled_answers_of_this_metric_only():
    caching = CachingJudge(SUITE, JUDGE, 0)
    before, after = _sample(("Sample A.", "Sample B.")), _sample(("Sample A.", "Sample B, changed."))

    def keys(sample):
        return {u.metrics[0]: caching.key(u) for u in SUITE.plan(sample, JUDGE, 0, len)}

    assert keys(before)[SELF_CONSISTENCY] != keys(after)[SELF_CONSISTENCY]
    assert keys(before)["gqm_answer_correctness"] == keys(after)["gqm_answer_correctness"]
