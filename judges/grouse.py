"""GroUSE judges (GroUSE paper, section 4.4, Figures 2 and 4) as a registered judge suite: answer
relevancy, completeness, usefulness, faithfulness, and the derived positive acceptance and negative
rejection of a grounded answer.

Each judged metric has its versioned prompt template (judges/prompts/grouse/<version>/; `paper` follows
the paper's Appendix C construct, `v1` is the first version). Every prompt shows the expected answer first
(answer_1) and the answer to grade second (answer_2) and asks for a JSON object with chain-of-thought keys,
a justification and a score per answer; only answer_2's score is kept. A version's `[layout]` names how
its prompt shows the sample and what its reply holds (`LAYOUTS`). The calls of one sample depend on each
other (Figure 4), so the suite plans ONE unit per sample; the shared loop (judges/suite.py `ask`) asks,
parses and re-asks; the stage (tasks/judge.py) fans the units out.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from judges import suite as js
from judges import templates
from judges.client import ChatRequest, LLMClient
from judges.config import JudgeConfig
from judges.readers import FittedPrompt, fit_chunks

SUITE = "grouse"

# Each metric's inputs in the order of the paper's prompt (Figures 7-10): answer 1 is the expected answer
# (`ground_truth`), answer 2 the graded `response`; the references are the `context` chunks.
_ANSWERS = ("question", "ground_truth", "response")
_COMPLETENESS_INPUTS = ("context", "question", "ground_truth", "response")
_FAITHFULNESS_INPUTS = ("context", "ground_truth", "response")


def _judged(name: str, inputs: tuple[str, ...], scale: tuple[int, int], description: str) -> js.Metric:
    return js.Metric(SUITE, name, scale, inputs, (f"{name}.txt",), description)


def _derived(name: str, description: str) -> js.Metric:
    return js.Metric(SUITE, name, (0, 1), (), (), description, judged=False)


GROUSE_METRICS: dict[str, js.Metric] = {metric.name: metric for metric in (
    _judged("answer_relevancy", _ANSWERS, (1, 5),
            "Answer relevancy: the answer addresses the question (null: it declines to answer)"),
    _judged("completeness", _COMPLETENESS_INPUTS, (1, 5),
            "Completeness: the answer covers what the references hold (null: they hold no answer)"),
    _judged("usefulness", _ANSWERS, (0, 1),
            "Usefulness: a refusal that adds useful related information (null unless a refusal)"),
    _judged("faithfulness", _FAITHFULNESS_INPUTS, (0, 1),
            "Faithfulness: every fact is supported by its cited reference (null: bare refusal)"),
    _derived("positive_acceptance",
             "Positive acceptance: answers when the references hold an answer (derived, Table 6)"),
    _derived("negative_rejection",
             "Negative rejection: refuses when the references hold no answer (derived, Table 6)"),
)}
METRIC_ORDER = tuple(GROUSE_METRICS)
# The metrics that read what only an answer written to GroUSE's conventions holds: a [i] citation after each
# statement (faithfulness) and the prescribed refusal sentence (positive acceptance, negative rejection). On
# answers of a reader prompt that asks for neither they are near 0 by construction, not applicable.
CITATION_METRICS = ("faithfulness", "positive_acceptance", "negative_rejection")
JUDGED_METRICS = tuple(name for name, spec in GROUSE_METRICS.items() if spec.judged)
DERIVED_METRICS = tuple(name for name, spec in GROUSE_METRICS.items() if not spec.judged)

_NULLABLE = frozenset(JUDGED_METRICS)
# One entry of the paper layout's per-sentence faithfulness analysis: the sentence, then one explanation per
# criterion (a citation follows it; the cited reference is where the information comes from; the content
# is not distorted).
SENTENCE_FIELDS = ("sentence", "citation_follows", "citation_is_right", "content_unchanged")


@dataclass(frozen=True)
class Layout:
    """How a prompt version shows the sample and what its reply holds for each answer. `keys`: per judged
    metric, the chain-of-thought keys written before the justification, each with its kind (boolean,
    text, or sentences: a list of SENTENCE_FIELDS objects); `placeholders`: each kind's stand-in in the
    JSON skeleton (and the justification's); `text_chars`: the longest free text structured output
    allows; `question_everywhere`: the question is shown first in every prompt, otherwise each metric
    shows its own inputs in their order. The GroUSE paper's Table 5 ablations and Table 3's one-prompt
    variant change the rest: `answers` the answers graded in one reply, the graded one last (the expected
    answer first, or the graded answer alone); `justification` whether each answer's object has one;
    `one_prompt` whether one call asks all four judged metrics."""

    question_everywhere: bool
    keys: dict[str, tuple[tuple[str, str], ...]]
    placeholders: dict[str, str]
    text_chars: int
    answers: tuple[str, ...] = ("answer_1", "answer_2")
    justification: bool = True
    one_prompt: bool = False

    @property
    def graded(self) -> str:
        """The reply's key for the graded answer (the only score kept)."""
        return self.answers[-1]


_SENTENCE_SKELETON = "[{" + ", ".join(f'"{f}": "<text>"' for f in SENTENCE_FIELDS) + "}, ...]"
LAYOUTS: dict[str, Layout] = {
    # v1: the question in every prompt; short free text (160 characters) so that a weak judge cannot
    # ramble to the token limit; the faithfulness analysis is one string.
    "v1": Layout(True, {"answer_relevancy": (("answer_says_no_document_answers", "boolean"),),
                        "completeness": (("references_answer_the_question", "boolean"),),
                        "usefulness": (("answer_says_no_document_answers", "boolean"),
                                       ("has_additional_information", "boolean")),
                        "faithfulness": (("sentence_analysis", "text"),)},
                 {"boolean": "...", "text": "...", "justification": '"<short text>"'}, 160),
    # paper (Appendix C): the chain-of-thought keys of Figures 7-10 (completeness has none); faithfulness
    # is analysed sentence by sentence, so free text is only loosely capped.
    "paper": Layout(False, {"answer_relevancy": (("answer_says_no_document_answers", "boolean"),),
                            "completeness": (),
                            "usefulness": (("answer_says_no_document_answers", "boolean"),
                                           ("answer_adds_related_information", "boolean")),
                            "faithfulness": (("answer_only_says_no_document_answers", "boolean"),
                                             ("sentence_analysis", "sentences"))},
                    {"boolean": "<true or false>", "text": '"<text>"', "sentences": _SENTENCE_SKELETON,
                     "justification": '"<text>"'}, 600),
}
# The ablations of the GroUSE paper's Table 5 and its one-prompt variant (Table 3), each the `paper` layout
# with one thing changed; their prompt versions are `paper-<ablation>` (judges/prompts/grouse/).
LAYOUTS |= {
    "paper-one-answer": replace(LAYOUTS["paper"], answers=("answer",)),
    "paper-no-justification": replace(LAYOUTS["paper"], justification=False),
    "paper-no-cot": replace(LAYOUTS["paper"], keys={name: () for name in LAYOUTS["paper"].keys}),
    "paper-one-prompt": replace(LAYOUTS["paper"], one_prompt=True, question_everywhere=True),
}
ABLATIONS = {"no-ground-truth": "paper-no-ground-truth", "no-justification": "paper-no-justification",
             "no-cot": "paper-no-cot", "one-prompt": "paper-one-prompt"}


# --- templates ---------------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template(SUITE, version, filename)


def layout_of(version: str) -> Layout:
    """The layout named by the version's `_common.txt` `[layout]` section."""
    name = load_template(version, "_common.txt").get("layout")
    if name not in LAYOUTS:
        raise ValueError(f"GroUSE prompt version {version!r}: unknown [layout] {name!r} "
                         f"(known: {', '.join(LAYOUTS)})")
    return LAYOUTS[name]


def render_references(references: list[str]) -> str:
    if not references:
        return "<references>\n(no documents were retrieved)\n</references>"
    body = "\n".join(f'<reference index="{i}">\n{js.neutralize(r)}\n</reference>'
                     for i, r in enumerate(references, 1))
    return f"<references>\n{body}\n</references>"


def _metric_skeleton(spec: js.Metric, layout: Layout) -> str:
    low, high = spec.scale
    values = f"<integer {low}-{high}" + (" or null>" if spec.name in _NULLABLE else ">")
    parts = [f'"{key}": {layout.placeholders[kind]}' for key, kind in layout.keys[spec.name]]
    if layout.justification:
        parts.append(f'"justification": {layout.placeholders["justification"]}')
    parts.append(f'"score": {values}')
    return "{" + ", ".join(parts) + "}"


def _per_answer(one: str, layout: Layout) -> str:
    return "{" + ", ".join(f'"{answer}": {one}' for answer in layout.answers) + "}"


def json_skeleton(spec: js.Metric, layout: Layout) -> str:
    return _per_answer(_metric_skeleton(spec, layout), layout)


def one_prompt_skeleton(layout: Layout) -> str:
    """The one-prompt variant's reply: per answer, one object per judged metric."""
    one = "{" + ", ".join(f'"{name}": {_metric_skeleton(GROUSE_METRICS[name], layout)}'
                          for name in JUDGED_METRICS) + "}"
    return _per_answer(one, layout)


def shown_inputs(spec: js.Metric, layout: Layout) -> list[str]:
    """The sample blocks of a prompt ("question", "context") in the order they are shown."""
    shown = [name for name in spec.inputs if name in ("question", "context")]
    if layout.question_everywhere:
        return ["question"] + [name for name in shown if name != "question"]
    return shown


def _sample_block(name: str, sample: js.Sample, common: dict[str, str]) -> str:
    if name == "question":
        return f"{common['question_heading']}\n<question>\n{js.neutralize(sample.question)}\n</question>"
    return f"{common['references_heading']}\n{render_references(sample.context)}"


def _answer_blocks(sample: js.Sample, common: dict[str, str], layout: Layout) -> list[str]:
    """The expected answer (`ground_truth`) as answer 1 and the graded `response` as answer 2; or, where
    the layout grades one answer (no ground truth), the response alone."""
    texts = {"answer_1": sample.ground_truth, "answer_2": sample.response, "answer": sample.response}
    return [f"{common[f'{answer}_heading']}\n<{answer}>\n{js.neutralize(texts[answer])}\n</{answer}>"
            for answer in layout.answers]


def render_prompt(spec: js.Metric, sample: js.Sample, prompt_version: str) -> str:
    """Task introduction (citation format), [untrusted-data preamble, v1], [the two answers to grade,
    paper], metric instructions, JSON format, the sample blocks (`shown_inputs`), the two answers: the
    expected answer (`ground_truth`) as answer 1, the graded `response` as answer 2; the `context` chunks
    are the numbered references."""
    common = load_template(prompt_version, "_common.txt")
    layout = layout_of(prompt_version)
    metric = load_template(prompt_version, spec.templates[0])
    blocks = [common[name] for name in ("intro", "preamble", "answers_intro") if name in common]
    blocks += [metric["instructions"], common["output"].replace("{skeleton}", json_skeleton(spec, layout))]
    blocks += [_sample_block(name, sample, common) for name in shown_inputs(spec, layout)]
    blocks += _answer_blocks(sample, common, layout)
    blocks.append(common["closing"])
    return "\n\n".join(blocks)


def render_one_prompt(sample: js.Sample, prompt_version: str) -> str:
    """The one-prompt variant (GroUSE Table 3, "all metrics with one prompt"): the task introduction, the
    four judged metrics' instructions in pipeline order, one JSON format for all of them, the question, the
    references, the answers."""
    common = load_template(prompt_version, "_common.txt")
    layout = layout_of(prompt_version)
    opening = ("intro", "preamble", "answers_intro", "metrics_intro")
    blocks = [common[name] for name in opening if name in common]
    blocks += [load_template(prompt_version, GROUSE_METRICS[name].templates[0])["instructions"]
               for name in JUDGED_METRICS]
    blocks.append(common["output"].replace("{skeleton}", one_prompt_skeleton(layout)))
    blocks += [_sample_block(name, sample, common) for name in ("question", "context")]
    blocks += _answer_blocks(sample, common, layout)
    blocks.append(common["closing"])
    return "\n\n".join(blocks)


def reask_message(spec: js.Metric, reason: str, prompt_version: str) -> str:
    text = load_template(prompt_version, "_common.txt")["reask"]
    low, high = spec.scale
    allowed = f"an integer from {low} to {high}" + (" or null" if spec.name in _NULLABLE else "")
    skeleton = json_skeleton(spec, layout_of(prompt_version))
    return text.replace("{reason}", reason).replace("{skeleton}", skeleton).replace("{allowed}", allowed)


def one_prompt_reask(reason: str, prompt_version: str) -> str:
    text = load_template(prompt_version, "_common.txt")["reask"]
    allowed = ("the integer its metric's scale allows (1 to 5 for answer_relevancy and completeness, 0 or 1 "
               "for usefulness and faithfulness) or null")
    skeleton = one_prompt_skeleton(layout_of(prompt_version))
    return text.replace("{reason}", reason).replace("{skeleton}", skeleton).replace("{allowed}", allowed)


# --- parsing -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedMark:
    ok: bool
    value: int | None = None
    reason: str | None = None
    justification: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def _graded_object(text: str | None, layout: Layout) -> tuple[dict | None, str | None]:
    """The graded answer's object of a JSON reply (a surrounding ``` fence is tolerated), or why not."""
    stripped = (text or "").strip()
    if not stripped:
        return None, "empty reply"
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError:
        return None, "not valid JSON"
    if not isinstance(obj, dict) or not isinstance(obj.get(layout.graded), dict):
        return None, f"JSON without an {layout.graded} object"
    return obj[layout.graded], None


def parse_mark(text: str | None, spec: js.Metric, layout: Layout) -> ParsedMark:
    """The reply must be one JSON object (a surrounding ``` fence is tolerated) holding the graded answer's
    object (`answer_2`; `answer` where one answer is graded) with a `score` that is an integer within the
    metric's scale, or null where the metric is nullable. Where the layout asks for a per-sentence
    analysis, a mark (not null) needs a well-formed, non-empty one."""
    second, problem = _graded_object(text, layout)
    if second is None:
        return ParsedMark(False, reason=problem)
    return _metric_mark(second, spec, layout)


def _metric_mark(second: dict, spec: js.Metric, layout: Layout) -> ParsedMark:
    if "score" not in second:
        return ParsedMark(False, reason=f"{layout.graded} without a score field")
    mark = _check_value(second, spec, layout)
    if mark.ok and mark.value is not None:
        for key, kind in layout.keys[spec.name]:
            problem = sentence_analysis_problem(second.get(key)) if kind == "sentences" else None
            if problem:
                return ParsedMark(False, reason=f"{key}: {problem}")
    return mark


def parse_all_marks(text: str | None, layout: Layout) -> tuple[dict[str, ParsedMark] | None, str | None]:
    """The one-prompt reply: per judged metric, its object under the graded answer, checked as
    `parse_mark` checks one; a reply any metric of which is unusable is re-asked as a whole."""
    second, problem = _graded_object(text, layout)
    if second is None:
        return None, problem
    marks = {}
    for name in JUDGED_METRICS:
        part = second.get(name)
        if not isinstance(part, dict):
            return None, f"{layout.graded} without a {name} object"
        mark = _metric_mark(part, GROUSE_METRICS[name], layout)
        if not mark.ok:
            return None, f"{name}: {mark.reason}"
        marks[name] = mark
    return marks, None


def sentence_analysis_problem(analysis: Any) -> str | None:
    """Why a per-sentence analysis is unusable (None: it is a non-empty list of objects whose
    SENTENCE_FIELDS are all strings)."""
    if analysis is None:
        return "missing; a mark needs the sentence-by-sentence analysis"
    if not isinstance(analysis, list):
        return f"not a list of sentence entries: {type(analysis).__name__}"
    if not analysis:
        return "empty; a mark needs at least one analysed sentence"
    for i, entry in enumerate(analysis, 1):
        fields = entry if isinstance(entry, dict) else {}
        missing = [f for f in SENTENCE_FIELDS if not isinstance(fields.get(f), str)]
        if missing:
            return f"entry {i} lacks the text field(s) {', '.join(missing)}"
    return None


def _check_value(second: dict, spec: js.Metric, layout: Layout) -> ParsedMark:
    value = second["score"]
    justification = second.get("justification")
    justification = justification if isinstance(justification, str) else None
    details = {key: second[key] for key, _ in layout.keys[spec.name] if key in second}
    if value is None:
        if spec.name in _NULLABLE:
            return ParsedMark(True, None, None, justification, details)
        return ParsedMark(False, reason="score is null but this metric is never null")
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return ParsedMark(False, reason=f"score is not an integer: {value!r}")
    low, high = spec.scale
    if not low <= value <= high:
        return ParsedMark(False, reason=f"score out of range {low}-{high}: {value}")
    return ParsedMark(True, value, None, justification, details)


def _metric_schema(spec: js.Metric, layout: Layout) -> dict[str, Any]:
    low, high = spec.scale
    score = {"type": ["integer", "null"] if spec.name in _NULLABLE else "integer", "minimum": low,
             "maximum": high}
    text = {"type": "string", "maxLength": layout.text_chars}
    entry = {"type": "object", "properties": {f: text for f in SENTENCE_FIELDS},
             "required": list(SENTENCE_FIELDS)}
    sentences = {"type": "array", "items": entry}
    kinds = {"boolean": {"type": "boolean"}, "text": text, "sentences": sentences}
    cot = {key: kinds[kind] for key, kind in layout.keys[spec.name]}
    justification = {"justification": text} if layout.justification else {}
    properties = {**cot, **justification, "score": score}
    return {"type": "object", "properties": properties, "required": list(properties)}


def score_schema(spec: js.Metric, layout: Layout) -> dict[str, Any]:
    return _answers_schema(_metric_schema(spec, layout), layout)


def one_prompt_schema(layout: Layout) -> dict[str, Any]:
    metrics = {name: _metric_schema(GROUSE_METRICS[name], layout) for name in JUDGED_METRICS}
    return _answers_schema({"type": "object", "properties": metrics, "required": list(metrics)}, layout)


def _answers_schema(one: dict[str, Any], layout: Layout) -> dict[str, Any]:
    return {"type": "object", "properties": {answer: one for answer in layout.answers},
            "required": list(layout.answers)}


# --- one metric ---------------------------------------------------------------------------------------

def reply_tokens(spec: js.Metric, judge: JudgeConfig) -> int:
    """The reply budget of one metric's call: faithfulness has its own (a per-sentence analysis)."""
    grouse = judge.grouse
    return grouse.faithfulness_max_tokens if spec.name == "faithfulness" else grouse.max_tokens


def build_request(spec: js.Metric, sample: js.Sample, judge: JudgeConfig) -> ChatRequest:
    """The first request of one judged metric; `reply_tokens` new tokens at most (`ask` lowers it so that
    prompt + reply fit the judge window)."""
    version = judge.grouse.prompt_version
    extra = {}
    if judge.structured_output:
        extra = {"response_format": {"type": "json_schema",
                                     "json_schema": {"name": f"grouse_{spec.name}",
                                                     "schema": score_schema(spec, layout_of(version))}}}
    prompt = render_prompt(spec, sample, version)
    return js.user_request(judge.model, prompt, reply_tokens(spec, judge), extra)


def _parser(spec: js.Metric, layout: Layout):
    def parse(text: str | None) -> js.Parsed:
        mark = parse_mark(text, spec, layout)
        return js.Parsed(mark.ok, mark, mark.reason)

    return parse


def judge_metric(client: LLMClient, spec: js.Metric, sample: js.Sample, judge: JudgeConfig,
                 count: js.Count | None = None) -> js.Judgment:
    """Ask, parse, re-ask at most judge.max_reasks times with a stricter instruction (the shared `ask`);
    a failure keeps the last raw reply and the reason. `count` (prompt -> tokens) fits the reply budget
    to judge.context_window."""
    usage = js.Usage()
    version = judge.grouse.prompt_version
    answer = js.ask(client, build_request(spec, sample, judge), _parser(spec, layout_of(version)),
                    lambda reason: reask_message(spec, reason, version), judge.max_reasks, usage,
                    window=judge.context_window, count=count)
    if answer.ok:
        mark: ParsedMark = answer.value
        return _judgment(sample, spec.name, judge, mark.value, "ok", None, answer.raw, mark.justification,
                         usage)
    return _judgment(sample, spec.name, judge, None, "failed", answer.reason, answer.raw, None, usage)


def one_prompt_request(sample: js.Sample, judge: JudgeConfig) -> ChatRequest:
    """The one call of the one-prompt variant; its reply budget is the four calls' budgets together."""
    grouse, version = judge.grouse, judge.grouse.prompt_version
    extra = {}
    if judge.structured_output:
        extra = {"response_format": {"type": "json_schema",
                                     "json_schema": {"name": "grouse_all_metrics",
                                                     "schema": one_prompt_schema(layout_of(version))}}}
    budget = grouse.max_tokens * (len(JUDGED_METRICS) - 1) + grouse.faithfulness_max_tokens
    return js.user_request(judge.model, render_one_prompt(sample, version), budget, extra)


def judge_in_one_prompt(client: LLMClient, sample: js.Sample, judge: JudgeConfig,
                        count: js.Count | None = None) -> list[js.Judgment]:
    """The four judged metrics from one call (re-asked as a whole while any metric's part is unusable).
    The call's tokens are recorded on the answer-relevancy judgment, so that the run's sums stay right."""
    usage = js.Usage()
    version = judge.grouse.prompt_version

    def parse(text: str | None) -> js.Parsed:
        marks, reason = parse_all_marks(text, layout_of(version))
        return js.Parsed(marks is not None, marks, reason)

    answer = js.ask(client, one_prompt_request(sample, judge), parse,
                    lambda reason: one_prompt_reask(reason, version), judge.max_reasks, usage,
                    window=judge.context_window, count=count)
    usages = [usage] + [js.Usage() for _ in JUDGED_METRICS[1:]]
    if not answer.ok:
        return [_judgment(sample, name, judge, None, "failed", answer.reason, answer.raw, None, used)
                for name, used in zip(JUDGED_METRICS, usages)]
    return [_judgment(sample, name, judge, answer.value[name].value, "ok", None, answer.raw,
                      answer.value[name].justification, used)
            for name, used in zip(JUDGED_METRICS, usages)]


def _judgment(sample: js.Sample, metric: str, judge: JudgeConfig, mark: int | None, status: str,
              reason: str | None, raw: str | None, justification: str | None, usage: js.Usage) -> js.Judgment:
    """`llm_score` is the raw mark (1-5, 0/1) or None (null: not applicable); `score` its [0, 1] value.
    status: ok (the judge or the derivation gave the mark), skipped (not applicable: not asked), failed
    (no usable reply after the re-asks, or a request/upstream failure), empty_response."""
    spec = GROUSE_METRICS[metric]
    detail = js.detail_json(justification=justification) if justification is not None else None
    return js.Judgment.of(sample, spec, status=status, prompt_version=judge.grouse.prompt_version,
                          judge_model=judge.model, usage=usage, score=spec.normalize(mark), llm_score=mark,
                          reason=reason, raw=raw, detail=detail)


def _not_asked(sample: js.Sample, metric: str, judge: JudgeConfig, status: str,
               reason: str | None) -> js.Judgment:
    return _judgment(sample, metric, judge, None, status, reason, None, None, js.Usage())


# --- the pipeline (Figure 4) --------------------------------------------------------------------------

def derive_acceptance(relevancy: int | None, completeness: int | None) -> tuple[int | None, int | None]:
    """(positive acceptance, negative rejection) from which marks are null, as in the paper's Table 6:
    a null relevancy means the answer declines to answer; a null completeness means the references hold
    no answer. Both null: a correct refusal (1, 1); only relevancy null: a wrong refusal (0, None); only
    completeness null: an answer where none exists (None, 0); neither null: (None, None)."""
    if relevancy is None:
        return (1, 1) if completeness is None else (0, None)
    return (None, 0) if completeness is None else (None, None)


def evaluate_sample(client: LLMClient, sample: js.Sample, judge: JudgeConfig,
                    count: js.Count | None = None) -> list[js.Judgment]:
    """The six judgments of one sample, in METRIC_ORDER, with at most four judge calls: relevancy and
    completeness always; usefulness only when the answer declines to answer (null relevancy);
    faithfulness unless the answer is a bare refusal (null relevancy and null usefulness) or usefulness
    failed (`judge.grouse.after_failed_usefulness`: fail, the reference code's, by default). PA and NR are
    computed from the first two marks. With `judge.grouse.ask_all` (the paper's unit-test protocol, its
    Figures 12-14) usefulness and faithfulness are asked whatever the gates say. The one-prompt variant
    asks all four in one call and keeps what the gates would have asked (all four under `ask_all`). The
    references are `sample.context` as given (not fitted here)."""
    ask_all = judge.grouse.ask_all
    if layout_of(judge.grouse.prompt_version).one_prompt:
        relevancy, completeness, usefulness, faithfulness = judge_in_one_prompt(client, sample, judge, count)
        judgments = [relevancy, completeness, usefulness, faithfulness,
                     *derived_judgments(sample, relevancy, completeness, judge)]
        return judgments if ask_all else as_pipeline(judgments, sample, judge)
    relevancy = judge_metric(client, GROUSE_METRICS["answer_relevancy"], sample, judge, count)
    completeness = judge_metric(client, GROUSE_METRICS["completeness"], sample, judge, count)
    gate = usefulness_gate(relevancy)
    usefulness = (judge_metric(client, GROUSE_METRICS["usefulness"], sample, judge, count)
                  if ask_all or gate is None else _not_asked(sample, "usefulness", judge, *gate))
    gate = faithfulness_gate(relevancy, usefulness, judge)
    faithfulness = (judge_metric(client, GROUSE_METRICS["faithfulness"], sample, judge, count)
                    if ask_all or gate is None else _not_asked(sample, "faithfulness", judge, *gate))
    return [relevancy, completeness, usefulness, faithfulness,
            *derived_judgments(sample, relevancy, completeness, judge)]


def usefulness_gate(relevancy: js.Judgment) -> tuple[str, str] | None:
    """None where the pipeline asks usefulness (the answer declines: null relevancy), else the status and
    reason it records without asking."""
    if relevancy.status == "failed":
        return "failed", "answer relevancy failed: applicability unknown"
    if relevancy.llm_score is None:
        return None
    return "skipped", "answer gives a response: not applicable"


# judge.grouse.after_failed_usefulness: "fail" is the authors' reference code (grounded_qa_evaluator.py marks
# faithfulness Failed when usefulness failed, or was failed for a failed relevancy, without asking it).
FAILED_USEFULNESS_REASON = ("usefulness failed: faithfulness not asked (after_failed_usefulness: fail, the "
                            "GroUSE reference code's rule)")


def faithfulness_gate(relevancy: js.Judgment, usefulness: js.Judgment,
                      judge: JudgeConfig) -> tuple[str, str] | None:
    """None where the pipeline asks faithfulness, else (status, reason): a bare refusal (null relevancy
    and null usefulness) has no information to check; a failed usefulness fails it unasked under
    `after_failed_usefulness: fail`."""
    if usefulness.status == "failed" and judge.grouse.after_failed_usefulness == "fail":
        return "failed", FAILED_USEFULNESS_REASON
    if (relevancy.status == "ok" and relevancy.llm_score is None and usefulness.status == "ok"
            and usefulness.llm_score is None):
        return "skipped", "bare refusal: no information to check"
    return None


def as_pipeline(judgments: list[js.Judgment], sample: js.Sample, judge: JudgeConfig) -> list[js.Judgment]:
    """What the conditional pipeline would have recorded, from the six judgments of an `ask_all` run: a
    call the gates would skip becomes not asked (the same prompt gets the same reply at temperature 0, so
    nothing is asked twice to compare the two protocols)."""
    by_metric = {j.metric: j for j in judgments}
    relevancy, usefulness = by_metric["answer_relevancy"], by_metric["usefulness"]
    if (gate := usefulness_gate(relevancy)) is not None:
        usefulness = _not_asked(sample, "usefulness", judge, *gate)
    faithfulness = by_metric["faithfulness"]
    if (gate := faithfulness_gate(relevancy, usefulness, judge)) is not None:
        faithfulness = _not_asked(sample, "faithfulness", judge, *gate)
    replaced = {"usefulness": usefulness, "faithfulness": faithfulness}
    return [replaced.get(j.metric, j) for j in judgments]


def derived_judgments(sample: js.Sample, relevancy: js.Judgment, completeness: js.Judgment,
                      judge: JudgeConfig) -> list[js.Judgment]:
    if relevancy.status == "failed" or completeness.status == "failed":
        return [_not_asked(sample, m, judge, "failed", "derived from a failed relevancy or completeness mark")
                for m in DERIVED_METRICS]
    values = derive_acceptance(relevancy.llm_score, completeness.llm_score)
    return [_judgment(sample, m, judge, v, "ok", None, None, None, js.Usage())
            for m, v in zip(DERIVED_METRICS, values)]


# --- the suite -------------------------------------------------------------------------------------

def fit_references(sample: js.Sample, judge: JudgeConfig, count: js.Count, budget: int) -> FittedPrompt:
    """Drop the lowest-ranked references until the longest judged prompt of the prompt version (the
    `paper` faithfulness prompt is longer than completeness) fits `budget` (the suite's window budget:
    judge.context_window less the reply, judge.grouse.max_tokens, and a chat-template margin)."""
    version = judge.grouse.prompt_version
    judged = [spec for spec in GROUSE_METRICS.values() if spec.judged]
    one_prompt = layout_of(version).one_prompt

    def longest(chunks: list[str]) -> str:
        fitted = replace(sample, context=chunks)
        if one_prompt:
            return render_one_prompt(fitted, version)
        return max((render_prompt(spec, fitted, version) for spec in judged), key=count)

    return fit_chunks(longest, list(sample.context), budget, count)


@dataclass(frozen=True)
class GrousePlan:
    """A unit's plan: the references (ranked context chunks) that fit the judge window."""

    references: list[str]


class GrouseSuite(js.JudgeSuite):
    """One unit per sample: the Figure-4 calls depend on each other (usefulness and faithfulness are
    asked or not after relevancy), so a sample is cached and checkpointed as a whole (six judgments)."""

    name = SUITE
    description = ("GroUSE (paper section 4.4): four judged metrics of grounded answers (Figure 4) "
                   "and two derived")
    rank = 1
    empty_score = None  # an empty answer is not sent and has no score, never a 0
    metrics = GROUSE_METRICS

    def plan(self, sample: js.Sample, judge: JudgeConfig, seed: int, count: js.Count) -> list[js.Unit]:
        fitted = fit_references(sample, judge, count, self.window_budget(judge))
        return [js.Unit(SUITE, sample, METRIC_ORDER, GrousePlan(fitted.chunks), len(fitted.chunks),
                        fitted.n_truncated)]

    def evaluate(self, client: LLMClient, unit: js.Unit, judge: JudgeConfig,
                 count: js.Count | None) -> list[js.Judgment]:
        sample = replace(unit.sample, context=list(unit.plan.references))
        judgments = evaluate_sample(client, sample, judge, count)
        for judgment in judgments:
            judgment.n_context_chunks = unit.n_context_chunks
            judgment.n_context_truncated = unit.n_context_truncated
        return judgments

    def not_judged(self, sample: js.Sample, judge: JudgeConfig, status: str,
                   reason: str) -> list[js.Judgment]:
        """Six records without a call (an empty answer: status empty_response; a failed generation:
        failed); no score, never a 0. single_request and reply_estimate: None (the defaults), whether
        usefulness and faithfulness are asked depends on the relevancy reply."""
        judgments = super().not_judged(sample, judge, status, reason)
        for judgment in judgments:
            judgment.n_context_chunks = len(sample.context)
        return judgments
