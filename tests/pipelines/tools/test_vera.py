import json

import numpy as np
import pandas as pd

from judges.config import ClientConfig, JudgeConfig
from pipelines.tools.vera import (
    bootstrap_report,
    load_negative_queries,
    load_samples,
    run_vera,
    topicality_report,
)
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


def test_topicality_on_small_bioasq_repository(tmp_path):
    data = json.loads(BIOASQ_SAMPLE.read_text())
    data["questions"] = data["questions"][:4]
    corpus = tmp_path / "small.json"
    corpus.write_text(json.dumps(data))
    positive = [q["body"] for q in data["questions"]]
    negative = load_negative_queries()[:4]
    report = topicality_report(corpus, positive, negative, b=200, seed=0, k=3)
    assert report["n_positive"] == 4 and report["positive"]["mean"] > report["negative"]["mean"]
    assert isinstance(report["verdict"], str)
    assert report["diff_low"] <= report["diff_mean"] <= report["diff_high"]
