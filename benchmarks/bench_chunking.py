"""Chunking throughput: batch chunking (as the chunk stage does: one sentencepiece call for all token counts
of a shard, offsets only for passages longer than one window) vs a straightforward per-document loop
(offsets of every passage, one call each), over the same corpus (all unique snippets of the 255 BioASQ 12b
questions). Both use the E5-Mistral tokenizer, 300-token windows, 60-token overlap, and produce identical
chunks (checked). Prints timings measured side by side in this run; never used as a test.

    python benchmarks/bench_chunking.py [--data /work/shared/data/bioasq-12b] [--repeats 3] [--ray]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
from shared import chunks_from_offsets
from timing import interleaved_best

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from retrievers.chunking import chunk_passages
from retrievers.config import ChunkingConfig, DatasetConfig
from retrievers.loaders import load_dataset
from retrievers.tokenization import load_tokenizer

TOKENIZER = "mistral-common:tokenizer.model.v1"
SIZE, OVERLAP = 300, 60


def per_document_loop(passages: pa.Table, tokenizer) -> pa.Table:
    """The straightforward version: encode each passage on its own with offsets, then cut its windows."""
    doc_ids, texts = passages.column("doc_id").to_pylist(), passages.column("text").to_pylist()
    offsets = [tokenizer.offsets_one(text) for text in texts]
    return chunks_from_offsets(doc_ids, texts, offsets, SIZE, OVERLAP)


def batched(passages: pa.Table, tokenizer) -> pa.Table:
    return chunk_passages(passages, tokenizer, SIZE, OVERLAP)


def ray_stage(passages: pa.Table, shard_size: int, max_parallel: int) -> pa.Table:
    """What the chunk stage runs: an ActorPool of `max_parallel` chunker actors (started, and killed, on
    every call) over shards of `shard_size` passages."""
    from tasks.retrieval_stages import chunk_with_ray

    config = ChunkingConfig(tokenizer=TOKENIZER, chunk_tokens=SIZE, overlap_tokens=OVERLAP,
                            shard_size=shard_size, max_parallel=max_parallel)
    return chunk_with_ray(passages, config, progress=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/work/shared/data/bioasq-12b")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ray", action="store_true", help="also time the Ray chunk stage (2 actors)")
    args = parser.parse_args()

    passages = load_dataset(DatasetConfig(path=args.data)).passages.select(["doc_id", "text"])
    tokenizer = load_tokenizer(TOKENIZER)
    n_chars = sum(len(t) for t in passages.column("text").to_pylist())
    print(f"corpus: {passages.num_rows} passages, {n_chars / 1e6:.2f} M characters ({Path(args.data).name})")

    candidates = {
        "per-document loop": lambda: per_document_loop(passages, tokenizer),
        "batch (chunk_passages, 1 thread)": lambda: batched(passages, tokenizer),
    }
    if args.ray:
        from infra.ray_runtime import ensure_ray

        ensure_ray()
        ray_stage(passages, 2000, 2)  # warm-up outside the timing; each call still starts its own actors
        candidates["Ray ActorPool, 2 actors, shards of 2000"] = lambda: ray_stage(passages, 2000, 2)
    best = interleaved_best(args.repeats, candidates)
    loop_s, reference = best["per-document loop"]
    for name, (_, chunks) in best.items():
        if not chunks.equals(reference):
            raise SystemExit(f"{name}: chunks differ from the per-document loop")
    print(f"chunks: {reference.num_rows} (best of {args.repeats}, interleaved)")
    for name, (seconds, _) in best.items():
        print(f"  {name:<40} {seconds * 1000:8.1f} ms  {passages.num_rows / seconds:9.0f} passages/s"
              f"  x{loop_s / seconds:5.2f} vs loop")

if __name__ == "__main__":
    main()
