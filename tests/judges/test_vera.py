import json
import math

import numpy as np
import pandas as pd
import pytest

from judges import vera
from judges.client import LLMRequestError
from judges.config import JudgeConfig, VeraOptions
from judges.parsers import parse_explained_verdicts, parse_numbered, parse_verdicts, split_sentences
from judges.suite import Sample, get_suite
from judges.vera import (
    UNTRAINED_DEMO_HEAD,
    VERA_METRICS,
    CrossEncoderUnavailable,
    VeraSuite,
    answer_grounding,
    answer_relevance,
    enrich_answer,
    faithfulness,
    parse_support_labels,
    precision_from_extracted,
    relevance_from_questions,
    render,
    retrieval_precision,
    retrieval_recall,
)
from tests.fakes import FakeLLMClient


def bag_embed(texts):
    """Deterministic toy embedding: bag of lowercase words hashed into 64 dims."""
    out = np.zeros((len(texts), 64))
    for i, t in enumerate(texts):
        for w in t.lower().replace("?", " ").replace(".", " ").split():
            out[i, sum(map(ord, w)) % 64] += 1
    return out


def count(text):
    return len(text) // 4


SAMPLE = Sample("q1", "s", "What does aspirin inhibit?", "Aspirin inhibits COX-1. It is sold in Paris.",
                "Aspirin inhibits COX-1 and COX-2. It was synthesised in 1897. Its effect is irreversible.",
                ["Aspirin irreversibly inhibits COX-1. It was first synthesised in 1897.",
                 "Ibuprofen is an NSAID."])
PAPER_METRICS = ("vera_faithfulness", "vera_retrieval_recall", "vera_retrieval_precision",
                 "vera_answer_relevance")
# v2 verdicts (paper appendix 8.1): an explanation before each verdict; "no" inside an explanation and the
# closing summary line must not count as verdicts
EXPLAINED_REPLY = ("1. Explanation: The context says aspirin irreversibly inhibits COX-1. Verdict: Yes\n"
                   "2. Explanation: There is no mention of Paris in the context.\n**Verdict:** No.\n"
                   "Final verdict for each statement in order: Yes. No.")
RECALL_REPLY = ("1. Only COX-1 is in the context. [Not Supported by Context]\n"
                "2. The year is stated. [Supported by Context]\n"
                "3. The context says irreversibly. So [Supported by Context]")
CFG = JudgeConfig(vera=VeraOptions(max_reasks=1))
SUITE = VeraSuite(embed=bag_embed)


def plan_of(sample=SAMPLE, cfg=CFG):
    (unit,) = SUITE.plan(sample, cfg, 0, count)
    return unit


PLAN = plan_of().plan


def test_parsers():
    assert parse_numbered("1. a\n2) b\n- c\n\n") == ["a", "b", "c"]
    assert parse_numbered("NONE") == []
    assert parse_verdicts("1. yes\n2. no\n", 2) == [True, False]
    assert parse_verdicts("1. yes", 2) is None and parse_verdicts("1. yes or no\n2. no", 2) is None
    assert split_sentences("One here. Two there! three") == ["One here.", "Two there! three"]
    assert parse_support_labels(RECALL_REPLY, 3) == [False, True, True]
    # the last label of a line decides; lines without a label are ignored; the count must match
    assert parse_support_labels("x\n1. not [Supported by context] but [not supported by the context]", 1) == [
        False]
    assert parse_support_labels("1. supported\n2. [Supported by Context]", 2) is None


def test_explained_verdicts_v2_only():
    parse = parse_explained_verdicts
    assert parse(EXPLAINED_REPLY, 2) == [True, False]
    # the paper's layout: statement restated, explanation and verdict on their own lines
    paper_like = ("1. It is sold in Paris.\nExplanation: No place of sale is named.\nVerdict: No.\n\n"
                  "2. Aspirin inhibits COX-1. **Explanation:** The context states it. **Verdict:** Yes.")
    assert parse(paper_like, 2) == [False, True]
    # malformed: no "Verdict:" marker (v1's bare form), or a verdict that is neither yes nor no
    assert parse("1. yes\n2. no", 2) is None
    assert parse("1. Explanation: unclear. Verdict: maybe\n2. Explanation: x. Verdict: No", 2) is None
    # a statement's verdict missing: the count does not match, the parser says what it expected
    missing = "1. Explanation: stated. Verdict: Yes\n2. Explanation: Paris is not in the context."
    assert parse(missing, 2) is None
    reply = vera.verdict_reply("v2")
    assert reply is vera.VERDICT_REPLIES["explained"] and vera.verdict_reply("v1").parse is parse_verdicts
    parsed = vera.verdicts_parser(2, reply)(missing)
    assert not parsed.ok and "Verdict: Yes" in parsed.reason
    assert "Explanation" in render("v2", "verdicts.txt", context="c", statements="1. s")
    assert "Explanation" not in render("v1", "verdicts.txt", context="c", statements="1. s")


def test_templates_neutralize_tags():
    prompt = render("v1", "statements.txt", question="q</question>", answer="a")
    assert "</question>" in prompt and prompt.count("</question>") == 1 and "[/question]" in prompt


def test_faithfulness_with_reask():
    client = FakeLLMClient(["1. Aspirin inhibits COX-1.\n2. It is sold in Paris.", "1. yes\n2. no",
                         EXPLAINED_REPLY])
    score = faithfulness(client, CFG, SAMPLE, PLAN)
    assert score.metric == "vera_faithfulness" and score.score == 0.5 and score.status == "ok"
    assert score.suite == "vera" and score.llm_score is None and score.em is None
    assert score.attempts == 3 and score.prompt_tokens == 30 and "exactly 2 lines" in client.prompts[-1]
    detail = json.loads(score.detail)
    assert detail["statements"] == ["Aspirin inhibits COX-1.", "It is sold in Paris."]
    assert detail["verdicts"] == [True, False] and detail["raw"] == EXPLAINED_REPLY == score.raw
    assert "Verdict: Yes" in client.prompts[-1]  # the re-ask states the explained form


def test_failure_is_none_with_reason():
    score = faithfulness(FakeLLMClient(["1. s", "maybe", "perhaps"]), CFG, SAMPLE, PLAN)
    assert score.score is None and score.status == "failed" and "re-asks" in score.reason


def test_request_failure_keeps_its_prefix_for_the_requeue():
    down = FakeLLMClient(lambda request: LLMRequestError("connection refused", attempts=3))
    score = faithfulness(down, CFG, SAMPLE, PLAN)
    assert score.status == "failed" and score.transport_failed and score.attempts == 3


def test_retrieval_recall_attributes_the_ground_truth_to_the_context():
    client = FakeLLMClient(["1. [Supported by Context]", RECALL_REPLY])
    r = retrieval_recall(client, CFG, SAMPLE, PLAN)
    assert r.metric == "vera_retrieval_recall" and r.score == pytest.approx(2 / 3) and r.attempts == 2
    prompt = client.prompts[0]
    assert "1. Aspirin inhibits COX-1 and COX-2.\n2. It was synthesised in 1897." in prompt
    assert "sold in Paris" not in prompt  # the answer is not an input of retrieval recall
    assert prompt.index("<context>") < prompt.index("<ground_truth>")  # the paper's order
    assert "exactly 3 lines" in client.prompts[1]
    detail = json.loads(r.detail)
    assert detail["supported"] == [False, True, True] and len(detail["sentences"]) == 3
    no_truth = Sample("q3", "s", SAMPLE.question, SAMPLE.response, "", SAMPLE.context)
    r = retrieval_recall(FakeLLMClient([]), CFG, no_truth, plan_of(no_truth).plan)
    assert r.score is None and r.status == "failed" and "ground truth" in r.reason


def test_answer_grounding_is_v1s_recall_under_its_own_name():
    g = answer_grounding(FakeLLMClient([EXPLAINED_REPLY]), CFG, SAMPLE, PLAN)
    assert g.metric == "vera_answer_grounding" and g.score == 0.5 and g.attempts == 1
    assert "vera_answer_grounding" not in SUITE.selected_metrics(JudgeConfig())
    v1 = JudgeConfig(vera=VeraOptions(prompt_version="v1", metrics=["answer_grounding"]))
    (unit,) = SUITE.plan(SAMPLE, v1, 0, count)
    (j,) = SUITE.evaluate(FakeLLMClient(["1. yes\n2. no"]), unit, v1, count)
    assert j.score == 0.5 and j.prompt_version == "v1"
    with pytest.raises(ValueError, match="answer_grounding"):
        SUITE.plan(SAMPLE, JudgeConfig(vera=VeraOptions(prompt_version="v1")), 0, count)


def test_the_ground_truth_is_part_of_the_cache_key_only_where_read():
    other = Sample(SAMPLE.query_id, "s", SAMPLE.question, SAMPLE.response, "Something else.", SAMPLE.context)
    from judges.caching import CachingJudge

    def key(sample=SAMPLE, judge=CFG):
        return CachingJudge(SUITE, judge, 0).key(plan_of(sample, judge))

    assert key(other) != key()
    relevance = JudgeConfig(vera=VeraOptions(metrics=["answer_relevance"]))
    assert key(other, relevance) == key(SAMPLE, relevance)


def test_recall_precision_relevance():
    p = retrieval_precision(FakeLLMClient(["Aspirin irreversibly inhibits COX-1."]), CFG, SAMPLE, PLAN,
                            embed=bag_embed)
    assert p.score == pytest.approx(1 / 3)  # 1 of 3 context sentences
    none = retrieval_precision(FakeLLMClient(["Insufficient Information"]), CFG, SAMPLE, PLAN,
                               embed=bag_embed)
    assert none.score == 0.0
    questions = FakeLLMClient(["1. What does aspirin inhibit?\n2. Where is it sold?\n3. x"])
    a = answer_relevance(questions, CFG, SAMPLE, PLAN, embed=bag_embed)
    e = bag_embed(["What does aspirin inhibit?", "Where is it sold?", "x"])
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    # first question identical: cos 1
    assert a.score == pytest.approx(np.clip(e[1:] @ e[0], 0, 1).sum() / 3 + 1 / 3)
    assert precision_from_extracted(["a b", "c d"], [], bag_embed, 0.8) == 0.0


def test_gqm_relevance_weighting_favours_the_best_matches():
    """GQM thesis eq. 5.9 on hand-made similarities: embeddings whose cosines with the question are
    exactly 1, 0.6 and 0 (sorted best first: 0.5 * 1 + 0.3 * 0.6 + 0.2 * 0), else the mean."""
    vectors = {"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0]}

    def embed(texts):
        return np.asarray([vectors[t] for t in texts])

    assert relevance_from_questions("q", ["c", "a", "b"], embed, "gqm") == pytest.approx(0.68)
    assert relevance_from_questions("q", ["c", "a", "b"], embed, "mean") == pytest.approx(1.6 / 3)
    assert relevance_from_questions("q", ["c", "a"], embed, "gqm") == pytest.approx(0.5)  # fewer than 3
    weighted = JudgeConfig(vera=VeraOptions(relevance_weighting="gqm"))
    questions = FakeLLMClient(["1. What does aspirin inhibit?\n2. Where is it sold?\n3. x"])
    a = answer_relevance(questions, weighted, SAMPLE, PLAN, embed=bag_embed)
    e = bag_embed(["What does aspirin inhibit?", "Where is it sold?", "x"])
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    sims = np.sort(np.clip(np.r_[1.0, e[1:] @ e[0]], 0, 1))[::-1]
    assert a.score == pytest.approx(float(sims @ [0.5, 0.3, 0.2]))


def test_context_is_fitted_to_the_window_and_precision_counts_only_what_the_judge_saw():
    long = Sample("q2", "s", SAMPLE.question, SAMPLE.response, "",
                  [SAMPLE.context[0], "Filler text here. " * 200])
    roomy = plan_of(long, JudgeConfig(context_window=8192))
    assert roomy.n_context_chunks == 2 and roomy.n_context_truncated == 0  # no fixed 3,000-character cap
    assert len(roomy.plan.context) > 3000
    cfg = JudgeConfig(context_window=600, vera=VeraOptions(max_reasks=1))
    unit = plan_of(long, cfg)
    assert unit.n_context_chunks == 1 and unit.n_context_truncated == 1
    assert "Filler" not in unit.plan.context and unit.plan.context_sentences == (
        "Aspirin irreversibly inhibits COX-1.", "It was first synthesised in 1897.")
    client = FakeLLMClient(["Aspirin irreversibly inhibits COX-1."])
    p = retrieval_precision(client, cfg, long, unit.plan, embed=bag_embed)
    assert p.score == pytest.approx(1 / 2)  # 1 of the 2 sentences of the fitted context
    assert "Filler" not in client.prompts[0] and count(client.prompts[0]) <= cfg.context_window - 192 - 64


def test_one_unit_per_sample_evaluates_every_selected_metric():
    (unit,) = SUITE.plan(SAMPLE, CFG, 0, count)
    assert unit.metrics == PAPER_METRICS and unit.suite == "vera"
    client = FakeLLMClient(["1. Aspirin inhibits COX-1.\n2. It is sold in Paris.",  # faithfulness: statements
                         EXPLAINED_REPLY,  # faithfulness: verdicts
                         RECALL_REPLY,  # recall
                         "Aspirin irreversibly inhibits COX-1.",  # precision
                         "1. What does aspirin inhibit?"])  # relevance
    judgments = SUITE.evaluate(client, unit, CFG, count)
    assert [j.metric for j in judgments] == list(PAPER_METRICS)
    assert [j.score for j in judgments] == pytest.approx([0.5, 2 / 3, 1 / 3, 1.0])
    assert [j.attempts for j in judgments] == [2, 1, 1, 1] and {j.status for j in judgments} == {"ok"}
    only = JudgeConfig(vera=VeraOptions(metrics=["answer_relevance"]))
    (unit,) = SUITE.plan(SAMPLE, only, 0, count)
    # no context in the relevance prompt
    assert unit.metrics == ("vera_answer_relevance",) and unit.n_context_chunks == 0


def test_embedder_is_loaded_lazily_once_per_process(monkeypatch):
    made = []
    monkeypatch.setattr(vera, "_DEFAULT_EMBED", [])
    monkeypatch.setattr(vera, "minilm_embedder", lambda: made.append(1) or bag_embed)
    suite = VeraSuite()
    cfg = JudgeConfig(vera=VeraOptions(metrics=["faithfulness"]))
    (unit,) = suite.plan(SAMPLE, cfg, 0, count)
    suite.evaluate(FakeLLMClient(["1. a", "1. Explanation: e. Verdict: Yes"]), unit, cfg, count)
    assert made == []  # faithfulness needs no embedding
    cfg = JudgeConfig(vera=VeraOptions(metrics=["retrieval_precision"]))
    (unit,) = suite.plan(SAMPLE, cfg, 0, count)
    for _ in range(2):
        (p,) = suite.evaluate(FakeLLMClient(["Aspirin irreversibly inhibits COX-1."]), unit, cfg, count)
        assert p.score == pytest.approx(1 / 3)
    assert made == [1]


def test_empty_answer_and_registry():
    empty = Sample("q", "s", "q?", "  ", "", ["c"])
    suite = get_suite("vera")
    # the LLM metrics, then the cross-encoder aggregate's columns (selected only with a cross-encoder)
    assert isinstance(suite, VeraSuite) and suite.metrics == {**VERA_METRICS, **vera.AGGREGATE_METRICS}
    assert suite.selected_metrics(JudgeConfig()) == PAPER_METRICS and suite.prompt_version(CFG) == "v2"
    assert all(m.suite == "vera" and m.scale == (0, 1) and m.name.startswith("vera_")
               for m in VERA_METRICS.values())
    for scores in (suite.not_judged(empty, CFG, "empty_response", "empty"),
                   SUITE.evaluate(FakeLLMClient([]), plan_of(empty), CFG, count)):
        assert [s.metric for s in scores] == list(PAPER_METRICS)
        assert all(s.score == 0.0 and s.status == "empty_response" and s.attempts == 0 for s in scores)
    failed = suite.not_judged(empty, CFG, "failed", "generation failed: HTTP 500")
    assert all(s.score is None and s.status == "failed" and s.reason.startswith("generation failed")
               for s in failed)


def test_enrich_answer_has_meaning_and_value():
    text = enrich_answer("Aspirin inhibits COX.", {"vera_faithfulness": 0.7, "answer_relevance": None,
                                                    "retrieval_recall": float("nan")})
    assert text.startswith("Answer the system gave to this question: Aspirin inhibits COX.")
    assert text.endswith("Faithfulness score of this answer, given the question and the context: 0.7.")
    assert "relevancy" not in text and "recall" not in text


@pytest.fixture(scope="module")
def aggregator():
    from judges.vera import CrossEncoderAggregator

    return CrossEncoderAggregator(UNTRAINED_DEMO_HEAD)  # local MiniLM + UNTRAINED head: mechanics only


def test_cross_encoder_aggregate_mechanics(aggregator):
    scores = aggregator.score(["What does aspirin inhibit?"] * 2,
                              [enrich_answer("COX.", {"faithfulness": 1.0}),
                               enrich_answer("COX.", {"faithfulness": 0.0})])
    assert aggregator.untrained and len(scores) == 2
    for s in scores:
        assert math.isfinite(s.logit) and s.sigmoid == pytest.approx(1 / (1 + math.exp(-s.logit)))
    again = aggregator.score(["What does aspirin inhibit?"], [enrich_answer("COX.", {"faithfulness": 1.0})])
    assert again[0].logit == pytest.approx(scores[0].logit, abs=1e-5)


def test_no_cross_encoder_without_a_trained_head(tmp_path):
    from judges.vera import CrossEncoderAggregator, minilm_path

    with pytest.raises(TypeError):
        CrossEncoderAggregator()  # no default model: the aggregate is opt-in
    with pytest.raises(CrossEncoderUnavailable, match="no trained classification head"):
        CrossEncoderAggregator(minilm_path())  # a bare encoder would get a random head
    with pytest.raises(CrossEncoderUnavailable, match="could not be loaded"):
        CrossEncoderAggregator(str(tmp_path / "missing-model"))


@pytest.mark.llm
def test_vera_on_real_bioasq_questions(llm_endpoint, judge_cache_dir, tmp_path):
    from judges.config import ClientConfig
    from pipelines.tools.vera.scoring import run_vera
    from tasks.runtime.layout import RunLayout
    from tests.conftest import write_bioasq_inputs

    layout = RunLayout(tmp_path / "run")
    queries_path, _ = write_bioasq_inputs(layout.stage_dir("retrieve"), limit=2, chunks_per_query=3)
    queries = pd.read_parquet(queries_path)
    layout.generations.parent.mkdir()
    pd.DataFrame({"query_id": queries.query_id, "system": "bm25+ideal", "retriever": "bm25",
                  "reader": "ideal", "answer": queries.answer, "status": "ok", "error": None,
                  "n_chunks_used": 3}).to_parquet(layout.generations)
    cfg = JudgeConfig(model=llm_endpoint.judge_model, vera=VeraOptions(max_tokens=96))
    summary = run_vera(layout.root, cfg, ClientConfig(max_concurrency=4, timeout_s=120),
                       llm_endpoint.base_url, top_k=3, b=200)
    judgments = pd.read_parquet(layout.vera_dir / "judgments.parquet")
    assert summary["n_samples"] == 2 and summary["calls"] > 0
    assert set(judgments.metric) == set(PAPER_METRICS)  # the aggregate is off without a trained model
    assert len(judgments) == 2 * 4 and set(judgments.suite) == {"vera"}
    for row in judgments.itertuples():  # every metric either scored in [0, 1] or failed with a reason
        assert (pd.notna(row.score) and 0 <= row.score <= 1) or (row.status == "failed" and row.reason)
    assert (layout.vera_dir / "bootstrap.json").exists()


# --- the `paper` version, the embedder setting and the aggregate (issue 35 item 4) --------------------------

PAPER = VeraOptions(prompt_version="paper", max_reasks=0)
LONG_ANSWER = " ".join(f"Fact number {i} holds." for i in range(14))


def test_the_paper_version_caps_no_statement_and_asks_one_question_per_call():
    long = Sample("q", "s", SAMPLE.question, LONG_ANSWER, LONG_ANSWER, SAMPLE.context)
    assert len(vera.answer_sentences(long, JudgeConfig(vera=PAPER))) == 14
    assert len(vera.ground_truth_sentences(long, JudgeConfig(vera=PAPER))) == 14
    assert len(vera.answer_sentences(long, CFG)) == 12  # v2 keeps the 12-statement cap, under its own name
    capped = JudgeConfig(vera=PAPER.model_copy(update={"max_statements": 3}))  # an explicit cap wins
    assert len(vera.answer_sentences(long, capped)) == 3
    statements = "\n".join(f"{i}. Fact number {i} holds." for i in range(1, 15))
    verdicts = "\n".join(f"{i}. Explanation: stated. Verdict: Yes" for i in range(1, 15))
    f = faithfulness(FakeLLMClient([statements, verdicts]), JudgeConfig(vera=PAPER), long, PLAN)
    assert f.score == 1.0 and len(json.loads(f.detail)["statements"]) == 14

    client = FakeLLMClient(["Question: What does aspirin inhibit?", "Where is aspirin sold?", "x"])
    a = answer_relevance(client, JudgeConfig(vera=PAPER), SAMPLE, PLAN, embed=bag_embed)
    assert len(client.requests) == 3 and a.attempts == 3  # n = 3 questions, one call each
    assert [r.seed for r in client.requests] == [0, 1, 2]
    assert {r.temperature for r in client.requests} == {0.7}
    assert json.loads(a.detail)["questions"] == ["What does aspirin inhibit?", "Where is aspirin sold?", "x"]
    prompt = client.prompts[0]
    assert "the one question it replies to" in prompt and "{n}" not in prompt and "formal" in prompt
    one = JudgeConfig(vera=PAPER.model_copy(update={"n_questions": 1}))
    client = FakeLLMClient(["What does aspirin inhibit?"])
    assert answer_relevance(client, one, SAMPLE, PLAN, embed=bag_embed).score == pytest.approx(1.0)
    assert client.requests[0].temperature == 0.0 and client.requests[0].seed is None  # greedy when n = 1
    failed = answer_relevance(FakeLLMClient(["q?", ""]), JudgeConfig(vera=PAPER), SAMPLE, PLAN,
                              embed=bag_embed)
    assert failed.score is None and failed.reason.startswith("question 2 of 3")
    v2 = FakeLLMClient(["1. a?\n2. b?\n3. c?"])  # v2: the three questions in one call
    answer_relevance(v2, CFG, SAMPLE, PLAN, embed=bag_embed)
    assert len(v2.requests) == 1 and "Write 3 different questions" in v2.prompts[0]


def test_the_paper_enrichment_holds_the_context_block():
    text = enrich_answer("Aspirin inhibits COX.", {"vera_faithfulness": 0.7, "vera_answer_relevance": 0.9},
                         "paper", ["Aspirin inhibits COX-1.", "Ibuprofen is an NSAID."])
    answer, context = text.index("Aspirin inhibits COX."), text.index('["Aspirin inhibits COX-1.", "Ibu')
    assert answer < context < text.index("relevancy") < text.index("Faithfulness")  # the appendix's order
    assert '"Ibuprofen' not in enrich_answer("a", {}, "v2", ["Ibuprofen"])  # v1/v2: no context statement


def test_the_embedder_is_a_setting():
    from judges.vera import configured_embedder, default_embedder, minilm_path

    assert VeraOptions().embedder == vera.EMBEDDER_ID
    assert configured_embedder(vera.EMBEDDER_ID) is default_embedder()
    by_path = configured_embedder(minilm_path())  # a local folder: the same model, loaded by its path
    assert by_path is configured_embedder(minilm_path()) and by_path(["a b"]).shape == (1, 384)
    with pytest.raises(ValueError, match="judge.vera.embedder"):
        VeraSuite().check_config(JudgeConfig(vera=VeraOptions(embedder="no-such/embedder")))
    unused = VeraOptions(embedder="no-such/embedder", metrics=["faithfulness"])  # no metric embeds
    VeraSuite().check_config(JudgeConfig(vera=unused))


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    from tests.tiny_cross_encoder import build_tiny_cross_encoder

    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


def test_the_aggregate_end_to_end_with_a_cross_encoder_built_in_the_test(tiny_cross_encoder):
    """The suite with judge.vera.cross_encoder set: the LLM metrics (fake judge), then the enriched answer
    (answer, context block, metric statements: the `paper` version) scored by a tiny BERT cross-encoder
    built in the test (no pretrained MS MARCO cross-encoder installs here): vera_aggregate is the logit,
    the one transformers computes for that pair; vera_aggregate_sigmoid its expit."""
    from tests.tiny_cross_encoder import reference_logit

    options = PAPER.model_copy(update={"cross_encoder": tiny_cross_encoder, "n_questions": 1})
    judge = JudgeConfig(vera=options)
    suite = VeraSuite(embed=bag_embed)
    suite.check_config(judge)
    (unit,) = suite.plan(SAMPLE, judge, 0, count)
    assert unit.metrics == (*PAPER_METRICS, "vera_aggregate", "vera_aggregate_sigmoid")
    client = FakeLLMClient(["1. Aspirin inhibits COX-1.\n2. It is sold in Paris.", EXPLAINED_REPLY,
                            RECALL_REPLY, "Aspirin irreversibly inhibits COX-1.",
                            "What does aspirin inhibit?"])
    judgments = {j.metric: j for j in suite.evaluate(client, unit, judge, count)}
    assert len(client.requests) == 5  # the aggregate asks the LLM nothing
    logit, sigmoid = judgments["vera_aggregate"], judgments["vera_aggregate_sigmoid"]
    marks = {m: judgments[m].score for m in PAPER_METRICS}
    enriched = enrich_answer(SAMPLE.response, marks, "paper", unit.plan.chunks)
    assert "Ibuprofen is an NSAID." in enriched  # the context block
    assert logit.score == pytest.approx(reference_logit(tiny_cross_encoder, SAMPLE.question, enriched, 512),
                                        abs=1e-5)
    assert sigmoid.score == pytest.approx(1 / (1 + math.exp(-logit.score)))
    detail = json.loads(logit.detail)
    assert detail["logit"] == logit.score and detail["truncated_tokens"] == 0
    assert detail["context_chunks"] == 2
    assert detail["enriched_with"] == ["vera_answer_relevance", "vera_retrieval_precision",
                                       "vera_retrieval_recall", "vera_faithfulness"]
    assert logit.status == sigmoid.status == "ok" and logit.reason is None and logit.attempts == 0

    # a window shorter than the pair: the enriched answer's end is cut, and the cut is counted
    short = judge.model_copy(update={"vera": options.model_copy(update={"cross_encoder_max_length": 32})})
    cut, _ = vera.aggregate_judgments(SAMPLE, short, list(judgments.values())[:4], unit.plan.chunks)
    assert json.loads(cut.detail)["truncated_tokens"] == detail["tokens"] - 32 > 0
    assert cut.score == pytest.approx(reference_logit(tiny_cross_encoder, SAMPLE.question, enriched, 32),
                                      abs=1e-5)
    # an empty answer: 0 on the LLM metrics without a call, and the aggregate of those zeros
    empty = Sample("e", "s", SAMPLE.question, " ", "", SAMPLE.context)
    rows = {j.metric: j for j in suite.not_judged(empty, judge, "empty_response", "empty")}
    assert rows["vera_faithfulness"].score == 0.0 and math.isfinite(rows["vera_aggregate"].score)
    assert json.loads(rows["vera_aggregate"].detail)["enriched_with"] == list(detail["enriched_with"])
    failed = suite.not_judged(empty, judge, "failed", "generation failed: HTTP 500")
    assert all(j.score is None and j.status == "failed" for j in failed) and len(failed) == 6


def test_the_aggregate_refuses_what_it_cannot_load(tmp_path):
    from judges.vera import minilm_path

    for name, message in ((minilm_path(), "no trained classification head"),
                          (str(tmp_path / "missing"), "neither a local folder")):
        with pytest.raises(ValueError, match=message):
            VeraSuite().check_config(JudgeConfig(vera=VeraOptions(cross_encoder=name)))
    with pytest.raises(ValueError, match="judge.vera.cross_encoder"):  # not a metric to select
        VeraSuite().check_config(JudgeConfig(vera=VeraOptions(metrics=["faithfulness", "aggregate"])))
    demo = JudgeConfig(vera=VeraOptions(cross_encoder=UNTRAINED_DEMO_HEAD))
    assert VeraSuite().selected_metrics(demo)[-2:] == ("vera_aggregate_untrained",
                                                       "vera_aggregate_untrained_sigmoid")
