"""GroUSE judges (GroUSE paper, section 4.4, Figures 2 and 4): answer relevancy, completeness, usefulness,
faithfulness, and the derived positive acceptance and negative rejection of a grounded answer.

Each metric is a registered spec with its versioned prompt template (judges/prompts/grouse/<version>/).
Every prompt shows the reference answer first (answer_1) and the answer to grade second (answer_2) and asks
for a JSON object with chain-of-thought keys, a justification and a score per answer; only answer_2's score
is kept. This module builds requests and parses replies; the shared client (judges/client.py) sends them.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from judges import templates
from judges.client import ChatRequest, LLMClient, LLMRequestError
from judges.config import JudgeConfig

# JSON with chain of thought for two answers needs room. JudgeConfig.max_tokens defaults to 8 for CCRS's
# bare integers: below GROUSE_TOKENS_FLOOR it means DEFAULT_MAX_TOKENS; a larger value is used as given.
DEFAULT_MAX_TOKENS = 512
GROUSE_TOKENS_FLOOR = 64
# Structured output caps the free-text fields so that a weak judge cannot ramble to the token limit.
MAX_TEXT_CHARS = 160
METRIC_ORDER = ("answer_relevancy", "completeness", "usefulness", "faithfulness",
                "positive_acceptance", "negative_rejection")
JUDGED_METRICS = METRIC_ORDER[:4]
DERIVED_METRICS = METRIC_ORDER[4:]
_TAGS = ("question", "references", "reference", "answer_1", "answer_2")


@dataclass(frozen=True)
class GrouseMetricSpec:
    """One judged GroUSE metric: inputs, template file, score scale, and the chain-of-thought keys the
    JSON reply carries for each answer (they steer the reasoning; only `score` is required)."""

    name: str
    inputs: tuple[str, ...]
    template: str
    scale: tuple[int, int]
    cot_keys: tuple[str, ...]
    nullable: bool = True


GROUSE_METRICS: dict[str, GrouseMetricSpec] = {
    "answer_relevancy": GrouseMetricSpec(
        "answer_relevancy", ("question",), "answer_relevancy.txt", (1, 5), ("answer_says_no_document_answers",)),
    "completeness": GrouseMetricSpec(
        "completeness", ("question", "references"), "completeness.txt", (1, 5),
        ("references_answer_the_question",)),
    "usefulness": GrouseMetricSpec(
        "usefulness", ("question",), "usefulness.txt", (0, 1),
        ("answer_says_no_document_answers", "has_additional_information")),
    "faithfulness": GrouseMetricSpec(
        "faithfulness", ("question", "references"), "faithfulness.txt", (0, 1), ("sentence_analysis",)),
}


@dataclass
class GrouseSample:
    """One grounded answer to grade. `references` are the documents the answer cites as [1], [2], ..."""

    query_id: str
    system: str
    question: str
    answer: str
    expected_answer: str
    references: list[str]


@dataclass
class GrouseJudgment:
    """One metric of one sample. value: the raw mark (1-5, 0/1) or None (null: not applicable).
    status: ok (the judge or the derivation gave `value`), skipped (the pipeline did not ask: not
    applicable), failed (no usable reply after the re-asks, or a request/upstream failure)."""

    query_id: str
    system: str
    metric: str
    value: int | None
    score: float | None
    status: str
    reason: str | None
    raw: str | None
    justification: str | None
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    prompt_version: str
    judge_model: str


# --- templates ---------------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template("grouse", version, filename)


def _neutralize(text: str) -> str:
    """Untrusted text must not open or close our tags: rewrite our own tag names inside it."""
    for tag in _TAGS:
        text = re.sub(rf"<(/?)\s*{tag}\b([^<>]*)>?", rf"[\1{tag}\2]", text, flags=re.IGNORECASE)
    return text


def render_references(references: list[str]) -> str:
    if not references:
        return "<references>\n(no documents were retrieved)\n</references>"
    body = "\n".join(f'<reference index="{i}">\n{_neutralize(r)}\n</reference>' for i, r in enumerate(references, 1))
    return f"<references>\n{body}\n</references>"


def json_skeleton(spec: GrouseMetricSpec) -> str:
    low, high = spec.scale
    values = f"<integer {low}-{high}" + (" or null>" if spec.nullable else ">")
    keys = ", ".join(f'"{key}": ...' for key in spec.cot_keys)
    one = "{" + keys + f', "justification": "<short text>", "score": {values}' + "}"
    return '{"answer_1": ' + one + ', "answer_2": ' + one + "}"


def render_prompt(spec: GrouseMetricSpec, sample: GrouseSample, prompt_version: str) -> str:
    """Task introduction (citation format), metric instructions, JSON format, sample, the two answers."""
    common = load_template(prompt_version, "_common.txt")
    metric = load_template(prompt_version, spec.template)
    blocks = [common["intro"], common["preamble"], metric["instructions"],
              common["output"].replace("{skeleton}", json_skeleton(spec))]
    # Every prompt shows the question (the paper's faithfulness prompt does not; it costs little here).
    blocks.append(f"QUESTION:\n<question>\n{_neutralize(sample.question)}\n</question>")
    if "references" in spec.inputs:
        blocks.append("REFERENCES:\n" + render_references(sample.references))
    blocks.append(f"ANSWER 1 (reference answer, for comparison):\n<answer_1>\n{_neutralize(sample.expected_answer)}\n</answer_1>")
    blocks.append(f"ANSWER 2 (the answer to grade):\n<answer_2>\n{_neutralize(sample.answer)}\n</answer_2>")
    blocks.append(common["closing"])
    return "\n\n".join(blocks)


def reask_message(spec: GrouseMetricSpec, reason: str, prompt_version: str) -> str:
    text = load_template(prompt_version, "_common.txt")["reask"]
    low, high = spec.scale
    allowed = f"an integer from {low} to {high}" + (" or null" if spec.nullable else "")
    return text.replace("{reason}", reason).replace("{skeleton}", json_skeleton(spec)).replace("{allowed}", allowed)


# --- parsing -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedMark:
    ok: bool
    value: int | None = None
    reason: str | None = None
    justification: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def parse_mark(text: str | None, spec: GrouseMetricSpec) -> ParsedMark:
    """The reply must be one JSON object (a surrounding ``` fence is tolerated) holding `answer_2` with a
    `score` that is an integer within the metric's scale, or null where the metric is nullable."""
    stripped = (text or "").strip()
    if not stripped:
        return ParsedMark(False, reason="empty reply")
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError:
        return ParsedMark(False, reason="not valid JSON")
    if not isinstance(obj, dict) or not isinstance(obj.get("answer_2"), dict):
        return ParsedMark(False, reason="JSON without an answer_2 object")
    second = obj["answer_2"]
    if "score" not in second:
        return ParsedMark(False, reason="answer_2 without a score field")
    return _check_value(second, spec)


def _check_value(second: dict, spec: GrouseMetricSpec) -> ParsedMark:
    value = second["score"]
    justification = second.get("justification")
    justification = justification if isinstance(justification, str) else None
    details = {k: second[k] for k in spec.cot_keys if k in second}
    if value is None:
        if spec.nullable:
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


def score_schema(spec: GrouseMetricSpec) -> dict[str, Any]:
    low, high = spec.scale
    score = {"type": ["integer", "null"] if spec.nullable else "integer", "minimum": low, "maximum": high}
    text = {"type": "string", "maxLength": MAX_TEXT_CHARS}
    cot = {key: (text if key == "sentence_analysis" else {"type": "boolean"}) for key in spec.cot_keys}
    one = {"type": "object", "properties": {**cot, "justification": text, "score": score},
           "required": [*spec.cot_keys, "justification", "score"]}
    return {"type": "object", "properties": {"answer_1": one, "answer_2": one}, "required": ["answer_1", "answer_2"]}


# --- one metric ---------------------------------------------------------------------------------------

def build_request(spec: GrouseMetricSpec, sample: GrouseSample, cfg: JudgeConfig) -> ChatRequest:
    extra = {}
    if cfg.structured_output:
        extra = {"response_format": {"type": "json_schema",
                                     "json_schema": {"name": f"grouse_{spec.name}", "schema": score_schema(spec)}}}
    prompt = render_prompt(spec, sample, cfg.prompt_version)
    return ChatRequest(model=cfg.model, messages=[{"role": "user", "content": prompt}], temperature=0.0,
                       max_tokens=reply_tokens(cfg), extra_body=extra)


def reply_tokens(cfg: JudgeConfig) -> int:
    return cfg.max_tokens if cfg.max_tokens >= GROUSE_TOKENS_FLOOR else DEFAULT_MAX_TOKENS


def normalize(metric: str, value: int | None) -> float | None:
    """Scores in [0, 1]: Likert marks (x - 1) / 4, binary marks as they are, null stays None."""
    if value is None:
        return None
    if metric in ("answer_relevancy", "completeness"):
        return (value - 1) / 4.0
    return float(value)


def reply_budget(messages: list[dict[str, str]], wanted: int, cfg: JudgeConfig,
                 count: Callable[[str], int] | None) -> int:
    """New tokens to ask for: `wanted`, lowered so that prompt + reply fit cfg.context_window (a small
    judge window such as the CPU model's 2048 tokens would otherwise reject the request)."""
    if count is None:
        return wanted
    used = count("\n\n".join(m["content"] for m in messages)) + 8 * len(messages)
    return max(16, min(wanted, cfg.context_window - used))


def judge_metric(client: LLMClient, spec: GrouseMetricSpec, sample: GrouseSample, cfg: JudgeConfig,
                 count: Callable[[str], int] | None = None) -> GrouseJudgment:
    """Ask, parse, re-ask at most cfg.max_reasks times with a stricter instruction; a failure keeps the
    last raw reply and the reason. `count` (prompt -> tokens) fits the reply budget to the window."""
    request = build_request(spec, sample, cfg)
    messages = list(request.messages)
    usage = {"attempts": 0, "prompt_tokens": 0, "completion_tokens": 0}
    raw, reason = None, "not asked"
    for _ in range(cfg.max_reasks + 1):
        try:
            max_tokens = reply_budget(messages, request.max_tokens, cfg, count)
            result = client.chat(ChatRequest(request.model, messages, request.temperature, max_tokens,
                                             request.extra_body))
        except LLMRequestError as exc:
            usage["attempts"] += exc.attempts or 1
            return _judgment(sample, spec.name, cfg, None, "failed", f"request failed: {exc}", raw, None, usage)
        usage["attempts"] += 1
        usage["prompt_tokens"] += result.prompt_tokens
        usage["completion_tokens"] += result.completion_tokens
        raw = result.text
        parsed = parse_mark(raw, spec)
        if parsed.ok:
            return _judgment(sample, spec.name, cfg, parsed.value, "ok", None, raw, parsed.justification, usage)
        reason = parsed.reason or "invalid"
        messages = list(request.messages) + [{"role": "assistant", "content": raw},
                                             {"role": "user", "content": reask_message(spec, reason, cfg.prompt_version)}]
    return _judgment(sample, spec.name, cfg, None, "failed", f"invalid after {cfg.max_reasks} re-asks: {reason}",
                     raw, None, usage)


def _judgment(sample: GrouseSample, metric: str, cfg: JudgeConfig, value: int | None, status: str,
              reason: str | None, raw: str | None, justification: str | None, usage: dict) -> GrouseJudgment:
    return GrouseJudgment(sample.query_id, sample.system, metric, value, normalize(metric, value), status, reason,
                          raw, justification, usage["attempts"], usage["prompt_tokens"], usage["completion_tokens"],
                          cfg.prompt_version, cfg.model)


def _not_asked(sample: GrouseSample, metric: str, cfg: JudgeConfig, status: str, reason: str) -> GrouseJudgment:
    zero = {"attempts": 0, "prompt_tokens": 0, "completion_tokens": 0}
    return _judgment(sample, metric, cfg, None, status, reason, None, None, zero)


# --- the pipeline (Figure 4) --------------------------------------------------------------------------

def derive_acceptance(relevancy: int | None, completeness: int | None) -> tuple[int | None, int | None]:
    """(positive acceptance, negative rejection) from which marks are null, as in the paper's Table 6:
    a null relevancy means the answer declines to answer; a null completeness means the references hold
    no answer. Both null: a correct refusal (1, 1); only relevancy null: a wrong refusal (0, None); only
    completeness null: an answer where none exists (None, 0); neither null: (None, None)."""
    if relevancy is None:
        return (1, 1) if completeness is None else (0, None)
    return (None, 0) if completeness is None else (None, None)


def evaluate_sample(client: LLMClient, sample: GrouseSample, cfg: JudgeConfig,
                    count: Callable[[str], int] | None = None) -> list[GrouseJudgment]:
    """At most four judge calls: relevancy and completeness always; usefulness only when the answer
    declines to answer (null relevancy); faithfulness unless the answer is a bare refusal (null
    relevancy and null usefulness). PA and NR are computed from the first two marks."""
    relevancy = judge_metric(client, GROUSE_METRICS["answer_relevancy"], sample, cfg, count)
    completeness = judge_metric(client, GROUSE_METRICS["completeness"], sample, cfg, count)
    if relevancy.status == "failed":
        usefulness = _not_asked(sample, "usefulness", cfg, "failed", "answer relevancy failed: applicability unknown")
    elif relevancy.value is None:
        usefulness = judge_metric(client, GROUSE_METRICS["usefulness"], sample, cfg, count)
    else:
        usefulness = _not_asked(sample, "usefulness", cfg, "skipped", "answer gives a response: not applicable")
    if relevancy.status == "ok" and relevancy.value is None and usefulness.status == "ok" and usefulness.value is None:
        faithfulness = _not_asked(sample, "faithfulness", cfg, "skipped", "bare refusal: no information to check")
    else:
        faithfulness = judge_metric(client, GROUSE_METRICS["faithfulness"], sample, cfg, count)
    return [relevancy, completeness, usefulness, faithfulness, *derived_judgments(sample, relevancy, completeness, cfg)]


def derived_judgments(sample: GrouseSample, relevancy: GrouseJudgment, completeness: GrouseJudgment,
                      cfg: JudgeConfig) -> list[GrouseJudgment]:
    if relevancy.status == "failed" or completeness.status == "failed":
        return [_not_asked(sample, m, cfg, "failed", "derived from a failed relevancy or completeness mark")
                for m in DERIVED_METRICS]
    values = derive_acceptance(relevancy.value, completeness.value)
    return [_not_asked(sample, m, cfg, "ok", None) if v is None else
            _judgment(sample, m, cfg, v, "ok", None, None, None, {"attempts": 0, "prompt_tokens": 0,
                                                                   "completion_tokens": 0})
            for m, v in zip(DERIVED_METRICS, values)]
