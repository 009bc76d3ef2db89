"""Generation stage: three readers x two retrievers = six RAG systems (A-F, paper section 3.2).

Labels are reader-major with retrievers in the paper's order [bm25, knn]: A=reader1+bm25, B=reader1+knn,
C=reader2+bm25, D=reader2+knn, E=reader3+bm25, F=reader3+knn. LLM readers go through the shared client,
fanned out from Ray tasks with bounded concurrency; a request that still fails after the client's
retries becomes a row with status 'failed', not a crash.
"""
from __future__ import annotations

import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from judges.client import ContextLengthError, LLMClient, LLMRequestError
from judges.config import ClientConfig, ReaderConfig
from judges.readers import (
    PROMPT_VERSION,
    extract_answer,
    extractive_answer,
    fit_chunks,
    generation_prompt,
    reader_request,
)
from judges.tokens import token_counter
from retrievers.methods import RETRIEVAL_METHODS
from tasks.fanout import fan_out, fan_out_report
from tasks.layout import GENERATIONS_FILE
from tasks.stage import StageCheckpoint, code_version, file_fingerprint, run_stage, stage_key

__all__ = ["fan_out", "run_generation", "system_label", "top_k_contexts"]

# System letters: reader-major over the registered retrieval methods (A = reader 1 x bm25, B = x knn, ...).
RETRIEVER_ORDER = tuple(RETRIEVAL_METHODS)
GENERATION_COLUMNS = [
    "query_id", "system", "retriever", "reader", "prompt", "response_raw", "answer", "tagged",
    "n_chunks_used", "n_chunks_truncated", "chunk_ids", "prompt_tokens", "completion_tokens", "status",
    "error",
]
CODE_VERSION = code_version(__name__)


@dataclass
class GenerationOutputs:
    path: Path
    summary: dict[str, Any]
    reused: bool = False


@dataclass
class GenerationItem:
    query_id: str
    system: str
    retriever: str
    reader: ReaderConfig
    question: str
    chunks: list[str]
    chunk_ids: list[str]
    budget_tokens: int
    tokenizer: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def system_label(reader_index: int, retriever: str) -> str:
    return string.ascii_uppercase[reader_index * len(RETRIEVER_ORDER) + RETRIEVER_ORDER.index(retriever)]


def system_table(readers: Sequence[ReaderConfig]) -> dict[str, dict[str, str]]:
    """label -> {reader, retriever, model}: what each letter means in this run."""
    return {
        system_label(i, retriever): {"reader": r.name, "retriever": retriever, "model": r.model or r.kind}
        for i, r in enumerate(readers)
        for retriever in RETRIEVER_ORDER
    }


def default_tokenizer(reader_model: str | None) -> str | None:
    """The local model folder for models prepared by infra/models.py (exact counts), else None."""
    if not reader_model:
        return None
    from infra.models import LOCAL_MODELS, is_prepared, models_dir

    if reader_model in LOCAL_MODELS and is_prepared(models_dir() / reader_model):
        return str(models_dir() / reader_model)
    return None


# --- per item ------------------------------------------------------------------------------------------

def _row(item: GenerationItem, **values: Any) -> dict[str, Any]:
    row = {"query_id": item.query_id, "system": item.system, "retriever": item.retriever,
           "reader": item.reader.name, "chunk_ids": item.chunk_ids, "error": None}
    row.update(values)
    return row


def fit_item(item: GenerationItem, count: Callable[[str], int] | None = None):
    count = count or token_counter(item.tokenizer)
    return fit_chunks(
        lambda chunks: generation_prompt(item.question, chunks), item.chunks, item.budget_tokens, count
    )


def generate_llm(client: LLMClient, item: GenerationItem) -> dict[str, Any]:
    fitted = fit_item(item)
    chunks = fitted.chunks
    while True:
        prompt = generation_prompt(item.question, chunks)
        try:
            result = client.chat(reader_request(item.reader, prompt))
            break
        except ContextLengthError as exc:
            if not chunks:  # nothing left to drop
                return _failed(item, prompt, len(chunks), exc)
            chunks = chunks[:-1]  # the estimate was short: apply the same policy, one more chunk
        except LLMRequestError as exc:
            return {**_failed(item, prompt, len(chunks), exc), "_transport": True}
    answer, tagged = extract_answer(result.text)
    return _row(item, prompt=prompt, response_raw=result.text, answer=answer, tagged=tagged,
                n_chunks_used=len(chunks), n_chunks_truncated=len(item.chunks) - len(chunks),
                chunk_ids=item.chunk_ids[: len(chunks)], prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens, status="ok")


def _failed(item: GenerationItem, prompt: str, n_chunks: int, exc: Exception) -> dict[str, Any]:
    return _row(item, prompt=prompt, response_raw=None, answer=None, tagged=False, n_chunks_used=n_chunks,
                n_chunks_truncated=len(item.chunks) - n_chunks, chunk_ids=item.chunk_ids[:n_chunks],
                prompt_tokens=0, completion_tokens=0, status="failed", error=str(exc)[:2000])


def generate_extractive(item: GenerationItem) -> dict[str, Any]:
    prompt = generation_prompt(item.question, item.chunks)
    answer = extractive_answer(item.question, item.chunks, item.reader.max_sentences)
    return _row(item, prompt=prompt, response_raw=f"<answer>{answer}</answer>", answer=answer, tagged=True,
                n_chunks_used=len(item.chunks), n_chunks_truncated=0, prompt_tokens=0, completion_tokens=0,
                status="ok")


# --- inputs ----------------------------------------------------------------------------------------------

def top_k_contexts(retrieved: pd.DataFrame, top_k: int) -> dict[tuple[str, str], pd.DataFrame]:
    ordered = retrieved.sort_values(["query_id", "retriever", "rank"])
    return {
        (str(qid), str(retriever)): group.head(top_k)
        for (qid, retriever), group in ordered.groupby(["query_id", "retriever"], sort=False)
    }


def build_items(queries: pd.DataFrame, retrieved: pd.DataFrame, readers: Sequence[ReaderConfig],
                top_k: int) -> list[GenerationItem]:
    contexts = top_k_contexts(retrieved, top_k)
    retrievers = [r for r in RETRIEVER_ORDER if r in set(retrieved["retriever"].astype(str))]
    items = []
    for reader_index, reader in enumerate(readers):
        tokenizer = reader.tokenizer or default_tokenizer(reader.model)
        budget = reader.context_window - reader.max_tokens
        for retriever in retrievers:
            label = system_label(reader_index, retriever)
            for query in queries.itertuples(index=False):
                context = contexts.get((str(query.query_id), retriever))
                texts = [] if context is None else context["text"].astype(str).tolist()
                ids = [] if context is None else context["chunk_id"].astype(str).tolist()
                items.append(GenerationItem(str(query.query_id), label, retriever, reader, str(query.text),
                                            texts, ids, budget, tokenizer))
    return items


def item_id(item: GenerationItem) -> str:
    return f"{item.system}/{item.query_id}"


def generate_all(items: list[GenerationItem], client: ClientConfig, base_url: str, progress: bool,
                 checkpoint: StageCheckpoint | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Rows for every item; LLM rows already in `checkpoint` are not asked again, new ones are saved there
    shard by shard. Transport failures are re-sent once the endpoint is back (ClientConfig.requeue_*)."""
    llm_items = [i for i in items if i.reader.kind == "llm"]
    rows = [generate_extractive(i) for i in items if i.reader.kind == "extractive"]
    done = checkpoint.load() if checkpoint is not None else {}
    rows += [done[item_id(i)] for i in llm_items if item_id(i) in done]
    todo = [i for i in llm_items if item_id(i) not in done]

    def persist(indices: list[int], values: list[dict]) -> None:
        if checkpoint is not None:
            checkpoint.save({item_id(todo[j]): v for j, v in zip(indices, values) if v["status"] == "ok"})

    fresh, report = fan_out_report(generate_llm, todo, client, base_url, progress=progress, desc="generate",
                                   on_shard=persist, retry_if=lambda row: bool(row.get("_transport")))
    return rows + fresh, {**report.as_dict(), "resumed": len(llm_items) - len(todo)}


def generation_summary(frame: pd.DataFrame, readers: Sequence[ReaderConfig], seconds: float,
                       requests: dict[str, Any]) -> dict[str, Any]:
    by_system = frame.groupby("system")
    return {
        "rows": len(frame),
        "prompt_version": PROMPT_VERSION,
        "systems": system_table(readers),
        "failed": {k: int(v) for k, v in by_system["status"].apply(lambda s: (s == "failed").sum()).items()},
        "untagged": {
            k: int(v) for k, v in by_system["tagged"].apply(lambda s: (~s.astype(bool)).sum()).items()
        },
        "samples_truncated": {
            k: int(v) for k, v in by_system["n_chunks_truncated"].apply(lambda s: (s > 0).sum()).items()
        },
        "chunks_truncated": {k: int(v) for k, v in by_system["n_chunks_truncated"].sum().items()},
        "prompt_tokens": int(frame["prompt_tokens"].sum()),
        "completion_tokens": int(frame["completion_tokens"].sum()),
        "requests": requests,
        "seconds": round(seconds, 2),
    }


def run_generation(
    run_dir: Path,
    queries_path: Path,
    retrieved_path: Path,
    readers: list[ReaderConfig],
    client: ClientConfig,
    base_url: str,
    top_k: int,
    force: bool = False,
    progress: bool = True,
) -> GenerationOutputs:
    if not 1 <= len(readers) <= len(string.ascii_uppercase) // len(RETRIEVER_ORDER):
        raise ValueError(f"need between 1 and 13 readers, got {len(readers)}")
    config = {"readers": readers, "seed": client.seed, "top_k": top_k, "prompt": PROMPT_VERSION}
    key = stage_key("generate", config, [file_fingerprint(queries_path), file_fingerprint(retrieved_path)],
                    CODE_VERSION)

    def compute(out_dir: Path) -> dict:
        started = time.perf_counter()
        queries = pd.read_parquet(queries_path)
        retrieved = pd.read_parquet(retrieved_path)
        checkpoint = StageCheckpoint(run_dir, "generate", key)
        rows, requests = generate_all(build_items(queries, retrieved, readers, top_k), client, base_url,
                                      progress, checkpoint)
        frame = pd.DataFrame(rows, columns=GENERATION_COLUMNS).sort_values(["system", "query_id"])
        frame.to_parquet(out_dir / GENERATIONS_FILE, index=False)
        return generation_summary(frame, readers, time.perf_counter() - started, requests)

    result = run_stage(run_dir, "generate", key, compute, force=force)
    return GenerationOutputs(result.out_dir / GENERATIONS_FILE, result.summary, result.reused)
