"""The chunking tokenizer is the E5-Mistral one: mistral-common's tokenizer.model.v1 is the Mistral-7B-v0.1
sentencepiece model that intfloat/e5-mistral-7b-instruct ships (32,000 pieces, <unk>=0, <s>=1, </s>=2)."""
from __future__ import annotations

import json
import shutil
from itertools import pairwise

import pytest

from retrievers.tokenization import SentencePieceTokenizer, load_tokenizer, mistral_common_model_file

E5_MISTRAL = "mistral-common:tokenizer.model.v1"


@pytest.fixture(scope="module")
def e5_tokenizer() -> SentencePieceTokenizer:
    return load_tokenizer(E5_MISTRAL)


@pytest.fixture(scope="module")
def snippet_texts(sample_questions) -> list[str]:
    return [s["text"].strip() for q in sample_questions for s in q["snippets"]]


def test_vocabulary_matches_e5_mistral(e5_tokenizer):
    processor = e5_tokenizer.processor
    assert processor.get_piece_size() == 32_000
    assert (processor.unk_id(), processor.bos_id(), processor.eos_id()) == (0, 1, 2)
    assert [processor.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]
    assert processor.pad_id() == -1  # Mistral-7B-v0.1 has no pad piece
    # Byte fallback pieces follow the specials, as in the Mistral/Llama sentencepiece layout.
    assert processor.id_to_piece(3) == "<0x00>" and processor.id_to_piece(258) == "<0xFF>"


def test_known_mistral_token_ids(e5_tokenizer):
    # Ids of the Mistral-7B-v0.1 vocabulary (the same in e5-mistral-7b-instruct's tokenizer.json).
    assert e5_tokenizer.processor.encode("Concizumab is used") == [1325, 28717, 463, 383, 375, 349, 1307]


def test_offsets_are_character_spans(e5_tokenizer, snippet_texts):
    offsets = e5_tokenizer.offsets_batch(snippet_texts)
    ids = e5_tokenizer.processor.encode(snippet_texts)
    for text, spans, token_ids in zip(snippet_texts, offsets, ids):
        assert len(spans) == len(token_ids)
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(a[1] == b[0] for a, b in pairwise(spans))  # contiguous, in characters


def test_batch_equals_one_by_one(e5_tokenizer, snippet_texts):
    texts = snippet_texts[:40]
    assert e5_tokenizer.offsets_batch(texts) == [e5_tokenizer.offsets_one(t) for t in texts]


def test_hf_spec_loads_a_local_tokenizer_and_agrees(tmp_path, e5_tokenizer, snippet_texts):
    # `hf:<id>` works with a hub id where the hub is reachable; here a local folder holding the same model.
    shutil.copy(mistral_common_model_file("tokenizer.model.v1"), tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "legacy": True})
    )
    hf = load_tokenizer(f"hf:{tmp_path}")
    texts = snippet_texts[:200]
    hf_ids = hf.tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert hf_ids == e5_tokenizer.processor.encode(texts)
    # Same windows: token counts agree (offsets of byte-fallback pieces are reported differently).
    assert [len(o) for o in hf.offsets_batch(texts)] == [len(o) for o in e5_tokenizer.offsets_batch(texts)]


@pytest.mark.parametrize("spec", ["nope", "unknown:x", "mistral-common:", "mistral-common:no-such.model"])
def test_bad_tokenizer_specs(spec):
    with pytest.raises((ValueError, FileNotFoundError)):
        load_tokenizer(spec)
