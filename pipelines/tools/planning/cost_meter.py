"""The prompt tokens a model computes, counted as `ccrs plan cost` counts them: each prompt metered with
the model's tokenizer (judges/tokens.py) and replayed, in stage order, through an unbounded block cache
(vLLM's automatic prefix caching), so that the tokens a prefix cache saves are not counted as computed."""
from __future__ import annotations

from collections.abc import Callable

from judges.tokens import CHARS_PER_TOKEN_FALLBACK, token_counter, token_ids
from pipelines.config import RunConfig

# vLLM's default KV-cache block (only whole blocks are reused from the prefix cache): 16 tokens on GPUs,
# 128 on its CPU backend (vllm/platforms/cpu.py); an engine_kwargs block_size overrides both.
BLOCK_TOKENS = 16
CPU_BLOCK_TOKENS = 128


class PrefixCache:
    """An unbounded automatic prefix cache: a prompt reuses the longest chain of whole blocks that an
    earlier prompt already computed (chained block hashes, as vLLM keys its blocks); the last token is
    always computed."""

    def __init__(self, block: int = BLOCK_TOKENS):
        self.block = block
        self.seen: set[int] = set()

    def computed(self, ids: list[int] | str) -> int:
        chain, reused, hit = 0, 0, True
        for start in range(0, len(ids) - self.block + 1, self.block):
            chain = hash((chain, tuple(ids[start:start + self.block])))
            if hit and chain in self.seen:
                reused += self.block
            else:
                hit = False
                self.seen.add(chain)
        return len(ids) - min(reused, max(len(ids) - 1, 0))


class PromptMeter:
    """Counts sent and computed prompt tokens of one model's prompts with its tokenizer (characters at
    CHARS_PER_TOKEN_FALLBACK per token when none loads: then the cache works on character blocks)."""

    def __init__(self, tokenizer: str | None, block_tokens: int = BLOCK_TOKENS):
        self.count = token_counter(tokenizer)
        self.ids = token_ids(tokenizer)
        block = block_tokens if self.ids else int(block_tokens * CHARS_PER_TOKEN_FALLBACK)
        self.cache = PrefixCache(block)
        self.exact = self.ids is not None
        self.sent = self.computed = self.prompts = 0

    def add(self, prompt: str) -> None:
        sent = self.count(prompt)
        unit = self.ids(prompt) if self.ids else prompt
        computed = self.cache.computed(unit)
        self.sent += sent
        self.computed += sent if not unit else round(sent * computed / len(unit))
        self.prompts += 1

    def reply_tokens(self, text: str) -> int:
        return max(1, self.count(text) - self.count("")) + 1  # + end-of-sequence


def truncated(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    overhead = count("")
    while text and count(text) - overhead > max_tokens:
        text = text[: int(len(text) * 0.9)]
    return text


def kv_block_tokens(config: RunConfig, model: str | None) -> int:
    """The KV-cache block of the engine serving `model`: its engine_kwargs block_size, else vLLM's default
    for where it runs (a served model without an accelerator runs on vLLM's CPU backend); a model the
    serving profile does not list (an external endpoint) gets the GPU default."""
    served = next((m for m in config.serving.models if m.model_id == model), None)
    if served is None:
        return BLOCK_TOKENS
    default = BLOCK_TOKENS if served.accelerator_type else CPU_BLOCK_TOKENS
    return int(served.engine_kwargs.get("block_size", default))

