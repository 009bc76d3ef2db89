import math

import numpy as np
import pandas as pd
import pytest

from judges.client import ChatResult
from judges.vera import (
    VERA_METRICS,
    VeraInput,
    VeraJudgeConfig,
    answer_relevance,
    enrich_answer,
    evaluate_sample,
    faithfulness,
    parse_numbered,
    parse_verdicts,
    precision_from_extracted,
    render,
    retrieval_precision,
    retrieval_recall,
    split_sentences,
)


class FakeClient:
    """Stands in for LLMClient.chat: replies from a list, records the prompts."""

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def chat(self, request):
        self.prompts.append(request.messages[-1]["content"])
        return ChatResult(self.replies.pop(0), 10, 5, "stop", 1)


def bag_embed(texts):
    """Deterministic toy embedding: bag of lowercase words hashed into 64 dims."""
    out = np.zeros((len(texts), 64))
    for i, t in enumerate(texts):
        for w in t.lower().replace("?", " ").replace(".", " ").split():
            out[i, sum(map(ord, w)) % 64] += 1
    return out


SAMPLE = VeraInput("q1", "s", "What does aspirin inhibit?", "Aspirin inhibits COX-1. It is sold in Paris.",
                   ["Aspirin irreversibly inhibits COX-1. It was first synthesised in 1897.", "Ibuprofen is an NSAID."])
CFG = VeraJudgeConfig(max_reasks=1)


def test_parsers():
    assert parse_numbered("1. a\n2) b\n- c\n\n") == ["a", "b", "c"]
    assert parse_numbered("NONE") == []
    assert parse_verdicts("1. yes\n2. no\n", 2) == [True, False]
    assert parse_verdicts("1. yes", 2) is None and parse_verdicts("1. yes or no\n2. no", 2) is None
    assert split_sentences("One here. Two there! three") == ["One here.", "Two there! three"]


def test_templates_neutralize_tags():
    prompt = render("v1", "statements.txt", question="q</question>", answer="a")
    assert "</question>" in prompt and prompt.count("</question>") == 1 and "[tag]" in prompt


def test_faithfulness_with_reask():
    client = FakeClient(["1. Aspirin inhibits COX-1.\n2. It is sold in Paris.", "1. yes", "1. yes\n2. no"])
    score = faithfulness(client, CFG, SAMPLE)
    assert score.metric == "vera_faithfulness" and score.score == 0.5 and score.status == "ok"
    assert score.calls == 3 and score.prompt_tokens == 30 and "exactly 2 lines" in client.prompts[-1]


def test_failure_is_none_with_reason():
    score = faithfulness(FakeClient(["1. s", "maybe", "perhaps"]), CFG, SAMPLE)
    assert score.score is None and score.status == "failed" and "re-asks" in score.reason


def test_recall_precision_relevance():
    r = retrieval_recall(FakeClient(["1. yes\n2. no"]), CFG, SAMPLE)
    assert r.score == 0.5 and r.calls == 1
    p = retrieval_precision(FakeClient(["Aspirin irreversibly inhibits COX-1."]), CFG, SAMPLE, bag_embed)
    assert p.score == pytest.approx(1 / 3)  # 1 of 3 context sentences
    none = retrieval_precision(FakeClient(["Insufficient Information"]), CFG, SAMPLE, bag_embed)
    assert none.score == 0.0
    a = answer_relevance(FakeClient(["1. What does aspirin inhibit?\n2. Where is it sold?\n3. x"]), CFG, SAMPLE, bag_embed)
    e = bag_embed(["What does aspirin inhibit?", "Where is it sold?", "x"])
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    assert a.score == pytest.approx(np.clip(e[1:] @ e[0], 0, 1).sum() / 3 + 1 / 3)  # first question identical: cos 1
    assert precision_from_extracted(["a b", "c d"], [], bag_embed, 0.8) == 0.0


def test_empty_answer_and_registry():
    empty = VeraInput("q", "s", "q?", "  ", ["c"])
    scores = evaluate_sample(FakeClient([]), CFG, empty, bag_embed)
    assert [s.metric for s in scores] == [m.column for m in VERA_METRICS.values()]
    assert all(s.score == 0.0 and s.status == "empty_response" for s in scores)


def test_enrich_answer_has_meaning_and_value():
    text = enrich_answer("Aspirin inhibits COX.", {"vera_faithfulness": 0.7, "answer_relevance": None,
                                                    "retrieval_recall": float("nan")})
    assert text.startswith("The actual answer to the following question is: Aspirin inhibits COX.")
    assert "faithfulness score is: 0.7." in text and "relevancy" not in text and "recall" not in text


@pytest.fixture(scope="module")
def aggregator():
    from judges.vera import CrossEncoderAggregator

    return CrossEncoderAggregator()  # local MiniLM + UNTRAINED head: mechanics only


def test_cross_encoder_aggregate_mechanics(aggregator):
    scores = aggregator.score(["What does aspirin inhibit?"] * 2,
                              [enrich_answer("COX.", {"faithfulness": 1.0}), enrich_answer("COX.", {"faithfulness": 0.0})])
    assert aggregator.untrained and len(scores) == 2
    for s in scores:
        assert math.isfinite(s.logit) and s.sigmoid == pytest.approx(1 / (1 + math.exp(-s.logit)))
    again = aggregator.score(["What does aspirin inhibit?"], [enrich_answer("COX.", {"faithfulness": 1.0})])
    assert again[0].logit == pytest.approx(scores[0].logit, abs=1e-5)


@pytest.mark.llm
def test_vera_on_real_bioasq_questions(llm_endpoint, tmp_path):
    from judges.config import ClientConfig
    from pipelines.tools.vera import run_vera
    from tests.conftest import write_bioasq_inputs

    queries_path, _ = write_bioasq_inputs(tmp_path / "run" / "retrieve", limit=2, chunks_per_query=3)
    queries = pd.read_parquet(queries_path)
    (tmp_path / "run" / "generate").mkdir()
    pd.DataFrame({"query_id": queries.query_id, "system": "bm25+ideal", "retriever": "bm25", "reader": "ideal",
                  "answer": queries.answer}).to_parquet(tmp_path / "run" / "generate" / "generations.parquet")
    cfg = VeraJudgeConfig(model=llm_endpoint.judge_model, max_tokens=96)
    summary = run_vera(tmp_path / "run", cfg, ClientConfig(max_concurrency=4, timeout_s=120), llm_endpoint.base_url,
                       top_k=3, b=200)
    judgments = pd.read_parquet(tmp_path / "run" / "vera" / "judgments.parquet")
    assert summary["n_samples"] == 2 and summary["calls"] > 0
    assert set(judgments.metric) == {"vera_faithfulness", "vera_retrieval_recall", "vera_retrieval_precision",
                                     "vera_answer_relevance", "vera_aggregate"}
    for row in judgments.itertuples():  # every metric either scored in [0, 1] or failed with a reason
        assert (row.score is not None and 0 <= row.score <= 1) or (row.status == "failed" and row.reason)
    assert (tmp_path / "run" / "vera" / "bootstrap.json").exists()
