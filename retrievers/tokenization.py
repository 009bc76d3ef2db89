"""Tokenizers that return character offsets, for token-window chunking.

Config strings (ChunkingConfig.tokenizer):
- `mistral-common:tokenizer.model.v1`: the sentencepiece model shipped by mistral-common, which is the
  Mistral-7B-v0.1 tokenizer that e5-mistral-7b-instruct uses (32,000 pieces; <unk>=0, <s>=1, </s>=2);
- `sentencepiece:/path/to/file.model`: any sentencepiece model file;
- `hf:<model id or local folder>`: a Hugging Face fast tokenizer (needs the hub or a local copy).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Protocol

Offsets = list[tuple[int, int]]


class OffsetTokenizer(Protocol):
    name: str

    def offsets_batch(self, texts: list[str]) -> list[Offsets]:
        """Per text, the (start_char, end_char) of every token, in order (no BOS/EOS)."""
        ...

    def lengths_batch(self, texts: list[str]) -> list[int]:
        """Per text, its number of tokens (cheaper than offsets where the backend allows)."""
        ...


class SentencePieceTokenizer:
    def __init__(self, model_file: str, name: str, num_threads: int = 1) -> None:
        import sentencepiece

        self.name = name
        self.model_file = model_file
        self.num_threads = num_threads
        self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)

    def offsets_batch(self, texts: list[str]) -> list[Offsets]:
        # Batch encode in C++: one call for the whole shard; offsets are character offsets.
        encoded = self.processor.encode(
            texts, out_type="offset_mapping", add_bos=False, add_eos=False, num_threads=self.num_threads
        )
        return [list(item["offsets"]) for item in encoded]

    def offsets_one(self, text: str) -> Offsets:
        return self.offsets_batch([text])[0]

    def lengths_batch(self, texts: list[str]) -> list[int]:
        # Token ids only: about half the cost of offsets (no piece strings or offset tuples built).
        encoded = self.processor.encode(texts, add_bos=False, add_eos=False, num_threads=self.num_threads)
        return [len(ids) for ids in encoded]


class HuggingFaceTokenizer:
    def __init__(self, model_id: str, name: str, local_files_only: bool = False) -> None:
        from transformers import AutoTokenizer

        self.name = name
        self.tokenizer = AutoTokenizer.from_pretrained(model_id, use_fast=True,
                                                       local_files_only=local_files_only)
        if not self.tokenizer.is_fast:
            raise ValueError(f"{model_id}: a fast tokenizer is needed for character offsets")

    def offsets_batch(self, texts: list[str]) -> list[Offsets]:
        encoded = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        return [[tuple(o) for o in offsets] for offsets in encoded["offset_mapping"]]

    def lengths_batch(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]


def mistral_common_model_file(file_name: str) -> str:
    import mistral_common

    path = Path(mistral_common.__file__).parent / "data" / file_name
    if not path.is_file():
        raise FileNotFoundError(f"mistral-common ships no tokenizer {file_name!r} (looked at {path})")
    return str(path)


# A backend: (its argument, the whole spec, local_files_only) -> tokenizer. The sentencepiece backends read a
# file on disk whatever local_files_only says.
def _mistral_common(spec: str, full: str, local_files_only: bool) -> OffsetTokenizer:
    return SentencePieceTokenizer(mistral_common_model_file(spec), full)


def _sentencepiece(spec: str, full: str, local_files_only: bool) -> OffsetTokenizer:
    return SentencePieceTokenizer(os.path.expanduser(spec), full)


def _huggingface(spec: str, full: str, local_files_only: bool) -> OffsetTokenizer:
    return HuggingFaceTokenizer(spec, full, local_files_only)


TOKENIZER_BACKENDS: dict[str, Callable[[str, str, bool], OffsetTokenizer]] = {
    "mistral-common": _mistral_common,
    "sentencepiece": _sentencepiece,
    "hf": _huggingface,
}


@lru_cache(maxsize=4)
def load_tokenizer(spec: str, local_files_only: bool = False) -> OffsetTokenizer:
    """`backend:argument`, e.g. 'mistral-common:tokenizer.model.v1' or
    'hf:intfloat/e5-mistral-7b-instruct'. local_files_only: a Hub tokenizer that is not cached here fails
    at once instead of being downloaded."""
    backend, sep, argument = spec.partition(":")
    if not sep or backend not in TOKENIZER_BACKENDS or not argument:
        known = sorted(TOKENIZER_BACKENDS)
        raise ValueError(f"tokenizer {spec!r}: expected one of {known} as '<backend>:<arg>'")
    return TOKENIZER_BACKENDS[backend](argument, spec, local_files_only)
