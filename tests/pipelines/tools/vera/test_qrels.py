"""`ccrs vera qrels` (pipelines/tools/vera/qrels.py): the section 5.1 experiment, perfectly relevant vs
irrelevant contexts from qrels."""
import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from judges.config import ClientConfig, JudgeConfig
from pipelines.cli import main
from pipelines.tools.vera.qrels import IRRELEVANT, PERFECTLY_RELEVANT, qrels_asks, qrels_report
from pipelines.tools.vera.query_sets import answer_asks, judged_set_scores, vera_reader
from retrievers.trec import QrelsError, load_qrels_texts, read_qrels
from tests.fakes import FakeLLMClient
from tests.pipelines.tools.vera.fakes import QRELS, SAMPLE_DIR, TWO_METRICS, fake_reply, in_process


def test_qrels_asks_by_pair_and_by_query():
    qrels = read_qrels(QRELS)
    queries, corpus = load_qrels_texts(SAMPLE_DIR, SAMPLE_DIR, qrels)
    pairs = qrels_asks(qrels, queries, corpus)
    relevant = [a for a in pairs.asks if a.query_set == PERFECTLY_RELEVANT]
    assert pairs.relevant_grade == 1 and pairs.dropped == {}
    assert len(relevant) == (qrels.grade == 1).sum()
    assert len(pairs.asks) - len(relevant) == (qrels.grade == 0).sum()
    first = relevant[0]
    qid, doc = first.query_id.split("/")[1:]
    assert first.passages == (corpus[doc],) and (first.question, first.ground_truth) == queries[qid]
    per_query = qrels_asks(qrels, queries, corpus, unit="query", k=3)
    assert sum(a.query_set == IRRELEVANT for a in per_query.asks) == 32
    assert all(1 <= len(a.passages) <= 3 for a in per_query.asks)
    drawn = qrels_asks(qrels, queries, corpus, limit=10, seed=1)
    assert sum(a.query_set == IRRELEVANT for a in drawn.asks) == 10
    assert drawn == qrels_asks(qrels, queries, corpus, limit=10, seed=1)
    missing = qrels_asks(qrels, queries, {d: t for d, t in corpus.items() if d != doc})
    assert missing.dropped == {"passage text missing": int((qrels.doc_id == doc).sum())}
    with pytest.raises(QrelsError, match="no usable judgment at grade 2"):
        qrels_asks(qrels, queries, corpus, relevant_grade=2)
    with pytest.raises(ValueError, match="unit"):
        qrels_asks(qrels, queries, corpus, unit="document")


def test_the_relevant_vs_irrelevant_experiment_without_a_server(monkeypatch, tmp_path, capsys):
    """Two queries, their relevant and their irrelevant passages (unit query, k 2): the fake judge backs
    an answer exactly where the context holds a relevant passage; the report gives the PR and IR means
    per metric (Tables 1-2) and their bootstrap difference; the CLI prints them from the saved scores."""
    qrels = read_qrels(QRELS)
    qrels = qrels[qrels.query_id.isin(qrels.query_id.unique()[:2])]
    queries, corpus = load_qrels_texts(SAMPLE_DIR, SAMPLE_DIR, qrels)
    built = qrels_asks(qrels, queries, corpus, unit="query", k=2)
    relevant = [corpus[d][:40] for d in qrels.loc[qrels.grade == 1, "doc_id"]]
    in_process(monkeypatch, FakeLLMClient(fake_reply(lambda prompt: any(r in prompt for r in relevant))))
    samples, failed = answer_asks(built.asks, vera_reader("m", 32, 8192), ClientConfig(), "http://unused/v1")
    judge = JudgeConfig(model="m", cache=False, context_window=8192, vera=TWO_METRICS)
    scores = judged_set_scores(built.asks, samples, failed, judge, ClientConfig(), "http://unused/v1")
    report = qrels_report(scores, b=200, unit="query")
    json.dumps(report, allow_nan=False)
    faith = report["metrics"]["vera_faithfulness"]
    assert faith[PERFECTLY_RELEVANT] == {"mean": 1.0, "n": 2} and faith[IRRELEVANT] == {"mean": 0.0, "n": 2}
    assert faith["difference"]["higher"] == PERFECTLY_RELEVANT and faith["difference"]["diff_mean"] == 1.0
    assert report["n_asks"] == {PERFECTLY_RELEVANT: 2, IRRELEVANT: 2}
    scores_file = tmp_path / "q.scores.parquet"
    scores.to_parquet(scores_file)
    assert main(["vera", "qrels", "--qrels", str(QRELS)]) == 2  # needs an endpoint, or scores
    assert "--llm-base-url" in capsys.readouterr().err
    assert main(["vera", "qrels", "--qrels", str(QRELS), "--scores", str(scores_file), "--b", "100",
                 "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "qrels.json").exists()
    printed = capsys.readouterr().out
    assert "2 perfectly relevant (PR), 2 irrelevant (IR)" in printed
    assert re.search(r"vera_faithfulness\s+1\.000 \(2\)\s+0\.000 \(2\)\s+\+1\.000", printed)


def test_vera_qrels_with_a_cross_encoder_prints_the_agg_column(monkeypatch, tmp_path, capsys):
    """`ccrs vera qrels --cross-encoder PATH` in this process (fake reader and judge, no server): the
    run's VERA suite adds the aggregate from a tiny cross-encoder BUILT IN THE TEST (no pretrained MS MARCO
    cross-encoder installs here), vera_aggregate is the logit and vera_aggregate_sigmoid its expit, and
    the console shows the paper's table with its Agg column (the logit means)."""
    from pipelines.tools import endpoint
    from tests.tiny_cross_encoder import build_tiny_cross_encoder

    model = build_tiny_cross_encoder(tmp_path / "tiny-cross-encoder")
    monkeypatch.setenv("CCRS_HOME", str(tmp_path / "home"))
    qrels = read_qrels(QRELS)
    qrels_file = tmp_path / "qrels.txt"
    first = qrels[qrels.query_id.isin(qrels.query_id.unique()[:2])]
    qrels_file.write_text("".join(f"{r.query_id} 0 {r.doc_id} {r.grade}\n" for r in first.itertuples()))
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "readers": [{"name": "r", "kind": "llm", "model": "m", "max_tokens": 32, "context_window": 8192}],
        "judge": {"model": "m", "cache": False, "context_window": 8192,
                  "vera": {"prompt_version": "paper", "metrics": ["faithfulness", "retrieval_recall"],
                           "max_reasks": 0}}}))
    in_process(monkeypatch, FakeLLMClient(fake_reply(lambda prompt: True)))
    monkeypatch.setattr(endpoint, "fitted_judge", lambda config, suites, url, err=True: config.judge)
    out = tmp_path / "out"
    assert main(["vera", "qrels", "--qrels", str(qrels_file), "--unit", "query", "--top-k", "2", "--config",
                 str(config), "--llm-base-url", "http://unused/v1", "--cross-encoder", model, "--b", "50",
                 "--out", str(out)]) == 0
    scores = pd.read_parquet(out / "qrels_scores.parquet")
    logits = scores[scores.metric == "vera_aggregate"].set_index("query_id").score
    sigmoids = scores[scores.metric == "vera_aggregate_sigmoid"].set_index("query_id").score
    assert len(logits) == 4 and np.allclose(sigmoids[logits.index], 1 / (1 + np.exp(-logits)))
    report = json.loads((out / "qrels.json").read_text())
    agg = report["metrics"]["vera_aggregate"]
    assert agg[PERFECTLY_RELEVANT]["n"] == agg[IRRELEVANT]["n"] == 2
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if "Dataset" in line)
    assert header.split() == ["Dataset", "Faithfulness", "Relevance", "Recall", "Precision", "Agg"]
    pr_row = next(line for line in printed.splitlines() if line.split()[:1] == ["PR"]).split()
    assert pr_row[1] == "1.00" and pr_row[3] == "1.00" and pr_row[2] == pr_row[4] == "-"
    assert float(pr_row[5]) == pytest.approx(agg[PERFECTLY_RELEVANT]["mean"], abs=0.006)
