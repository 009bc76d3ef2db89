"""The suite protocol (judges/suite.py) as every registered suite answers it: the config check, the one
request of a single-call unit and the representative reply the cost plan counts. Real BioASQ text."""
import pytest

from judges.ccrs import unit_request
from judges.config import CcrsOptions, GrouseOptions, JudgeConfig, RagCheckerOptions, VeraOptions
from judges.suite import SUITE_METHODS, get_suite, register_suite, suites
from tests.conftest import bioasq_sample
from tests.fakes import FakeLLMClient


def count(text: str) -> int:
    return len(text) // 4


class _Incomplete:
    name = "incomplete"
    description = "a suite without check_config, single_request and reply_estimate"
    metrics = {}

    def prompt_version(self, judge):
        return "v1"


def test_a_suite_without_every_protocol_method_is_not_registered():
    assert {"check_config", "single_request", "reply_estimate", "plan", "evaluate"} <= set(SUITE_METHODS)
    with pytest.raises(TypeError, match="check_config"):
        register_suite(_Incomplete())
    assert "incomplete" not in suites()


@pytest.mark.parametrize("name", list(suites()))
def test_every_suite_accepts_the_default_judge_config(name):
    get_suite(name).check_config(JudgeConfig())


@pytest.mark.parametrize("name, judge", [
    ("ccrs", JudgeConfig(ccrs=CcrsOptions(prompt_version="v9"))),
    # GrouseOptions rejects v9 itself; model_construct skips its validator to reach the suite's check
    ("grouse", JudgeConfig(grouse=GrouseOptions.model_construct(prompt_version="v9"))),
    ("vera", JudgeConfig(vera=VeraOptions(prompt_version="v9"))),
    ("ragchecker", JudgeConfig(ragchecker=RagCheckerOptions(prompt_version="v9"))),
])
def test_a_missing_prompt_version_is_named_with_the_choices(name, judge):
    with pytest.raises(ValueError, match=rf"^{name} prompt version 'v9' does not exist; choose from \['"):
        get_suite(name).check_config(judge)


def test_ccrs_check_names_a_layout_the_version_lacks():
    with pytest.raises(ValueError, match="judge.ccrs.shared_prefix reorders the inputs"):
        get_suite("ccrs").check_config(
            JudgeConfig(ccrs=CcrsOptions(prompt_version="paper", shared_prefix=True)))
    get_suite("ccrs").check_config(JudgeConfig(ccrs=CcrsOptions(prompt_version="v1", shared_prefix=True)))


def test_vera_check_names_a_template_the_version_lacks():
    vera = get_suite("vera")
    with pytest.raises(ValueError, match="prompt_version 'v1' has no recall.txt for vera_retrieval_recall"):
        vera.check_config(JudgeConfig(vera=VeraOptions(prompt_version="v1")))
    vera.check_config(JudgeConfig(vera=VeraOptions(prompt_version="v1", metrics=["answer_grounding"])))


@pytest.mark.parametrize("options", [{}, {"structured_output": True}, {"ccrs": {"shared_prefix": True}},
                                     {"scoring": "expected"}])
def test_a_ccrs_unit_is_one_request_the_one_it_sends(options):
    judge, suite = JudgeConfig.model_validate(options), get_suite("ccrs")
    sample = bioasq_sample()
    units = suite.plan(sample, judge, 0, count)
    assert [u.metrics for u in units] == [(m,) for m in judge.ccrs.metrics]
    for unit in units:
        request = suite.single_request(unit, judge)
        assert request == unit_request(unit, judge) and sample.response in request.messages[0]["content"]
        assert bool(request.top_logprobs) == (judge.scoring == "expected")
        client = FakeLLMClient('{"score": 50}' if judge.structured_output else "50")
        (judgment,) = suite.evaluate(client, unit, judge, None)
        assert judgment.status == "ok" and client.requests == [request]


@pytest.mark.parametrize("name", [n for n in suites() if n not in ("ccrs", "gqm")])
def test_units_whose_calls_depend_on_each_other_have_no_single_request(name):
    suite, judge = get_suite(name), JudgeConfig()
    (unit,) = suite.plan(bioasq_sample(), judge, 0, count)
    assert suite.single_request(unit, judge) is None


def test_a_ccrs_reply_is_a_bare_mark_or_its_json_and_a_justification_counts_its_budget():
    suite = get_suite("ccrs")

    def estimate(justification=False, **options):
        judge = JudgeConfig(ccrs=CcrsOptions(justification=justification), **options)
        request = suite.single_request(suite.plan(bioasq_sample(), judge, 0, count)[0], judge)
        return suite.reply_estimate(request, judge)

    assert estimate() == "50"
    assert estimate(structured_output=True) == '{"score": 50}'
    assert estimate(justification=True) is None
    assert estimate(structured_output=True, justification=True) is None

