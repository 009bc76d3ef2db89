"""CCRS judges (paper section 2.3, Appendix B): the five constructs as a registered judge suite.

Each metric declares its inputs (in the paper's order) and template; this module renders one request per
(sample, metric), parses the judge's integer, and combines AC with exact match. The shared client
(judges/client.py) sends the requests; the stage (tasks/judge.py) fans them out.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from judges import suite as js
from judges import templates
from judges.client import ChatRequest, LLMClient
from judges.config import JudgeConfig
from judges.em import exact_match
from judges.parsers import ParsedScore, parse_integer_mark
from judges.scoring import ExpectedMark, expected_mark

SUITE = "ccrs"
# Canonical input order of the shared-prefix layout: the long context first, so that CC, ID, AC and IR
# of one sample share the (context, response) prefix in vLLM's prefix cache.
CANONICAL_ORDER = ("context", "response", "question", "ground_truth")
INPUT_TAGS = {"question": "question", "context": "context", "response": "response",
              "ground_truth": "ground_truth"}
# How a version shows its inputs (its `_common.txt` [input_format]): `tagged` (v1) puts each between its
# own tags, untrusted text neutralized; `plain` (paper) shows a label and the text as it is.
INPUT_FORMATS = ("tagged", "plain")
EM_COMBINED = frozenset({"AC"})  # AC = lambda * EM + (1 - lambda) * LLM
SCALE = (0, 100)  # every CCRS metric's mark: the parser's range, the JSON schema's, the score's (normalize)


def _metric(name: str, inputs: tuple[str, ...], description: str) -> js.Metric:
    reads = ("exact_answers",) if name in EM_COMBINED else ()  # EM's synonyms
    return js.Metric(SUITE, name, SCALE, inputs, (f"{name.lower()}.txt",), description, reads=reads)


CCRS_METRICS: dict[str, js.Metric] = {
    "CC": _metric("CC", ("context", "response"),
                  "Contextual Coherence: consistency of the response with the context"),
    "QR": _metric("QR", ("question", "response"), "Question Relevance: how directly the response answers"),
    "ID": _metric("ID", ("question", "context", "response"), "Information Density: informative and concise"),
    "AC": _metric("AC", ("context", "response", "ground_truth"),
                  "Answer Correctness: 0.7 EM + 0.3 LLM judge"),
    "IR": _metric("IR", ("context", "response", "ground_truth"),
                  "Information Recall: ground-truth facts covered"),
}


# --- templates --------------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template(SUITE, version, filename)


def prompt_versions() -> tuple[str, ...]:
    """The selectable `JudgeConfig.ccrs.prompt_version`s: the folders under judges/prompts/ccrs/."""
    return templates.versions(SUITE)


def _require_shared_prefix_layout(cfg: JudgeConfig, common: dict[str, str]) -> None:
    if "shared_intro" not in common:
        raise ValueError(f"judge.ccrs.shared_prefix reorders the inputs, which prompt_version "
                         f"{cfg.ccrs.prompt_version!r} does not allow (it keeps the paper's input order); "
                         f"set shared_prefix: false or use a version with a shared-prefix layout")


def input_labels(common: dict[str, str]) -> dict[str, str]:
    """The [labels] section: one `input: label` line per input."""
    return _parse_labels(common["labels"])


@lru_cache(maxsize=32)
def _parse_labels(section: str) -> dict[str, str]:
    pairs = (line.split(":", 1) for line in section.splitlines() if line.strip())
    return {name.strip(): label.strip() for name, label in pairs}


@lru_cache(maxsize=4096)
def _neutral_chunk(chunk: str) -> str:
    """A chunk appears in up to 4 prompts of each of 3 readers, planned one after another."""
    return js.neutralize(chunk)


def render_input(name: str, value: str | list[str], common: dict[str, str]) -> str:
    label = input_labels(common)[name]
    chunks = value if isinstance(value, list) else [value]
    if common["input_format"] == "plain":
        return f"{label}:\n" + "\n\n".join(str(chunk) for chunk in chunks)
    tag = INPUT_TAGS[name]
    if name == "context":
        body = "\n".join(
            f'<chunk rank="{i}">\n{_neutral_chunk(chunk)}\n</chunk>' for i, chunk in enumerate(chunks, 1)
        )
    else:
        body = js.neutralize(str(value))
    return f"{label}:\n<{tag}>\n{body}\n</{tag}>"


def _output_instruction(cfg: JudgeConfig, common: dict[str, str]) -> str | None:
    if cfg.ccrs.justification:
        return common["justification"]
    if cfg.structured_output:
        return common["structured"]
    return None


def render_prompt(spec: js.Metric, values: dict[str, Any], cfg: JudgeConfig) -> str:
    """The user message for one construct. Default layout: intro, inputs in the paper's order, task.
    Shared-prefix layout: generic intro and inputs in CANONICAL_ORDER first, the construct's text last.
    The untrusted-data preamble is there only in versions that have one (v1, not paper)."""
    template = load_template(cfg.ccrs.prompt_version, spec.templates[0])
    common = load_template(cfg.ccrs.prompt_version, "_common.txt")
    if common["input_format"] not in INPUT_FORMATS:
        raise ValueError(f"ccrs/{cfg.ccrs.prompt_version}/_common.txt: [input_format] must be one of "
                         f"{INPUT_FORMATS}, got {common['input_format']!r}")
    task = template["task"]
    output = _output_instruction(cfg, common)
    if output:
        task = re.sub(r"^Output:.*$", output, task, flags=re.MULTILINE)
    preamble = [common["preamble"]] if "preamble" in common else []
    if cfg.ccrs.shared_prefix:
        _require_shared_prefix_layout(cfg, common)
        order = [name for name in CANONICAL_ORDER if name in spec.inputs]
        head = [common["shared_intro"], *preamble]
        tail = [template["intro"], task]
    else:
        order = list(spec.inputs)
        head = [template["intro"], *preamble]
        tail = [task]
    blocks = [render_input(name, values[name], common) for name in order]
    return "\n\n".join(head + blocks + tail)


def reask_message(reason: str, cfg: JudgeConfig, expect_json: bool = False) -> str:
    section = "reask_json" if expect_json else "reask"
    return load_template(cfg.ccrs.prompt_version, "_common.txt")[section].replace("{reason}", reason)


# --- parsing ----------------------------------------------------------------------------------------

def parse_score(text: str | None, expect_json: bool = False, scale: tuple[int, int] = SCALE,
                lenient: bool = False) -> ParsedScore:
    """judges.parsers.parse_integer_mark on the CCRS scale by default."""
    return parse_integer_mark(text, scale, expect_json, lenient)


def score_schema(justification: bool = False) -> dict[str, Any]:
    """Only the keys asked for, and nothing else: a free-running justification the prompt did not ask
    for would otherwise eat the token budget and leave the JSON unclosed."""
    low, high = SCALE
    properties: dict[str, Any] = {"score": {"type": "integer", "minimum": low, "maximum": high}}
    if justification:
        properties["justification"] = {"type": "string"}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def sampling_extra(cfg: JudgeConfig) -> dict[str, Any]:
    """Extra request fields: vLLM's OpenAI server accepts `response_format` with a JSON schema."""
    if not cfg.structured_output:
        return {}
    schema = score_schema(cfg.ccrs.justification)
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "ccrs_score", "schema": schema}}}


# --- AC ----------------------------------------------------------------------------------------------

def combine_ac(em: float, llm_score: float, ac_lambda: float) -> float:
    """AC = lambda * EM + (1 - lambda) * LLM_AC normalized (paper section 2.3.2: LLM_AC / 100)."""
    return ac_lambda * em + CCRS_METRICS["AC"].normalize(llm_score, weight=1.0 - ac_lambda)


def sample_em(sample: js.Sample, cfg: JudgeConfig) -> float:
    references = [sample.ground_truth]
    if cfg.ccrs.em_use_exact_answer_synonyms:
        references += sample.exact_answers
    return exact_match(sample.response, references)


# --- the suite -------------------------------------------------------------------------------------

def _expects_json(cfg: JudgeConfig) -> bool:
    return cfg.structured_output or cfg.ccrs.justification


def reply_tokens(cfg: JudgeConfig) -> int:
    return max(cfg.ccrs.max_tokens, 96) if _expects_json(cfg) else cfg.ccrs.max_tokens


def sample_values(sample: js.Sample, context: list[str]) -> dict[str, Any]:
    return {"question": sample.question, "response": sample.response, "ground_truth": sample.ground_truth,
            "context": context}


def build_request(spec: js.Metric, sample: js.Sample, context: list[str], cfg: JudgeConfig) -> ChatRequest:
    return prompt_request(render_prompt(spec, sample_values(sample, context), cfg), cfg)


def prompt_request(prompt: str, cfg: JudgeConfig) -> ChatRequest:
    """The one place a rendered CCRS prompt becomes a request: what `plan` keys the cache on is what
    `build_request` sends."""
    request = js.user_request(cfg.model, prompt, reply_tokens(cfg), sampling_extra(cfg))
    if cfg.scoring == "expected":
        request.top_logprobs = cfg.expected.top_logprobs
        if cfg.expected.continuation == "batched":  # the continuations extend the prompt as it was rendered
            request.extra_body["return_prompt_text"] = True
    return request


def parser(spec: js.Metric, cfg: JudgeConfig):
    def parse(text: str | None) -> js.Parsed:
        parsed = parse_score(text, expect_json=_expects_json(cfg), scale=spec.scale,
                             lenient=cfg.ccrs.lenient_parse)
        return js.Parsed(parsed.score is not None, parsed.score, parsed.reason)

    return parse


def judgment(spec: js.Metric, sample: js.Sample, cfg: JudgeConfig, llm_score: int | None, status: str,
             reason: str | None, raw: str | None, usage: js.Usage, expected: ExpectedMark | None = None
             ) -> js.Judgment:
    """`score` from the expected mark where there is one, else from the integer (`scoring` says which)."""
    em = sample_em(sample, cfg) if spec.name in EM_COMBINED else None
    mark: float | None = llm_score
    scoring = "integer"
    if expected is not None:
        scoring = "expected" if expected.value is not None else "integer_fallback"
        mark = expected.value if expected.value is not None else llm_score
    score = spec.normalize(mark)
    if mark is not None and spec.name in EM_COMBINED:
        score = combine_ac(em or 0.0, mark, cfg.ccrs.ac_lambda)
    j = js.Judgment.of(sample, spec, status=status, prompt_version=cfg.ccrs.prompt_version,
                       judge_model=cfg.model, usage=usage, score=score, llm_score=llm_score, em=em,
                       reason=reason, raw=raw, scoring=scoring)
    if expected is not None:
        j.llm_score_expected, j.score_mass = expected.value, expected.mass
        j.detail = expected_detail(expected)
    return j


def expected_detail(expected: ExpectedMark) -> str | None:
    walk = expected.distribution
    if walk is None:
        return js.detail_json(fallback=expected.reason)
    batched = {} if walk.rounds is None else {"requests": walk.rounds, "prompts": walk.prompts}
    return js.detail_json(fallback=expected.reason, expansions=walk.expansions, **batched,
                          off_scale=round(walk.off_scale, 4), unseen=round(walk.unseen, 4),
                          unresolved=round(walk.unresolved, 4),
                          marks={str(k): round(v, 4) for k, v in sorted(walk.probabilities.items())})


def run_judgment(client: LLMClient, spec: js.Metric, sample: js.Sample, request: ChatRequest,
                 cfg: JudgeConfig) -> js.Judgment:
    """Ask, parse, re-ask at most cfg.max_reasks times; a failure is recorded with raw text and reason.
    `attempts` counts the asks (1 + re-asks); the client's transport retries are not counted there."""
    usage = js.Usage()
    answer = js.ask(client, request, parser(spec, cfg),
                    lambda reason: reask_message(reason, cfg, _expects_json(cfg)), cfg.max_reasks, usage)
    if not answer.ok:
        return judgment(spec, sample, cfg, None, "failed", answer.reason, answer.raw, usage)
    expected = None
    if cfg.scoring == "expected":
        expected = expected_mark(client, request, answer.messages, answer.raw or "", answer.logprobs,
                                 answer.value, spec.scale, cfg.expected, usage.add, answer.prompt_text)
    return judgment(spec, sample, cfg, answer.value, "ok", None, answer.raw, usage, expected)


def empty_judgment(spec: js.Metric, sample: js.Sample, cfg: JudgeConfig) -> js.Judgment:
    j = judgment(spec, sample, cfg, None, "empty_response", js.EMPTY_REASON, None, js.Usage())
    j.score, j.em = 0.0, (0.0 if spec.name in EM_COMBINED else None)
    return j


class CcrsSuite(js.JudgeSuite):
    """One request per (sample, metric): each is cached and checkpointed on its own."""

    name = SUITE
    description = "CCRS (paper section 2.3): five zero-shot 0-100 judge metrics"
    rank = 0
    reads_scoring = True  # judge.scoring: expected applies to this suite (the others score integers)
    metrics = CCRS_METRICS

    def selected_metrics(self, judge: JudgeConfig) -> tuple[str, ...]:
        return tuple(judge.ccrs.metrics)

    def reply_tokens(self, judge: JudgeConfig) -> int:
        return reply_tokens(judge)

    def check_config(self, judge: JudgeConfig) -> None:
        """A version that does not exist, or a layout it does not offer (judge.ccrs.shared_prefix), is a
        config error before any work."""
        super().check_config(judge)
        if judge.ccrs.shared_prefix:
            _require_shared_prefix_layout(judge, load_template(judge.ccrs.prompt_version, "_common.txt"))

    def plan(self, sample: js.Sample, judge: JudgeConfig, seed: int, count: js.Count) -> list[js.Unit]:
        from judges.readers import fit_chunks

        units = []
        for name in self.selected_metrics(judge):
            spec = CCRS_METRICS[name]
            chunks = sample.context if "context" in spec.inputs else []
            fitted = fit_chunks(lambda c, spec=spec: render_prompt(spec, sample_values(sample, c), judge),
                                chunks, self.window_budget(judge), count)
            # plan=None: the rendered prompt is not kept (unit_request renders it again where it is sent);
            # keeping every prompt of a paper-scale run took ~15 KB a unit, gigabytes in the driver.
            units.append(js.Unit(SUITE, sample, (name,), None, len(fitted.chunks), fitted.n_truncated))
        return units

    def evaluate(self, client: LLMClient, unit: js.Unit, judge: JudgeConfig,
                 count: js.Count | None) -> list[js.Judgment]:
        return [run_judgment(client, CCRS_METRICS[unit.metrics[0]], unit.sample, unit_request(unit, judge),
                             judge)]

    def not_judged(self, sample: js.Sample, judge: JudgeConfig, status: str,
                   reason: str) -> list[js.Judgment]:
        if status == "empty_response":
            return [empty_judgment(CCRS_METRICS[name], sample, judge)
                    for name in self.selected_metrics(judge)]
        return [judgment(CCRS_METRICS[name], sample, judge, None, status, reason, None, js.Usage())
                for name in self.selected_metrics(judge)]

    def single_request(self, unit: js.Unit, judge: JudgeConfig) -> ChatRequest:
        """Every CCRS unit is one call (re-asks aside): its request, rendered again from the unit."""
        return unit_request(unit, judge)

    def reply_estimate(self, request: ChatRequest, judge: JudgeConfig) -> str | None:
        """A bare mark, or its JSON object under structured output; a justification's length is not known
        (None: its budget)."""
        if judge.ccrs.justification:
            return None
        return '{"score": 50}' if judge.structured_output else "50"


def unit_request(unit: js.Unit, judge: JudgeConfig) -> ChatRequest:
    """The request a planned CCRS unit sends: its metric's prompt over the sample's first
    `n_context_chunks` chunks (the ones the truncation policy kept when the unit was planned)."""
    spec = CCRS_METRICS[unit.metrics[0]]
    chunks = unit.sample.context[: unit.n_context_chunks] if "context" in spec.inputs else []
    return build_request(spec, unit.sample, chunks, judge)


