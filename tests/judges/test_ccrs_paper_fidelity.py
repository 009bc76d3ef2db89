"""The `paper` CCRS templates implement Appendix B of the CCRS paper exactly: each construct's inputs in
the paper's order, the 0-100 scale with only the 0 and 100 anchors, the empty-response rule and the
score-only output rule; v1 stays the selectable hardened variant. Real BioASQ text as the inputs."""
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from judges.ccrs import (
    CCRS_METRICS,
    CcrsSuite,
    empty_judgment,
    load_template,
    prompt_versions,
    reask_message,
    render_prompt,
)
from judges.config import CcrsOptions, JudgeConfig
from judges.suite import Sample

check_config = CcrsSuite().check_config


@dataclass(frozen=True)
class PaperConstruct:
    """What Appendix B gives for one judge prompt."""

    name: str
    inputs: tuple[str, ...]  # in the order the prompt shows them


# CCRS paper, Appendix B (and section 2.3.2 for AC's combination).
PAPER = {
    "CC": PaperConstruct("Contextual Coherence", ("context", "response")),
    "QR": PaperConstruct("Question Relevance", ("question", "response")),
    "ID": PaperConstruct("Information Density", ("question", "context", "response")),
    "AC": PaperConstruct("Answer Correctness", ("context", "response", "ground_truth")),
    "IR": PaperConstruct("Information Recall", ("context", "response", "ground_truth")),
}
PAPER_SCALE = (0, 100)
PAPER_ANCHORS = {0, 100}  # every prompt anchors the two ends only, no mid-scale point
PAPER_AC_LAMBDA = 0.7  # AC = 0.7 * EM + 0.3 * LLM / 100
PAPER_CFG = JudgeConfig(ccrs=CcrsOptions(prompt_version="paper"))
# What the v1 review found v1 adds to Appendix B: none of it may appear in a `paper` text.
V1_ADDITIONS = ("50", "fabricat", "cannot support", "neither adds nor subtracts", "not instructions",
                "<chunk", "<response>", "evasion", "off-topic")

BIOASQ = Path(__file__).resolve().parents[2] / "data" / "bioasq-sample" / "12B1_golden_sample.json"


def _real_values() -> dict:
    """One real BioASQ question: its body, two gold snippets as the context, a third snippet as an
    extractive response, its ideal answer as the ground truth."""
    question = json.loads(BIOASQ.read_text())["questions"][0]
    snippets = [s["text"] for s in question["snippets"]]
    return {"question": question["body"], "context": snippets[:2], "response": snippets[2],
            "ground_truth": question["ideal_answer"][0]}


VALUES = _real_values()


def _rendered_value(name: str) -> str:
    value = VALUES[name]
    return "\n\n".join(value) if isinstance(value, list) else value


def _template_text(prompt: str) -> str:
    """The prompt with the input texts taken out: what the template itself says."""
    for name in PAPER["ID"].inputs + ("ground_truth",):
        prompt = prompt.replace(_rendered_value(name), "")
    return prompt


def _numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\d+", text)}


def test_the_fixture_inputs_are_distinct_real_texts():
    texts = [_rendered_value(name) for name in ("question", "context", "response", "ground_truth")]
    assert all(texts) and all(a not in b for a in texts for b in texts if a is not b)


def test_paper_and_v1_are_both_selectable_versions():
    assert {"paper", "v1"} <= set(prompt_versions())
    check_config(PAPER_CFG)
    check_config(JudgeConfig())


@pytest.mark.parametrize("metric", sorted(PAPER))
def test_declared_inputs_and_scale_are_the_papers(metric):
    spec = CCRS_METRICS[metric]
    assert spec.inputs == PAPER[metric].inputs
    assert spec.scale == PAPER_SCALE


@pytest.mark.parametrize("metric", sorted(PAPER))
def test_paper_prompt_shows_exactly_its_inputs_in_the_papers_order(metric):
    prompt = render_prompt(CCRS_METRICS[metric], VALUES, PAPER_CFG)
    shown = [name for name in VALUES if _rendered_value(name) in prompt]
    assert sorted(shown) == sorted(PAPER[metric].inputs)
    positions = [prompt.index(_rendered_value(name)) for name in PAPER[metric].inputs]
    assert positions == sorted(positions)
    labels = [f"{label}:\n" for name, label in _labels().items() if name in PAPER[metric].inputs]
    assert all(label in prompt for label in labels)


@pytest.mark.parametrize("metric", sorted(PAPER))
def test_paper_prompt_names_the_construct_and_anchors_only_0_and_100(metric):
    prompt = render_prompt(CCRS_METRICS[metric], VALUES, PAPER_CFG)
    template_text = _template_text(prompt)
    assert prompt.startswith("You will rate the " + PAPER[metric].name)
    assert _numbers(template_text) == PAPER_ANCHORS
    assert not [extra for extra in V1_ADDITIONS if extra in template_text]


@pytest.mark.parametrize("metric", sorted(PAPER))
def test_paper_prompt_keeps_the_empty_response_and_score_only_rules(metric):
    task = load_template("paper", CCRS_METRICS[metric].templates[0])["task"]
    assert "If there is no response, the score is 0." in task
    assert task.splitlines()[-1] == "Output: give the score alone, with nothing else."
    prompt = render_prompt(CCRS_METRICS[metric], VALUES, PAPER_CFG)
    assert prompt.endswith(task)


def test_paper_inputs_are_shown_as_they_are_without_tags_or_preamble():
    values = {**VALUES, "response": VALUES["response"] + " </response>"}
    prompt = render_prompt(CCRS_METRICS["QR"], values, PAPER_CFG)
    assert values["response"] in prompt and "[/response]" not in prompt
    assert "<question>" not in prompt and "data to evaluate" not in prompt


@pytest.mark.parametrize("options", [{"structured_output": True},
                                     {"ccrs": PAPER_CFG.ccrs.model_copy(update={"justification": True})}])
def test_output_options_change_only_the_output_line(options):
    plain = render_prompt(CCRS_METRICS["AC"], VALUES, PAPER_CFG).splitlines()
    other = render_prompt(CCRS_METRICS["AC"], VALUES, PAPER_CFG.model_copy(update=options)).splitlines()
    assert [i for i, (a, b) in enumerate(zip(plain, other)) if a != b] == [len(plain) - 1]
    assert _numbers(_template_text(other[-1])) == PAPER_ANCHORS


@pytest.mark.parametrize("expect_json", [False, True])
def test_paper_reask_adds_no_criteria(expect_json):
    text = reask_message("prose around the number", PAPER_CFG, expect_json)
    assert _numbers(text) == PAPER_ANCHORS
    assert not [extra for extra in V1_ADDITIONS if extra in text]
    assert not [name for name in ("context", "passage", "question", "reference", "fact") if name in text]


def test_paper_version_has_no_shared_prefix_layout():
    cfg = JudgeConfig(ccrs=CcrsOptions(prompt_version="paper", shared_prefix=True))
    with pytest.raises(ValueError, match="input order"):
        check_config(cfg)
    with pytest.raises(ValueError, match="input order"):
        render_prompt(CCRS_METRICS["ID"], VALUES, cfg)


def test_unknown_version_is_rejected_before_rendering():
    with pytest.raises(ValueError, match=r"ccrs prompt version 'v999' does not exist; .*'paper'"):
        check_config(JudgeConfig(ccrs=CcrsOptions(prompt_version="v999")))


def test_empty_response_scores_0_without_a_call_and_ac_combines_as_in_the_paper():
    assert PAPER_CFG.ccrs.ac_lambda == PAPER_AC_LAMBDA
    sample = Sample("q", "A", VALUES["question"], "", VALUES["ground_truth"], VALUES["context"])
    for metric in PAPER:
        judgment = empty_judgment(CCRS_METRICS[metric], sample, PAPER_CFG)
        assert (judgment.score, judgment.status, judgment.prompt_version) == (0.0, "empty_response", "paper")
        assert judgment.attempts == 0


@pytest.mark.parametrize("metric", sorted(PAPER))
def test_v1_is_still_the_hardened_variant_and_differs(metric):
    v1 = render_prompt(CCRS_METRICS[metric], VALUES, JudgeConfig())
    paper = render_prompt(CCRS_METRICS[metric], VALUES, PAPER_CFG)
    assert v1 != paper
    assert "not instructions" in v1 and "<response>" in v1 and "50" in _template_text(v1)


def test_the_version_is_part_of_every_cache_key():
    sample = Sample("q", "A", VALUES["question"], VALUES["response"], VALUES["ground_truth"],
                    VALUES["context"])

    def keys(cfg):
        from judges.caching import CachingJudge

        return [CachingJudge(CcrsSuite(), cfg, 0).key(unit) for unit in CcrsSuite().plan(sample, cfg, 0, len)]

    assert not set(keys(JudgeConfig())) & set(keys(PAPER_CFG))


def _labels() -> dict[str, str]:
    from judges.ccrs import input_labels

    return input_labels(load_template("paper", "_common.txt"))
