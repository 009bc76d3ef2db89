from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "bioasq-sample" / "12B1_golden_sample.json"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def sample_questions() -> list[dict]:
    return json.loads(SAMPLE.read_text())["questions"]


@pytest.fixture(scope="session")
def sample_dataset():
    from retrievers.loaders import load_bioasq_json

    return load_bioasq_json(SAMPLE)


@pytest.fixture(scope="session")
def sample_chunks(sample_dataset):
    from retrievers.chunking import chunk_passages
    from retrievers.tokenization import load_tokenizer

    return chunk_passages(
        sample_dataset.passages, load_tokenizer("mistral-common:tokenizer.model.v1"), 300, 60
    )
