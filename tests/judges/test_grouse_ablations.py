"""The GroUSE paper's Table 5 ablations and Table 3's one-prompt variant: prompt versions that build on
`paper` (template inheritance), their replies, and the one-call evaluation."""
import json

from judges import templates
from judges.caching import prompt_files
from judges.config import GrouseOptions, JudgeConfig
from judges.grouse import (
    ABLATIONS,
    GROUSE_METRICS,
    JUDGED_METRICS,
    evaluate_sample,
    json_skeleton,
    layout_of,
    one_prompt_schema,
    parse_all_marks,
    parse_mark,
    render_one_prompt,
    render_prompt,
    score_schema,
)
from judges.suite import Sample
from tests.fakes import FakeLLMClient

REL, FAITH = GROUSE_METRICS["answer_relevancy"], GROUSE_METRICS["faithfulness"]
SAMPLE = Sample("q1", "sys", "Which channel carries the pain signal?", "NaV1.8 carries it [1].",
                "EXPECTED-ANSWER NaV1.8.", ["NaV1.8 is expressed in nociceptors.", "Unrelated passage."])
ANALYSIS = [{"sentence": "NaV1.8 carries it [1].", "citation_follows": "yes", "citation_is_right": "yes",
             "content_unchanged": "yes"}]


def judge(ablation: str, ask_all: bool = False) -> JudgeConfig:
    return JudgeConfig(grouse=GrouseOptions(prompt_version=ABLATIONS[ablation], ask_all=ask_all))


def test_ablations_build_on_paper_and_change_only_their_own_files():
    for version in ABLATIONS.values():
        assert templates.version_chain("grouse", version) == (version, "paper")
        assert "base" not in templates.load_template("grouse", version, "_common.txt")
    # completeness had no chain-of-thought key in paper: no-cot keeps paper's file (Table 5's asterisk)
    assert (templates.load_template("grouse", "paper-no-cot", "completeness.txt")
            == templates.load_template("grouse", "paper", "completeness.txt"))
    assert (templates.load_template("grouse", "paper-no-cot", "answer_relevancy.txt")
            != templates.load_template("grouse", "paper", "answer_relevancy.txt"))


def test_a_version_key_covers_the_files_it_builds_on():
    assert prompt_files("grouse", "paper-one-prompt") != prompt_files("grouse", "paper")
    assert len({prompt_files("grouse", version) for version in ABLATIONS.values()}) == len(ABLATIONS)


def test_no_ground_truth_shows_and_grades_the_answer_alone():
    layout = layout_of("paper-no-ground-truth")
    prompt = render_prompt(REL, SAMPLE, "paper-no-ground-truth")
    assert "EXPECTED-ANSWER" not in prompt and prompt.count("<answer>") == 1 and "answer_1" not in prompt
    assert json_skeleton(REL, layout).startswith('{"answer": {')
    assert score_schema(REL, layout)["required"] == ["answer"]
    reply = json.dumps({"answer": {"answer_says_no_document_answers": False, "justification": "ok",
                                   "score": 4}})
    assert parse_mark(reply, REL, layout).value == 4
    assert parse_mark(json.dumps({"answer_2": {"score": 4}}), REL, layout).reason == (
        "JSON without an answer object")


def test_no_justification_drops_the_field_everywhere():
    layout = layout_of("paper-no-justification")
    for name in JUDGED_METRICS:
        spec = GROUSE_METRICS[name]
        assert "justification" not in render_prompt(spec, SAMPLE, "paper-no-justification")
        assert "justification" not in score_schema(spec, layout)["properties"]["answer_2"]["properties"]
    reply = json.dumps({"answer_1": {"answer_says_no_document_answers": False, "score": 5},
                        "answer_2": {"answer_says_no_document_answers": False, "score": 3}})
    assert parse_mark(reply, REL, layout).value == 3


def test_no_cot_asks_only_justification_and_score():
    layout = layout_of("paper-no-cot")
    for name in JUDGED_METRICS:
        assert set(score_schema(GROUSE_METRICS[name], layout)["properties"]["answer_2"]["properties"]) == {
            "justification", "score"}
    prompt = render_prompt(FAITH, SAMPLE, "paper-no-cot")
    assert "sentence_analysis" not in prompt and "answer_only_says_no_document_answers" not in prompt
    # without the per-sentence analysis key, a faithfulness mark needs no analysis
    reply = json.dumps({"answer_1": {"justification": "a", "score": 1}, "answer_2": {"justification": "b",
                                                                                      "score": 0}})
    assert parse_mark(reply, FAITH, layout).value == 0


def one_prompt_reply(relevancy, completeness, usefulness, faithfulness) -> str:
    marks = {"answer_relevancy": relevancy, "completeness": completeness, "usefulness": usefulness,
             "faithfulness": faithfulness}
    one = {name: {"justification": f"why {name}", "score": mark} for name, mark in marks.items()}
    one["answer_relevancy"]["answer_says_no_document_answers"] = relevancy is None
    one["usefulness"] |= {"answer_says_no_document_answers": relevancy is None,
                          "answer_adds_related_information": False}
    one["faithfulness"] |= {"answer_only_says_no_document_answers": False, "sentence_analysis": ANALYSIS}
    return json.dumps({"answer_1": one, "answer_2": one})


def test_one_prompt_shows_every_metric_once_with_one_json_structure():
    prompt = render_one_prompt(SAMPLE, "paper-one-prompt")
    for name in JUDGED_METRICS:
        assert templates.load_template("grouse", "paper", f"{name}.txt")["instructions"] in prompt
        assert f'"{name}": {{' in prompt
    assert prompt.count("<question>") == 1 and prompt.count("<references>") == 1
    schema = one_prompt_schema(layout_of("paper-one-prompt"))
    assert schema["properties"]["answer_2"]["required"] == list(JUDGED_METRICS)


def test_one_prompt_is_one_call_and_the_gates_keep_what_a_run_asks():
    client = FakeLLMClient(one_prompt_reply(4, 3, 1, 1), prompt_tokens=100, completion_tokens=40)
    judgments = {j.metric: j for j in evaluate_sample(client, SAMPLE, judge("one-prompt"))}
    assert len(client.requests) == 1
    assert judgments["answer_relevancy"].llm_score == 4 and judgments["faithfulness"].llm_score == 1
    # relevancy is not null: the pipeline would not ask usefulness
    assert judgments["usefulness"].status == "skipped" and judgments["usefulness"].llm_score is None
    assert sum(j.prompt_tokens for j in judgments.values()) == 100


def test_one_prompt_under_all_calls_keeps_all_four():
    client = FakeLLMClient(one_prompt_reply(4, 3, 1, 0))
    judgments = {j.metric: j for j in evaluate_sample(client, SAMPLE, judge("one-prompt", ask_all=True))}
    assert judgments["usefulness"].llm_score == 1 and judgments["usefulness"].status == "ok"
    assert judgments["faithfulness"].llm_score == 0


def test_one_prompt_reasks_the_whole_reply_then_fails_every_metric():
    bad = json.dumps({"answer_2": {"answer_relevancy": {"score": 9}}})
    client = FakeLLMClient([bad, bad, bad])
    judgments = evaluate_sample(client, SAMPLE, judge("one-prompt", ask_all=True))
    assert len(client.requests) == 3
    failed = [j for j in judgments if j.metric in JUDGED_METRICS]
    assert {j.status for j in failed} == {"failed"}
    assert failed[0].reason.endswith("answer_relevancy: score out of range 1-5: 9")


def test_parse_all_marks_names_the_metric_that_is_missing():
    reply = json.loads(one_prompt_reply(4, 3, None, 1))
    del reply["answer_2"]["faithfulness"]
    marks, reason = parse_all_marks(json.dumps(reply), layout_of("paper-one-prompt"))
    assert marks is None and reason == "answer_2 without a faithfulness object"
