"""The calibration sample of `ccrs plan cost`: a few questions of the configured dataset (with reference
answers), their relevant passages and as many others again, chunked with the configured chunker (character
windows where its tokenizer is not available here), and per retriever a ranked context of top_k chunks."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipelines.config import RESOURCE_ROOT, RunConfig
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from tasks.generate import RETRIEVER_ORDER

# Chunk width in characters where the chunking tokenizer is not available: English prose averages about 4
# characters a token, the width a real chunk would have. Counting keeps judges.tokens' lower 3 a token
# (CHARS_PER_TOKEN_FALLBACK), which errs towards more tokens: a budget is not overrun.
CHUNK_CHARS_PER_TOKEN = 4
FALLBACK_DATASET = RESOURCE_ROOT / "data" / "bioasq-sample"


class CostPlanError(ValueError):
    pass


@dataclass
class PilotSample:
    queries: list[dict[str, Any]]
    contexts: dict[tuple[str, str], list[str]]  # (query_id, retriever) -> ranked chunks
    dataset: str
    chunker: str
    total_questions: int  # in the whole dataset, the config's limit applied


def dataset_sample(config: RunConfig, size: int, dataset: str | None, seed: int) -> PilotSample:
    path = Path(dataset) if dataset else Path(config.dataset.path)
    if not path.is_absolute() and not path.exists():
        path = RESOURCE_ROOT / path
    data_config = DatasetConfig(path=str(path), format=config.dataset.format if not dataset else "auto")
    if not path.exists():
        raise CostPlanError(f"dataset {path} not found: give --calibration-dataset PATH "
                            f"(e.g. {FALLBACK_DATASET})")
    loaded = load_dataset(data_config)
    queries = [q for q in loaded.queries.to_pylist() if q["answer"]][:size]
    if not queries:
        raise CostPlanError(f"dataset {path} has no question with a reference answer to calibrate on")
    passages = loaded.passages
    texts = dict(zip(passages.column("doc_id").to_pylist(), passages.column("text").to_pylist()))
    retrievers = [r for r in RETRIEVER_ORDER if r in config.retrieval.retrievers]
    chunks, chunker = chunked(config, queries, texts, seed)
    rng = random.Random(seed)
    contexts = {}
    for query in queries:
        relevant = [c for d in query["relevant_doc_ids"] for c in chunks.get(d, [])]
        others = [c for d, cs in chunks.items() if d not in set(query["relevant_doc_ids"]) for c in cs]
        for retriever in retrievers:
            ranked = rng.sample(relevant, len(relevant)) + rng.sample(others, len(others))
            contexts[(query["query_id"], retriever)] = ranked[: config.retrieval.top_k]
    total = loaded.queries.num_rows if config.dataset.limit is None else min(config.dataset.limit,
                                                                             loaded.queries.num_rows)
    return PilotSample(queries, contexts, str(path), chunker, total)


def chunked(config: RunConfig, queries: list[dict], texts: dict[str, str],
            seed: int) -> tuple[dict[str, list[str]], str]:
    """Chunks of the sampled questions' relevant passages and of as many other passages again (the
    retrieved context's length is what the cost depends on), with the configured chunker."""
    from retrievers.chunking import chunk_passages
    from retrievers.tokenization import load_tokenizer

    wanted = list(dict.fromkeys(d for q in queries for d in q["relevant_doc_ids"] if d in texts))
    others = [d for d in texts if d not in set(wanted)]
    extra = random.Random(seed).sample(others, min(len(others), max(len(wanted), 4 * config.retrieval.top_k)))
    doc_ids = wanted + extra
    size, overlap = config.chunking.chunk_tokens, config.chunking.overlap_tokens
    try:
        # a Hub tokenizer that is not cached here fails at once instead of retrying the Hub for minutes
        tokenizer = load_tokenizer(config.chunking.tokenizer, local_files_only=True)
        table = chunk_passages(pa.table({"doc_id": doc_ids, "text": [texts[d] for d in doc_ids]}),
                               tokenizer, size, overlap)
        chunker = config.chunking.tokenizer
        pairs = zip(table.column("doc_id").to_pylist(), table.column("text").to_pylist())
    except Exception as exc:  # noqa: BLE001 - a tokenizer that is not available here: character windows
        width, step = size * CHUNK_CHARS_PER_TOKEN, (size - overlap) * CHUNK_CHARS_PER_TOKEN
        chunker = (f"character windows of {width} chars ({config.chunking.tokenizer} unavailable here: "
                   f"{type(exc).__name__})")
        pairs = ((d, texts[d][s:s + width]) for d in doc_ids for s in range(0, max(len(texts[d]), 1), step)
                 if s == 0 or s + overlap * CHUNK_CHARS_PER_TOKEN < len(texts[d]))
    chunks: dict[str, list[str]] = {}
    for doc_id, text in pairs:
        chunks.setdefault(doc_id, []).append(text)
    return chunks, chunker
