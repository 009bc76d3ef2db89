"""CCRS judges (paper section 2.3, Appendix B): five constructs declared as small registered specs.

A spec names the construct's inputs and its template file; this module renders requests, parses the
judge's reply and combines AC with exact match. The shared client (judges/client.py) sends the requests.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from judges import templates
from judges.client import ChatRequest, LLMClient, LLMRequestError
from judges.config import JudgeConfig
from judges.em import exact_match

# Canonical input order of the shared-prefix layout: the long context first, so that CC, ID, AC and IR
# of one sample share the (context, response) prefix in vLLM's prefix cache.
CANONICAL_ORDER = ("context", "response", "question", "ground_truth")
INPUT_LABELS = {"question": "QUESTION", "context": "CONTEXT", "response": "RESPONSE", "ground_truth": "GROUND TRUTH"}
INPUT_TAGS = {"question": "question", "context": "context", "response": "response", "ground_truth": "ground_truth"}


@dataclass(frozen=True)
class MetricSpec:
    """One CCRS construct: its inputs (in the paper's order), template file and score scale."""

    name: str
    inputs: tuple[str, ...]
    template: str
    scale: tuple[int, int] = (0, 100)
    combine_with_em: bool = False


CCRS_METRICS: dict[str, MetricSpec] = {
    "CC": MetricSpec("CC", ("context", "response"), "cc.txt"),
    "QR": MetricSpec("QR", ("question", "response"), "qr.txt"),
    "ID": MetricSpec("ID", ("question", "context", "response"), "id.txt"),
    "AC": MetricSpec("AC", ("context", "response", "ground_truth"), "ac.txt", combine_with_em=True),
    "IR": MetricSpec("IR", ("context", "response", "ground_truth"), "ir.txt"),
}


@dataclass
class JudgeInput:
    """The untrusted texts of one (query, system) sample. `context` is ranked, best chunk first."""

    query_id: str
    system: str
    question: str
    response: str
    answer: str
    ground_truth: str
    context: list[str]
    exact_answers: list[str] = field(default_factory=list)


@dataclass
class Judgment:
    query_id: str
    system: str
    metric: str
    score: float | None
    llm_score: int | None
    em: float | None
    status: str  # ok | failed | empty_response
    reason: str | None
    raw: str | None
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    prompt_version: str
    judge_model: str
    n_context_chunks: int = 0
    n_context_truncated: int = 0
    cached: bool = False


# --- templates --------------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template("ccrs", version, filename)


def _neutralize(text: str) -> str:
    """Untrusted text must not close our delimiters early: rewrite our own tag names inside it."""
    for tag in list(INPUT_TAGS.values()) + ["chunk"]:
        text = re.sub(rf"<(/?)\s*{tag}\b([^<>]*)>?", rf"[\1{tag}\2]", text, flags=re.IGNORECASE)
    return text


def render_input(name: str, value: str | list[str]) -> str:
    tag = INPUT_TAGS[name]
    if name == "context":
        chunks = value if isinstance(value, list) else [value]
        body = "\n".join(
            f'<chunk rank="{i}">\n{_neutralize(chunk)}\n</chunk>' for i, chunk in enumerate(chunks, 1)
        )
    else:
        body = _neutralize(str(value))
    return f"{INPUT_LABELS[name]}:\n<{tag}>\n{body}\n</{tag}>"


def _output_instruction(cfg: JudgeConfig, common: dict[str, str]) -> str | None:
    if cfg.justification:
        return common["justification"]
    if cfg.structured_output:
        return 'Output: reply with a JSON object {"score": <integer 0-100>} and nothing else.'
    return None


def render_prompt(spec: MetricSpec, values: dict[str, Any], cfg: JudgeConfig) -> str:
    """The user message for one construct. Paper layout: intro, inputs in the paper's order, task.
    Shared-prefix layout: generic intro and inputs in CANONICAL_ORDER first, the construct's text last."""
    template = load_template(cfg.prompt_version, spec.template)
    common = load_template(cfg.prompt_version, "_common.txt")
    task = template["task"]
    output = _output_instruction(cfg, common)
    if output:
        task = re.sub(r"^Output:.*$", output, task, flags=re.MULTILINE)
    if cfg.shared_prefix:
        order = [name for name in CANONICAL_ORDER if name in spec.inputs]
        head = [common["shared_intro"], common["preamble"]]
        tail = [template["intro"], task]
    else:
        order = list(spec.inputs)
        head = [template["intro"], common["preamble"]]
        tail = [task]
    blocks = [render_input(name, values[name]) for name in order]
    return "\n\n".join(head + blocks + tail)


def reask_message(reason: str, cfg: JudgeConfig, expect_json: bool = False) -> str:
    section = "reask_json" if expect_json else "reask"
    return load_template(cfg.prompt_version, "_common.txt")[section].replace("{reason}", reason)


# --- parsing ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedScore:
    score: int | None
    reason: str | None
    justification: str | None = None


_BARE_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def parse_score(text: str | None, expect_json: bool = False, scale: tuple[int, int] = (0, 100),
                lenient: bool = False) -> ParsedScore:
    """Strict: the reply must be an integer within the scale (surrounding whitespace and one trailing
    period tolerated); with expect_json, a JSON object whose "score" is such an integer. Anything else
    is invalid and carries the reason. `lenient` (off by default) also accepts prose that contains
    exactly one number, an integer within the scale."""
    stripped = (text or "").strip()
    if not stripped:
        return ParsedScore(None, "empty reply")
    justification = None
    if expect_json:
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError:
            return ParsedScore(None, "not valid JSON")
        if not isinstance(obj, dict) or "score" not in obj:
            return ParsedScore(None, "JSON without a score field")
        justification = obj.get("justification")
        value = obj["score"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return ParsedScore(None, f"score is not an integer: {value!r}")
        stripped = str(value).strip()
    candidate = stripped.removesuffix(".")
    if not _BARE_NUMBER.fullmatch(candidate):
        numbers = _BARE_NUMBER.findall(candidate)
        if lenient and len(numbers) == 1 and re.fullmatch(r"\d+", numbers[0]):
            return parse_score(numbers[0], scale=scale)
        if numbers:
            return ParsedScore(None, "prose around the number")
        return ParsedScore(None, "no number in reply")
    if not re.fullmatch(r"[+-]?\d+", candidate):
        return ParsedScore(None, "not an integer")
    score = int(candidate)
    low, high = scale
    if not low <= score <= high:
        return ParsedScore(None, f"out of range {low}-{high}: {score}")
    return ParsedScore(score, None, justification)


def score_schema(justification: bool = False) -> dict[str, Any]:
    """Only the keys asked for, and nothing else: a free-running justification the prompt did not ask
    for would otherwise eat the token budget and leave the JSON unclosed."""
    properties: dict[str, Any] = {"score": {"type": "integer", "minimum": 0, "maximum": 100}}
    if justification:
        properties["justification"] = {"type": "string"}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def sampling_extra(cfg: JudgeConfig) -> dict[str, Any]:
    """Extra request fields: vLLM's OpenAI server accepts `response_format` with a JSON schema."""
    if not cfg.structured_output:
        return {}
    schema = score_schema(cfg.justification)
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "ccrs_score", "schema": schema}}}


# --- AC ----------------------------------------------------------------------------------------------

def combine_ac(em: float, llm_score: int, ac_lambda: float) -> float:
    """AC = lambda * EM + (1 - lambda) * LLM_AC / 100 (paper section 2.3.2)."""
    return ac_lambda * em + (1.0 - ac_lambda) * llm_score / 100.0


def sample_em(sample: JudgeInput, cfg: JudgeConfig) -> float:
    references = [sample.ground_truth]
    if cfg.em_use_exact_answer_synonyms:
        references += sample.exact_answers
    return exact_match(sample.answer, references)


# --- one judgment -------------------------------------------------------------------------------------

def build_request(spec: MetricSpec, sample: JudgeInput, context: list[str], cfg: JudgeConfig) -> ChatRequest:
    values = {"question": sample.question, "response": sample.response, "ground_truth": sample.ground_truth,
              "context": context}
    prompt = render_prompt(spec, values, cfg)
    max_tokens = cfg.max_tokens if not (cfg.justification or cfg.structured_output) else max(cfg.max_tokens, 96)
    return ChatRequest(model=cfg.model, messages=[{"role": "user", "content": prompt}], temperature=0.0,
                       max_tokens=max_tokens, extra_body=sampling_extra(cfg))


def empty_judgment(spec: MetricSpec, sample: JudgeInput, cfg: JudgeConfig) -> Judgment:
    em = 0.0 if spec.combine_with_em else None
    return Judgment(sample.query_id, sample.system, spec.name, 0.0, None, em, "empty_response",
                    "empty response scores 0 without calling the judge", None, 0, 0, 0,
                    cfg.prompt_version, cfg.model)


def run_judgment(
    client: LLMClient,
    spec: MetricSpec,
    sample: JudgeInput,
    request: ChatRequest,
    cfg: JudgeConfig,
) -> Judgment:
    """Ask, parse, re-ask at most cfg.max_reasks times; a failure is recorded with raw text and reason.
    `attempts` counts the asks (1 + re-asks); the client's transport retries are not counted there."""
    expect_json = cfg.structured_output or cfg.justification
    messages = list(request.messages)
    prompt_tokens = completion_tokens = attempts = 0
    raw: str | None = None
    reason = "not asked"
    for _ in range(cfg.max_reasks + 1):
        try:
            result = client.chat(ChatRequest(request.model, messages, request.temperature, request.max_tokens,
                                             request.extra_body))
        except LLMRequestError as exc:
            attempts += exc.attempts or 1
            return make_judgment(spec, sample, cfg, None, "failed", f"request failed: {exc}", raw, attempts,
                                 prompt_tokens, completion_tokens)
        attempts += 1
        prompt_tokens += result.prompt_tokens
        completion_tokens += result.completion_tokens
        raw = result.text
        parsed = parse_score(raw, expect_json=expect_json, scale=spec.scale, lenient=cfg.lenient_parse)
        if parsed.score is not None:
            return make_judgment(spec, sample, cfg, parsed.score, "ok", None, raw, attempts, prompt_tokens,
                                 completion_tokens)
        reason = parsed.reason or "invalid"
        messages = list(request.messages) + [
            {"role": "assistant", "content": raw},
            {"role": "user", "content": reask_message(reason, cfg, expect_json)},
        ]
    return make_judgment(spec, sample, cfg, None, "failed", f"invalid after {cfg.max_reasks} re-asks: {reason}",
                         raw, attempts, prompt_tokens, completion_tokens)


def make_judgment(spec: MetricSpec, sample: JudgeInput, cfg: JudgeConfig, llm_score: int | None, status: str,
                  reason: str | None, raw: str | None, attempts: int, prompt_tokens: int,
                  completion_tokens: int) -> Judgment:
    em = sample_em(sample, cfg) if spec.combine_with_em else None
    score = None
    if llm_score is not None:
        score = combine_ac(em or 0.0, llm_score, cfg.ac_lambda) if spec.combine_with_em else llm_score / 100.0
    return Judgment(sample.query_id, sample.system, spec.name, score, llm_score, em, status, reason, raw,
                    attempts, prompt_tokens, completion_tokens, cfg.prompt_version, cfg.model)
