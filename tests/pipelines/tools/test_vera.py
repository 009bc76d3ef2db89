import json

import numpy as np
import pandas as pd

from pipelines.tools.vera import bootstrap_report, load_negative_queries, load_samples, topicality_report
from tests.conftest import BIOASQ_SAMPLE


def test_bootstrap_report_per_system_metric():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame([(f"q{i}", s, m, float(rng.uniform())) for i in range(40) for s in ("a", "b")
                           for m in ("vera_faithfulness", "vera_aggregate")], columns=["query_id", "system", "metric", "score"])
    report = bootstrap_report(scores, b=300, seed=1, n=20, b_grid=(50, 100, 300))
    json.dumps(report, allow_nan=False)
    entry = report["systems"]["a"]["vera_faithfulness"]
    assert entry["n"] == 20 and entry["b"] == 300 and entry["n_observed"] == 40
    assert list(entry["convergence"]["b_values"]) == [50, 100, 300] and entry["low"] < entry["mean"] < entry["high"]
    assert bootstrap_report(scores, b=300, seed=1, n=20, b_grid=(50, 100, 300)) == report  # seeded


def test_load_samples_joins_context_by_retriever():
    queries = pd.DataFrame({"query_id": ["1"], "text": ["q?"]})
    retrieved = pd.DataFrame({"query_id": ["1"] * 3, "retriever": ["bm25", "bm25", "knn"], "rank": [2, 1, 1],
                              "text": ["second", "first", "dense"]})
    generations = pd.DataFrame({"query_id": ["1"], "system": ["bm25+r"], "retriever": ["bm25"], "answer": ["a"]})
    (s,) = load_samples(queries, retrieved, generations, top_k=5)
    assert s.context == ["first", "second"] and s.question == "q?"


def test_topicality_on_small_bioasq_repository(tmp_path):
    data = json.loads(BIOASQ_SAMPLE.read_text())
    data["questions"] = data["questions"][:4]
    corpus = tmp_path / "small.json"
    corpus.write_text(json.dumps(data))
    positive = [q["body"] for q in data["questions"]]
    negative = load_negative_queries()[:4]
    report = topicality_report(corpus, positive, negative, b=200, seed=0, k=3)
    assert report["n_positive"] == 4 and report["positive"]["mean"] > report["negative"]["mean"]
    assert isinstance(report["verdict"], str) and report["diff_low"] <= report["diff_mean"] <= report["diff_high"]
