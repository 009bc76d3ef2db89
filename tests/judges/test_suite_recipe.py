"""The recipe of docs/architecture.md, "Add a suite": a metric table, `plan` and `evaluate` are the whole
suite. Defining the class registers it; the base class gives the rest (prompt version, config check,
selected metrics, window budget, the records of a sample that is not sent, no single request)."""
import pytest

from judges.config import JudgeConfig
from judges import suite as registry
from judges.suite import JudgeSuite, Metric, Parsed, Sample, Unit, Usage, ask, neutralize
from judges.suite import user_request as request
from tests.fakes import FakeLLMClient

SAMPLE = Sample("q1", "A", "What does BRCA1 do?", "It repairs DNA.", "DNA repair.", ["BRCA1 repairs DNA."])


def parse_yes_no(text: str | None) -> Parsed:
    word = (text or "").strip().lower().rstrip(".")
    if word not in ("yes", "no"):
        return Parsed(False, reason="not yes or no")
    return Parsed(True, int(word == "yes"))


@pytest.fixture
def answers_suite():
    """The recipe's suite, defined (and so registered) for one test, then taken out of the registry."""

    class AnswersSuite(JudgeSuite):
        name = "answers"
        description = "Does the response answer the question? (a recipe example)"
        metrics = {"answers": Metric("answers", "answers", (0, 1), ("question", "response"), (),
                                     "1 when the judge says the response answers the question")}

        def plan(self, sample, judge, seed, count):
            prompt = (f"<question>{neutralize(sample.question)}</question>\n<response>"
                      f"{neutralize(sample.response)}</response>\nDoes the response answer? Reply yes or no.")
            return [Unit(self.name, sample, tuple(self.metrics), prompt)]

        def evaluate(self, client, unit, judge, count):
            usage, spec = Usage(), self.metrics["answers"]
            answer = ask(client, request(judge.model, unit.plan, 4), parse_yes_no,
                         lambda reason: f"{reason}: reply yes or no.", judge.max_reasks, usage)
            return [self.judgment(unit.sample, judge, spec.name, status="ok" if answer.ok else "failed",
                                  usage=usage, score=spec.normalize(answer.value), llm_score=answer.value,
                                  reason=answer.reason, raw=answer.raw)]

    yield registry.get_suite("answers")
    registry.unregister_suite("answers")


def test_a_suite_from_the_recipe_registers_and_runs_through_the_suite_api(answers_suite):
    judge = JudgeConfig(model="judge-m")
    assert list(registry.suites())[-1] == "answers" and "answers" in registry.metric_order()
    answers_suite.check_config(judge)
    assert answers_suite.prompt_version(judge) == registry.NO_PROMPT_VERSION
    assert answers_suite.selected_metrics(judge) == ("answers",)
    (unit,) = answers_suite.plan(SAMPLE, judge, 0, len)
    assert answers_suite.single_request(unit, judge) is None
    assert answers_suite.reply_estimate(request("judge-m", "?", 4), judge) is None
    client = FakeLLMClient(["maybe", "Yes."], prompt_tokens=20, completion_tokens=1)
    (judgment,) = answers_suite.evaluate(client, unit, judge, None)
    assert (judgment.suite, judgment.metric, judgment.status) == ("answers", "answers", "ok")
    assert judgment.score == 1.0 and judgment.llm_score == 1
    assert judgment.attempts == 2 and judgment.prompt_tokens == 40 and judgment.judge_model == "judge-m"
    assert "It repairs DNA." in client.prompts[0] and "reply yes or no" in client.prompts[1]
    (empty,) = answers_suite.not_judged(SAMPLE, judge, "empty_response", "empty")
    assert (empty.status, empty.score, empty.reason) == ("empty_response", 0.0, registry.EMPTY_REASON)
    (failed,) = answers_suite.not_judged(SAMPLE, judge, "failed", "generation failed: HTTP 500")
    assert failed.score is None and failed.reason == "generation failed: HTTP 500"


def test_the_registry_forgets_a_test_suite_and_finds_the_suite_modules_on_disk(answers_suite):
    registry.unregister_suite("answers")
    assert "answers" not in registry.suites()
    assert registry.suite_modules() == ("judges.ccrs", "judges.gqm", "judges.grouse", "judges.ragchecker",
                                        "judges.vera")
    assert list(registry.suites()) == ["ccrs", "grouse", "vera", "ragchecker", "gqm"]  # display order: rank


def test_a_suite_without_plan_or_evaluate_is_refused_when_defined():
    with pytest.raises(TypeError, match="evaluate"):
        class Halfway(JudgeSuite):
            name = "halfway"
            description = "plans but never evaluates"
            metrics = {}

            def plan(self, sample, judge, seed, count):
                return []
    assert "halfway" not in registry.suites()
