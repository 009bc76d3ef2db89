"""The GQM thesis' test-set generator (Table 5.1): questions of six types asked of an LLM about the passages
drawn for them (sources.py), written as a dataset `ccrs run --dataset` reads (the rag-mini-bioasq Parquet
layout, each question with its `question_type`).

The prompts are ours (judges/prompts/gqm_testset/v1/). A reply without a QUESTION and an ANSWER line, or a
request that failed, is a recorded failure: counted per type and listed with its reason in testset.json.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from judges.client import ChatRequest, LLMRequestError
from judges.templates import load_template
from pipelines.reporting.gqm_types import QUESTION_TYPES
from retrievers.loaders import RAG_MINI_CORPUS, RAG_MINI_QA
from pipelines.tools.gqm.sources import Draw, Passage

PROMPT_SUITE, PROMPT_VERSION = "gqm_testset", "v1"
MANIFEST = "testset.json"
REPLY_EXCERPT = 300
_LABEL = re.compile(r"^[\s*#>_-]*(question|answer)[\s*_]*\d*[\s*_]*[:：]", re.IGNORECASE | re.MULTILINE)


class ReplyError(ValueError):
    """A reply the generator cannot read as a question and its answer."""


@dataclass(frozen=True)
class Generated:
    query_id: str
    question_type: str
    question: str
    answer: str
    relevant_passage_ids: list[str]


@dataclass(frozen=True)
class Failure:
    query_id: str
    question_type: str
    passage_ids: list[str]
    reason: str
    reply: str | None


# --- prompt and reply ---------------------------------------------------------------------------------

def render_prompt(draw: Draw, version: str = PROMPT_VERSION) -> str:
    common = load_template(PROMPT_SUITE, version, "_common.txt")
    task = load_template(PROMPT_SUITE, version, f"{draw.question_type}.txt")["task"]
    passages = "\n".join(f'<passage n="{n}">\n{p.text}\n</passage>' for n, p in enumerate(draw.passages, 1))
    return f"{common['intro']}\n\n{passages}\n\n{task}\n\n{common['reply']}"


def parse_reply(text: str) -> tuple[str, str]:
    """(question, answer) from the reply's QUESTION and ANSWER labels (case and markdown emphasis
    ignored; the first of each label counts, a value may run over several lines)."""
    labels = [(m.group(1).lower(), m.start(), m.end()) for m in _LABEL.finditer(text)]
    found: dict[str, str] = {}
    for i, (name, _, end) in enumerate(labels):
        stop = labels[i + 1][1] if i + 1 < len(labels) else len(text)
        found.setdefault(name, " ".join(text[end:stop].split()).strip(" *_"))
    for name in ("question", "answer"):
        if name not in found:
            raise ReplyError(f"no {name.upper()} line")
        if not found[name]:
            raise ReplyError(f"empty {name.upper()}")
    return found["question"], found["answer"]


# --- generation ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sampling:
    model: str
    temperature: float = 0.7
    max_tokens: int = 256
    seed: int = 0


def generate(client, draws: list[Draw], sampling: Sampling,
             on_done: Callable[[Generated | Failure], None] | None = None) -> list[Generated | Failure]:
    """Every draw asked once (client.map: the client's concurrency, retries and circuit breaker); each
    comes back as a question or as a failure with its reason, in the draws' order."""
    def ask(indexed: tuple[int, Draw]) -> Generated | Failure:
        index, draw = indexed
        outcome = _ask_one(client, draw, sampling, sampling.seed + index)
        if on_done is not None:
            on_done(outcome)
        return outcome

    return client.map(ask, list(enumerate(draws)))


def _ask_one(client, draw: Draw, sampling: Sampling, seed: int) -> Generated | Failure:
    request = ChatRequest(model=sampling.model, messages=[{"role": "user", "content": render_prompt(draw)}],
                          temperature=sampling.temperature, max_tokens=sampling.max_tokens, seed=seed)
    ids = [p.doc_id for p in draw.passages]
    try:
        result = client.chat(request)
    except LLMRequestError as exc:
        return Failure(draw.query_id, draw.question_type, ids, f"request failed: {exc}", None)
    try:
        question, answer = parse_reply(result.text)
    except ReplyError as exc:
        cut = " (reply cut at max_tokens)" if result.finish_reason == "length" else ""
        return Failure(draw.query_id, draw.question_type, ids, f"unparseable reply: {exc}{cut}",
                       result.text[:REPLY_EXCERPT])
    return Generated(draw.query_id, draw.question_type, question, answer, draw.relevant)


def type_counts(draws: list[Draw], outcomes: list[Generated | Failure]) -> dict[str, dict[str, int]]:
    """Per type: questions asked for, generated, failed (asked = generated + failed)."""
    counts = {t: {"requested": 0, "generated": 0, "failed": 0} for t in dict.fromkeys(
        d.question_type for d in draws)}
    for draw, outcome in zip(draws, outcomes):
        counts[draw.question_type]["requested"] += 1
        counts[draw.question_type]["generated" if isinstance(outcome, Generated) else "failed"] += 1
    return counts


# --- the dataset --------------------------------------------------------------------------------------

def write_testset(out: Path, passages: list[Passage], draws: list[Draw],
                  outcomes: list[Generated | Failure], meta: dict) -> dict:
    """OUT/text-corpus.parquet (the whole corpus, so retrieval meets the questions' distractors too),
    OUT/question-answer-passages.parquet (the generated questions with `question_type`) and
    OUT/testset.json (settings, counts per type, every failure with its reason). Returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    corpus = pa.table({"passage": [p.text for p in passages], "id": [p.doc_id for p in passages]})
    pq.write_table(corpus, out / f"{RAG_MINI_CORPUS}.parquet")
    generated = [o for o in outcomes if isinstance(o, Generated)]
    questions = pa.table({
        "question": pa.array([g.question for g in generated], pa.string()),
        "answer": pa.array([g.answer for g in generated], pa.string()),
        "relevant_passage_ids": pa.array([g.relevant_passage_ids for g in generated], pa.list_(pa.string())),
        "id": pa.array([g.query_id for g in generated], pa.string()),
        "question_type": pa.array([g.question_type for g in generated], pa.string()),
    })
    pq.write_table(questions, out / f"{RAG_MINI_QA}.parquet")
    failures = [asdict(o) for o in outcomes if isinstance(o, Failure)]
    manifest = {**meta, "prompt_suite": PROMPT_SUITE, "prompt_version": PROMPT_VERSION,
                "question_types": {t: list(c) for t, c in QUESTION_TYPES.items()},
                "n_passages": len(passages), "n_generated": len(generated), "n_failed": len(failures),
                "by_type": type_counts(draws, outcomes), "failures": failures}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest
