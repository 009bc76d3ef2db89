import json

import numpy as np
import pandas as pd
import pytest

from judges.config import ClientConfig, JudgeConfig, ReaderConfig
from judges.vera import UNTRAINED_DEMO_HEAD
from pipelines.cli import main
from pipelines.tools.vera import (
    AGGREGATE,
    AGGREGATE_OFF,
    DEMO_AGGREGATE,
    aggregate_metric,
    bootstrap_report,
    judged_topicality_scores,
    llm_topicality_report,
    load_negative_queries,
    load_samples,
    run_vera,
    topicality_from_scores,
    topicality_report,
    topicality_samples,
)
from stats.vera import topicality
from tasks.layout import RunLayout
from tests.conftest import BIOASQ_SAMPLE


def test_bootstrap_report_per_system_metric():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame([(f"q{i}", s, m, float(rng.uniform())) for i in range(40) for s in ("a", "b")
                           for m in ("vera_faithfulness", "vera_aggregate")],
                          columns=["query_id", "system", "metric", "score"])
    report = bootstrap_report(scores, b=300, seed=1, n=20, b_grid=(50, 100, 300))
    json.dumps(report, allow_nan=False)
    entry = report["systems"]["a"]["vera_faithfulness"]
    assert entry["n"] == 20 and entry["b"] == 300 and entry["n_observed"] == 40
    assert list(entry["convergence"]["b_values"]) == [50, 100, 300]
    assert entry["low"] < entry["mean"] < entry["high"]
    assert bootstrap_report(scores, b=300, seed=1, n=20, b_grid=(50, 100, 300)) == report  # seeded


def test_load_samples_joins_context_by_retriever():
    queries = pd.DataFrame({"query_id": ["1", "2"], "text": ["q?", "other?"]})
    retrieved = pd.DataFrame({"query_id": ["1"] * 3 + ["2"], "retriever": ["bm25", "bm25", "knn", "bm25"],
                              "rank": [2, 1, 1, 1], "text": ["second", "first", "dense", "x"]})
    generations = pd.DataFrame({"query_id": ["1", "2"], "system": ["bm25+r"] * 2, "retriever": ["bm25"] * 2,
                                "answer": ["a", "b"], "status": ["ok"] * 2, "error": [None] * 2,
                                "n_chunks_used": [2, 1]})
    (s,), failed = load_samples(queries, retrieved, generations, top_k=5, limit=1)
    assert s.context == ["first", "second"] and s.question == "q?" and s.response == "a" and failed == []


def test_run_vera_writes_every_row_through_the_run_layout(tmp_path, judge_cache_dir):
    """No judge call: empty responses score 0 on every metric, a failed generation is a failed row."""
    layout = RunLayout(tmp_path / "run")
    layout.queries.parent.mkdir(parents=True)
    layout.generations.parent.mkdir(parents=True)
    pd.DataFrame({"query_id": ["1", "2", "3"], "text": ["q1?", "q2?", "q3?"]}).to_parquet(layout.queries)
    pd.DataFrame({"query_id": ["1", "2"], "retriever": ["bm25"] * 2, "rank": [1, 1],
                  "text": ["c1", "c2"]}).to_parquet(layout.retrieved)
    pd.DataFrame({"query_id": ["1", "2", "3"], "system": ["bm25+r"] * 3, "retriever": ["bm25"] * 3,
                  "answer": ["", None, " "], "status": ["ok", "failed", "ok"],
                  "error": [None, "HTTP 500", None], "n_chunks_used": [1, 0, 1]}
                 ).to_parquet(layout.generations)
    summary = run_vera(layout.root, JudgeConfig(), ClientConfig(), "http://127.0.0.1:9/v1", top_k=3,
                       cross_encoder=None, b=50, limit=2)
    judgments = pd.read_parquet(layout.vera_dir / "judgments.parquet")
    scores = pd.read_parquet(layout.vera_dir / "scores.parquet")
    assert summary["n_samples"] == 2 and summary["calls"] == 0 and summary["out_dir"] == str(layout.vera_dir)
    assert len(judgments) == 2 * 4 and set(judgments.suite) == {"vera"}
    empty, failed = judgments[judgments.query_id == "1"], judgments[judgments.query_id == "2"]
    assert (empty.status == "empty_response").all() and (empty.score == 0.0).all()
    assert (failed.status == "failed").all() and failed.score.isna().all()
    assert set(scores.query_id) == {"1"} and len(scores) == 4
    bootstrap = json.loads((layout.vera_dir / "bootstrap.json").read_text())
    assert set(bootstrap["systems"]["bm25+r"]) == set(scores.metric)
    assert summary["aggregate"] == AGGREGATE_OFF and AGGREGATE not in set(judgments.metric)


def test_the_aggregate_is_off_by_default_and_the_demo_head_has_its_own_name():
    assert run_vera.__defaults__[1] is None  # cross_encoder
    assert aggregate_metric(None) is None and aggregate_metric("/models/ms-marco-MiniLM-L-12-v2") == AGGREGATE
    assert aggregate_metric(UNTRAINED_DEMO_HEAD) == DEMO_AGGREGATE != AGGREGATE


def test_topicality_on_small_bioasq_repository(tmp_path):
    data = json.loads(BIOASQ_SAMPLE.read_text())
    data["questions"] = data["questions"][:4]
    corpus = tmp_path / "small.json"
    corpus.write_text(json.dumps(data))
    positive = [q["body"] for q in data["questions"]]
    negative = load_negative_queries()[:4]
    report = topicality_report(corpus, positive, negative, b=200, seed=0, k=3)
    assert report["method"] == "cosine" and report["n_positive"] == 4
    assert report["positive"]["mean"] > report["negative"]["mean"]
    assert isinstance(report["verdict"], str)
    assert report["diff_low"] <= report["diff_mean"] <= report["diff_high"]


def judged(rows):
    return pd.DataFrame(rows, columns=["query_id", "query_set", "metric", "score"])


def test_topicality_from_llm_metric_scores_per_metric():
    """The statistic of the paper's method on judged scores, without an LLM: each metric's positive and
    negative scores go through stats.vera.topicality with one seeded stream per metric."""
    def rows_of(query_set, metric, values):
        return [(f"{query_set}-{i}", query_set, metric, v) for i, v in enumerate(values)]

    rows = rows_of("positive", "vera_retrieval_precision", [0.8, 0.6, 1.0])
    rows += rows_of("negative", "vera_retrieval_precision", [0.0, 0.2])
    rows += rows_of("positive", "vera_faithfulness", [1.0, 0.5, 0.5])
    rows += rows_of("negative", "vera_faithfulness", [0.5, 1.0])
    rows += [("positive-0", "positive", "vera_retrieval_recall", 0.5),
             ("negative-0", "negative", "vera_retrieval_recall", None)]  # off-topic: no ground truth
    out = topicality_from_scores(judged(rows), b=400, seed=3)
    assert list(out) == ["vera_faithfulness", "vera_retrieval_recall", "vera_retrieval_precision"]
    precision = out["vera_retrieval_precision"]
    assert precision["computable"] and precision["n_positive"] == 3 and precision["n_negative"] == 2
    # every resample of {0.8, 0.6, 1.0} has mean >= 0.6, every one of {0, 0.2} <= 0.2: separated
    assert precision["positive"]["observed_mean"] == pytest.approx(0.8)
    assert precision["negative"]["observed_mean"] == pytest.approx(0.1)
    assert precision["separated"] and precision["diff_low"] >= 0.4 and precision["p_not_greater"] == 0.0
    stream = np.random.default_rng(np.random.SeedSequence([3, 2]))  # precision is the third metric
    expected = topicality([0.8, 0.6, 1.0], [0.0, 0.2], 400, stream)
    assert precision["diff_mean"] == pytest.approx(expected.diff_mean)
    assert not out["vera_faithfulness"]["separated"]
    recall = out["vera_retrieval_recall"]
    assert not recall["computable"] and "negative" in recall["reason"]
    report = llm_topicality_report(judged(rows), b=400, seed=3)
    json.dumps(report, allow_nan=False)
    assert report["method"] == "llm" and report["n_positive"] == 3 and report["n_negative"] == 2
    assert (report["separated"], report["not_separated"], report["not_computable"]) == (
        ["vera_retrieval_precision"], ["vera_faithfulness"], ["vera_retrieval_recall"])
    with pytest.raises(ValueError, match="query_set"):
        topicality_from_scores(judged([("q", "maybe", "vera_faithfulness", 1.0)]))


def test_topicality_cli_methods(tmp_path, capsys):
    assert main(["vera", "topicality"]) == 2  # method llm by default: needs an endpoint or scores
    assert "--llm-base-url" in capsys.readouterr().err
    rows = [(f"{s}-{i}", s, "vera_answer_relevance", v) for s, values in
            (("positive", [0.9, 0.7, 0.8]), ("negative", [0.1, 0.3])) for i, v in enumerate(values)]
    scores = tmp_path / "topicality.scores.parquet"
    judged(rows).to_parquet(scores)
    out = tmp_path / "topicality.json"
    assert main(["vera", "topicality", "--scores", str(scores), "--b", "200", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["method"] == "llm" and report["separated"] == ["vera_answer_relevance"]


def test_the_paper_preset_sets_n_50_and_b_500_unless_given():
    import argparse

    from pipelines.vera_cmd import bootstrap_settings

    def settings(**given):
        args = bootstrap_settings(argparse.Namespace(**{"b": None, "n": None, "preset": None, **given}))
        return args.b, args.n

    assert settings() == (1000, None)
    assert settings(preset="paper") == (500, 50)
    assert settings(preset="paper", b=2000) == (2000, 50)


@pytest.mark.llm
def test_llm_topicality_on_real_bioasq_questions(llm_endpoint, judge_cache_dir, tmp_path):
    """The paper's method end to end: retrieve, answer with the reader LLM, judge with the VERA metrics."""
    data = json.loads(BIOASQ_SAMPLE.read_text())
    data["questions"] = data["questions"][:2]
    corpus = tmp_path / "small.json"
    corpus.write_text(json.dumps(data))
    positive = [q["body"] for q in data["questions"]]
    truths = [q["ideal_answer"][0] if isinstance(q["ideal_answer"], list) else q["ideal_answer"]
              for q in data["questions"]]
    negative = load_negative_queries()[:2]
    reader = ReaderConfig(name="topicality", model=llm_endpoint.judge_model, max_tokens=96)
    client = ClientConfig(max_concurrency=4, timeout_s=120)
    samples, failed = topicality_samples(corpus, positive, negative, truths, reader, client,
                                         llm_endpoint.base_url, k=3)
    assert len(samples) + len(failed) == 4
    scores = judged_topicality_scores(samples, failed, JudgeConfig(model=llm_endpoint.judge_model), client,
                                      llm_endpoint.base_url)
    assert set(scores.query_set) == {"positive", "negative"} and len(scores) == 4 * 4
    report = llm_topicality_report(scores, b=100)
    json.dumps(report, allow_nan=False)
    assert "vera_retrieval_recall" in report["not_computable"]  # off-topic queries have no ground truth
