"""`ccrs vera score` and `ccrs vera bootstrap` (pipelines/tools/vera/scoring.py): the VERA suite over a
run's generations, the bootstrap report and their settings."""
import json

import numpy as np
import pandas as pd
import yaml

from judges.config import ClientConfig, JudgeConfig
from judges.vera import AGGREGATE, DEMO_AGGREGATE, UNTRAINED_DEMO_HEAD
from pipelines.tools.vera.scoring import (
    AGGREGATE_OFF,
    aggregate_metric,
    bootstrap_report,
    load_samples,
    run_vera,
)
from tasks.runtime.layout import RunLayout


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


def test_the_paper_preset_sets_n_50_and_b_500_unless_given():
    import argparse

    from pipelines.options import DEFAULT_B
    from pipelines.vera_cmd import add_arguments, bootstrap_settings

    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def settings(*flags):
        args = bootstrap_settings(parser.parse_args(["bootstrap", "scores.parquet", *flags]))
        return args.b, args.n

    from stats.vera import PAPER_SAMPLE_RATIO, SampleSize

    paper_n = SampleSize(50, PAPER_SAMPLE_RATIO)
    assert settings() == (DEFAULT_B, SampleSize())
    assert settings("--preset", "paper") == (500, paper_n)
    assert settings("--preset", "paper", "--b", "2000") == (2000, paper_n)
    assert settings("--preset", "paper", "--b", str(DEFAULT_B)) == (DEFAULT_B, paper_n)  # given: the default
    assert settings("--preset", "paper", "--n", "30") == (500, SampleSize(30))  # a given n: refused above N


def test_vera_score_takes_the_runs_own_config_and_the_options(tmp_path):
    import argparse

    from pipelines.config import load_config
    from pipelines.vera_cmd import add_arguments, score_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run = tmp_path / "run"
    run.mkdir()
    assert score_config(parser.parse_args(["score", str(run)])) == load_config(None)  # no config.json yet
    recorded = load_config(None, {"judge.model": "recorded-judge", "judge.vera.max_tokens": 99,
                                  "retrieval.top_k": 3})
    RunLayout(run).config_json.write_text(recorded.model_dump_json(indent=2))
    assert score_config(parser.parse_args(["score", str(run)])) == recorded
    given = score_config(parser.parse_args(["score", str(run), "--judge-model", "other", "--llm-base-url",
                                            "http://x/v1"]))
    assert (given.judge.model, given.judge.vera.max_tokens, given.serving.base_url) == ("other", 99,
                                                                                       "http://x/v1")
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"name": "other", "judge": {"model": "from-file"},
                                     "readers": [{"name": "x", "kind": "extractive"}]}))
    chosen = score_config(parser.parse_args(["score", str(run), "--config", str(other)]))
    assert chosen.judge.model == "from-file"
