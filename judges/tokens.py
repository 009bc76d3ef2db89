"""Prompt-length estimates for the truncation policy.

With a tokenizer (a local folder or a Hugging Face id available offline) we count the chat-templated
prompt exactly; without one we fall back to a conservative 3 characters per token."""
from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

log = logging.getLogger(__name__)
CHARS_PER_TOKEN_FALLBACK = 3.0


@lru_cache(maxsize=8)
def _load_tokenizer(source: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source, local_files_only=True)  # a folder or the local cache only


def _tokenizer_or_none(source: str | None, fallback: str = ""):
    """The loaded tokenizer, or None (logged, with what the caller does instead) when there is no source
    or it cannot be loaded."""
    if not source:
        return None
    try:
        return _load_tokenizer(source)
    except Exception as exc:  # noqa: BLE001 - any load failure: the caller falls back
        log.warning("tokenizer %s unavailable (%s)%s", source, exc, fallback)
        return None


def token_counter(tokenizer_source: str | None) -> Callable[[str], int]:
    """count(user_prompt) -> tokens of the whole chat-templated request for one user message."""
    tokenizer = _tokenizer_or_none(tokenizer_source, "; using a character estimate")
    if tokenizer is None:
        return lambda text: int(len(text) / CHARS_PER_TOKEN_FALLBACK) + 16

    def count(text: str) -> int:
        messages = [{"role": "user", "content": text}]
        try:
            ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return len(ids)
        except Exception:  # noqa: BLE001 - tokenizers without a chat template
            return len(tokenizer.encode(text)) + 16

    return count


def token_ids(tokenizer_source: str | None) -> Callable[[str], list[int]] | None:
    """ids(user_prompt) -> the token ids of the whole chat-templated request (what a prefix cache sees),
    or None when no tokenizer can be loaded."""
    tokenizer = _tokenizer_or_none(tokenizer_source)
    if tokenizer is None:
        return None

    def ids(text: str) -> list[int]:
        try:
            encoded = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                                    add_generation_prompt=True)
            return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
        except Exception:  # noqa: BLE001 - tokenizers without a chat template
            return list(tokenizer.encode(text))

    return ids


def splits_numbers(tokenizer_source: str | None) -> bool | None:
    """Whether the tokenizer spells a two-digit number in more than one token (SmolLM2, Mistral: one token a
    digit) or not (Llama-3: one token a number up to 999); None when no tokenizer can be loaded."""
    tokenizer = _tokenizer_or_none(tokenizer_source)
    return None if tokenizer is None else len(tokenizer.encode("85", add_special_tokens=False)) > 1
