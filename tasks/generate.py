"""Generation stage: three readers x two retrievers = six RAG systems (A-F, paper section 3.2), and the
user's own RAG services (`systems: [{kind: endpoint, ...}]`), each a system named by its entry.

Labels are reader-major with retrievers in the paper's order [bm25, knn]: A=reader1+bm25, B=reader1+knn,
C=reader2+bm25, D=reader2+knn, E=reader3+bm25, F=reader3+knn. LLM readers go through the shared client,
fanned out from Ray tasks with bounded concurrency; a request that still fails after the client's
retries becomes a row with status 'failed', not a crash. An endpoint system's row keeps the passages the
service answered from in `contexts` (None for the built-in systems: their chunks are in retrieved.parquet).
A rerun of a finished stage whose rows hold failures asks again for those rows only.

Reader samples (`readers[].samples: k`, k > 1, LLM readers only): the row's `answer` stays the greedy one;
k - 1 more answers to the same prompt, sampled at `sample_temperature`, each with its own seed
(`sample_seed`: the client seed, the sample's index and the prompt), go to the list column
`sampled_answers` (with their token counts in `sampled_prompt_tokens` / `sampled_completion_tokens`), read
by the GQM suite's gqm_self_consistency. A row is ok only with all k answers; a failed sample fails it
(asked again like any failed row). Those columns, and the reader's two sample settings in the stage key,
exist only where some reader samples: a run with samples 1 writes what it wrote before.
"""
from __future__ import annotations

import hashlib
import json
import string
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from judges.client import ContextLengthError, LLMClient, LLMRequestError
from judges.config import ClientConfig, EndpointSystemConfig, ReaderConfig
from judges.readers import (
    PROMPT_VERSION,
    PROMPT_VERSIONS,
    extract_answer,
    extractive_answer,
    fit_chunks,
    generation_prompt,
    reader_request,
)
from judges.service import ServiceClient, ServiceError
from infra.models import default_tokenizer
from judges.tokens import token_counter
from retrievers.methods import RETRIEVAL_METHODS
from retrievers.schema import top_k_contexts
from tasks.runtime.fanout import fan_out, fan_out_report
from tasks.runtime.layout import GENERATIONS_FILE
from tasks.runtime.stage import (
    StageCheckpoint,
    code_version,
    file_fingerprint,
    read_manifest,
    run_stage,
    stage_key,
)

__all__ = ["fan_out", "run_generation", "system_label"]

# System letters: reader-major over the registered retrieval methods (A = reader 1 x bm25, B = x knn, ...).
RETRIEVER_ORDER = tuple(RETRIEVAL_METHODS)
GENERATION_COLUMNS = [
    "query_id", "system", "retriever", "reader", "prompt", "response_raw", "answer", "tagged",
    "n_chunks_used", "n_chunks_truncated", "chunk_ids", "prompt_tokens", "completion_tokens", "status",
    "error", "contexts",
]
SAMPLE_COLUMNS = ["sampled_answers", "sampled_prompt_tokens", "sampled_completion_tokens"]  # samples > 1
SAMPLE_SETTINGS = {"samples", "sample_temperature"}  # in the stage key only where a reader samples
NO_SAMPLES = {"sampled_answers": [], "sampled_prompt_tokens": 0, "sampled_completion_tokens": 0}
ENDPOINT_RETRIEVER = "own"  # an endpoint system retrieves for itself
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
    seed: int = 0  # the client seed, from which each sampled answer's seed derives


def system_label(reader_index: int, retriever: str) -> str:
    return string.ascii_uppercase[reader_index * len(RETRIEVER_ORDER) + RETRIEVER_ORDER.index(retriever)]


def system_table(readers: Sequence[ReaderConfig],
                 systems: Sequence[EndpointSystemConfig] = ()) -> dict[str, dict[str, str]]:
    """label -> {reader, retriever, model}: what each letter (and each endpoint system) means in this run."""
    table = {
        system_label(i, retriever): {"reader": r.name, "retriever": retriever, "model": r.model or r.kind,
                                     "prompt": PROMPT_VERSIONS[r.prompt_style]}
        for i, r in enumerate(readers)
        for retriever in RETRIEVER_ORDER
    }
    table.update({s.name: {"reader": s.name, "retriever": ENDPOINT_RETRIEVER, "model": "endpoint"}
                  for s in systems})
    return table


# --- per item ------------------------------------------------------------------------------------------

def _row(item: GenerationItem, **values: Any) -> dict[str, Any]:
    row = {"query_id": item.query_id, "system": item.system, "retriever": item.retriever,
           "reader": item.reader.name, "chunk_ids": item.chunk_ids, "error": None, "contexts": None,
           **NO_SAMPLES}
    row.update(values)
    return row


def fit_item(item: GenerationItem, count: Callable[[str], int] | None = None):
    count = count or token_counter(item.tokenizer)
    style = item.reader.prompt_style
    return fit_chunks(
        lambda chunks: generation_prompt(item.question, chunks, style), item.chunks, item.budget_tokens, count
    )


def generate_llm(client: LLMClient, item: GenerationItem) -> dict[str, Any]:
    fitted = fit_item(item)
    chunks = fitted.chunks
    while True:
        prompt = generation_prompt(item.question, chunks, item.reader.prompt_style)
        try:
            result = client.chat(reader_request(item.reader, prompt))
            break
        except ContextLengthError as exc:
            if not chunks:  # nothing left to drop
                return _failed(item, prompt, len(chunks), exc)
            chunks = chunks[:-1]  # the estimate was short: apply the same policy, one more chunk
        except LLMRequestError as exc:
            return {**_failed(item, prompt, len(chunks), exc), "_transport": True}
    answer, tagged = extract_answer(result.text, item.reader.prompt_style)
    sampled = sample_answers(client, item, prompt)
    if "status" in sampled:  # a sample failed: the row with it
        return {**_failed(item, prompt, len(chunks), sampled.pop("exception")), **sampled}
    return _row(item, prompt=prompt, response_raw=result.text, answer=answer, tagged=tagged,
                n_chunks_used=len(chunks), n_chunks_truncated=len(item.chunks) - len(chunks),
                chunk_ids=item.chunk_ids[: len(chunks)], prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens, status="ok", **sampled)


def sample_seed(seed: int, index: int, prompt: str) -> int:
    """The request seed of sampled answer `index` (1 .. k-1; 0 is the greedy answer) to `prompt` under the
    client seed `seed`: a 31-bit integer, another for every sample and every prompt, the same in every run
    (as judges/repeats.py `repeat_seed` seeds the judge's sampled repeats)."""
    payload = json.dumps(["ccrs-reader-sample", seed, index, prompt])
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:4], "big") & 0x7FFFFFFF


def sample_answers(client: LLMClient, item: GenerationItem, prompt: str) -> dict[str, Any]:
    """The reader's k - 1 sampled answers to the prompt its greedy answer got (the sample columns), or, when
    one fails, {status: failed, exception, _transport?} naming the sample."""
    reader = item.reader
    answers, prompt_tokens, completion_tokens = [], 0, 0
    for index in range(1, reader.samples):
        request = replace(reader_request(reader, prompt), temperature=reader.sample_temperature,
                          seed=sample_seed(item.seed, index, prompt))
        try:
            result = client.chat(request)
        except LLMRequestError as exc:
            failure = {"status": "failed", "exception": RuntimeError(f"sampled answer {index}: {exc}")}
            resend = not isinstance(exc, ContextLengthError)  # transport failures are re-sent
            return {**failure, "_transport": True} if resend else failure
        answers.append(extract_answer(result.text, reader.prompt_style)[0])
        prompt_tokens += result.prompt_tokens
        completion_tokens += result.completion_tokens
    return {"sampled_answers": answers, "sampled_prompt_tokens": prompt_tokens,
            "sampled_completion_tokens": completion_tokens}


def _failed(item: GenerationItem, prompt: str, n_chunks: int, exc: Exception) -> dict[str, Any]:
    return _row(item, prompt=prompt, response_raw=None, answer=None, tagged=False, n_chunks_used=n_chunks,
                n_chunks_truncated=len(item.chunks) - n_chunks, chunk_ids=item.chunk_ids[:n_chunks],
                prompt_tokens=0, completion_tokens=0, status="failed", error=str(exc)[:2000])


def generate_extractive(item: GenerationItem) -> dict[str, Any]:
    style = item.reader.prompt_style
    prompt = generation_prompt(item.question, item.chunks, style)
    answer = extractive_answer(item.question, item.chunks, item.reader.max_sentences, cite=style == "citing")
    return _row(item, prompt=prompt, response_raw=f"<answer>{answer}</answer>", answer=answer, tagged=True,
                n_chunks_used=len(item.chunks), n_chunks_truncated=0, prompt_tokens=0, completion_tokens=0,
                status="ok")


# --- endpoint systems (the user's own RAG services) ------------------------------------------------------

@dataclass(frozen=True)
class EndpointItem:
    system: EndpointSystemConfig
    query_id: str
    question: str


def endpoint_row(item: EndpointItem, client: ServiceClient) -> tuple[dict[str, Any], int]:
    """The service's answer as a generated row (failed: recorded with the reason), and the requests sent."""
    base = {"query_id": item.query_id, "system": item.system.name, "retriever": ENDPOINT_RETRIEVER,
            "reader": item.system.name, "prompt": item.question, "n_chunks_truncated": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "tagged": True}
    try:
        reply = client.ask(item.query_id, item.question)
    except ServiceError as exc:
        return {**base, "response_raw": None, "answer": None, "n_chunks_used": 0, "chunk_ids": [],
                "status": "failed", "error": f"service {item.system.name}: {exc}"[:2000],
                "contexts": []}, exc.attempts
    ids = [f"{item.system.name}/{item.query_id}/{rank}" for rank in range(1, len(reply.contexts) + 1)]
    return {**base, "response_raw": reply.answer, "answer": reply.answer,
            "n_chunks_used": len(reply.contexts), "chunk_ids": ids, "status": "ok", "error": None,
            "contexts": reply.contexts}, reply.attempts


def generate_endpoints(systems: Sequence[EndpointSystemConfig], queries: pd.DataFrame,
                       done: dict[str, dict], checkpoint: StageCheckpoint | None,
                       progress: bool) -> tuple[list[dict], dict[str, Any]]:
    """Every question to every endpoint system, `concurrency` requests in flight per system; rows already
    in `done` are not asked again, answered rows are checkpointed as they come."""
    rows, report = [], {}
    for system in systems:
        items = [EndpointItem(system, str(q.query_id), str(q.text)) for q in queries.itertuples(index=False)]
        todo = [item for item in items if f"{system.name}/{item.query_id}" not in done]
        rows += [done[f"{system.name}/{item.query_id}"] for item in items
                 if f"{system.name}/{item.query_id}" in done]
        with ServiceClient(system) as client, ThreadPoolExecutor(system.concurrency) as pool:
            results = list(_progress(pool.map(lambda item: endpoint_row(item, client), todo), len(todo),
                                     f"generate {system.name}", progress))
        fresh = [row for row, _ in results]
        if checkpoint is not None:
            checkpoint.save({f"{r['system']}/{r['query_id']}": r for r in fresh if r["status"] == "ok"})
        sent = sum(attempts for _, attempts in results)
        report[system.name] = {"questions": len(items), "resumed": len(items) - len(todo), "sent": sent,
                               "retries": sent - len(todo),
                               "failed": sum(r["status"] == "failed" for r in fresh)}
        rows += fresh
    return rows, report


def _progress(iterable, total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="q", disable=not enabled or not total)


# --- inputs ----------------------------------------------------------------------------------------------

def build_items(queries: pd.DataFrame, retrieved: pd.DataFrame, readers: Sequence[ReaderConfig],
                top_k: int, seed: int = 0) -> list[GenerationItem]:
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
                                            texts, ids, budget, tokenizer, seed=seed))
    return items


def served_windows(readers: Sequence[ReaderConfig], identity: dict[str, Any] | None
                   ) -> tuple[list[ReaderConfig], dict[str, list[int]]]:
    """Each LLM reader with its window capped by the `max_model_len` its endpoint reports serving (a
    window larger than the server holds would fail those requests there), and {reader: [configured,
    served]} for every reader capped."""
    capped, changed = [], {}
    for reader in readers:
        reported = (identity or {}).get(reader.model) or {}
        served = reported.get("max_model_len") if reader.kind == "llm" else None
        if isinstance(served, int) and served < reader.context_window:
            changed[reader.name] = [reader.context_window, served]
            reader = reader.model_copy(update={"context_window": served})
        capped.append(reader)
    return capped, changed


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
                       requests: dict[str, Any], systems: Sequence[EndpointSystemConfig] = (),
                       endpoints: dict[str, Any] | None = None) -> dict[str, Any]:
    by_system = frame.groupby("system")
    failed = frame[frame["status"] == "failed"]
    return {
        "rows": len(frame),
        "prompt_version": ", ".join(sorted({PROMPT_VERSIONS[r.prompt_style] for r in readers})
                                    or [PROMPT_VERSION]),
        "systems": system_table(readers, systems),
        "failure_reasons": {k: int(v) for k, v in
                            failed["error"].astype(str).str.slice(0, 60).value_counts().head(10).items()},
        "endpoint_requests": endpoints or {},
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
    base_url: str | None,
    top_k: int,
    force: bool = False,
    progress: bool = True,
    systems: Sequence[EndpointSystemConfig] = (),
    identity: dict[str, Any] | None = None,
) -> GenerationOutputs:
    """`identity`: what the endpoint reports for each LLM reader's model (infra.readiness.endpoint_identity);
    other weights behind the same model id give another key, so generations are not reused for them."""
    if len(readers) > len(string.ascii_uppercase) // len(RETRIEVER_ORDER) or not (readers or systems):
        raise ValueError(f"need 1 to 13 readers or at least one endpoint system, got {len(readers)} readers")
    config = {"readers": readers_in_key(readers), "seed": client.seed, "top_k": top_k,
              "prompt": PROMPT_VERSION}
    if identity:
        config["endpoint"] = identity
    if systems:  # (absent otherwise: the key of a run without endpoint systems is as before)
        config["systems"] = [s.model_dump(mode="json", exclude={"timeout_s", "concurrency", "max_retries"})
                             for s in systems]
    key = stage_key("generate", config, [file_fingerprint(queries_path), file_fingerprint(retrieved_path)],
                    CODE_VERSION)
    out_dir = Path(run_dir) / "generate"
    retry = _rows_to_retry(out_dir, key)

    def compute(out_dir: Path) -> dict:
        started = time.perf_counter()
        queries = pd.read_parquet(queries_path)
        retrieved = pd.read_parquet(retrieved_path)
        checkpoint = StageCheckpoint(run_dir, "generate", key)
        if retry:
            checkpoint.save(retry)
        served, capped = served_windows(readers, identity)
        rows, requests = generate_all(build_items(queries, retrieved, served, top_k, client.seed), client,
                                      base_url, progress, checkpoint)
        endpoint_rows, endpoints = generate_endpoints(systems, queries, checkpoint.load(), checkpoint,
                                                      progress)
        frame = pd.DataFrame([{**NO_SAMPLES, **row} for row in rows + endpoint_rows],
                             columns=generation_columns(readers))
        frame = frame.sort_values(["system", "query_id"])
        frame.to_parquet(out_dir / GENERATIONS_FILE, index=False)
        seconds = time.perf_counter() - started
        summary = generation_summary(frame, readers, seconds, requests, systems, endpoints)
        return {**summary, **sampling_summary(frame), "windows_capped_by_server": capped}

    result = run_stage(run_dir, "generate", key, compute, force=force or bool(retry))
    return GenerationOutputs(result.out_dir / GENERATIONS_FILE, result.summary, result.reused)


def sampling_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """The sampled answers per system and their tokens (nothing where no reader samples)."""
    if "sampled_answers" not in frame:
        return {}
    counts = frame.groupby("system")["sampled_answers"].apply(lambda s: sum(len(a) for a in s))
    return {"sampled_answers": {k: int(v) for k, v in counts.items()},
            "sampled_prompt_tokens": int(frame["sampled_prompt_tokens"].sum()),
            "sampled_completion_tokens": int(frame["sampled_completion_tokens"].sum())}


def readers_in_key(readers: Sequence[ReaderConfig]) -> list[dict[str, Any]]:
    """The readers as the stage key hashes them: a reader that does not sample (samples 1) without its
    sample settings, so that its key is the one it had before readers could sample."""
    return [r.model_dump(mode="json", exclude=SAMPLE_SETTINGS if r.samples == 1 else None) for r in readers]


def generation_columns(readers: Sequence[ReaderConfig]) -> list[str]:
    """generations.parquet's columns: the sample columns only where some reader samples."""
    return GENERATION_COLUMNS + (SAMPLE_COLUMNS if any(r.samples > 1 for r in readers) else [])


def _rows_to_retry(out_dir: Path, key: str) -> dict[str, dict]:
    """A finished output of this key with failed rows: its answered rows (kept), so that a rerun asks again
    for the failed ones only. Empty when there is nothing to retry."""
    manifest = read_manifest(out_dir)
    failed = sum(((manifest or {}).get("summary", {}).get("failed") or {}).values())
    if not manifest or manifest.get("key") != key or not failed:
        return {}
    frame = pd.read_parquet(out_dir / GENERATIONS_FILE)
    answered = frame[frame["status"] == "ok"]
    return {f"{row['system']}/{row['query_id']}": _plain_row(row) for row in answered.to_dict("records")}


def _plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row read back from Parquet as JSON-able values (arrays as lists) for the checkpoint."""
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}
