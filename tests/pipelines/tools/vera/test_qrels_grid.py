"""`ccrs vera qrels --retrievers` (pipelines/tools/vera/qrels.py retrieved_asks, answer_grid): the section
5.1 experiment as the paper runs it, the top k retrieved per query from each condition's qrels pool, one row
per reader x retriever."""
import json
import re

import pandas as pd
import pytest
import yaml

from pipelines.cli import main
from pipelines.tools.vera.qrels import IRRELEVANT, PERFECTLY_RELEVANT, retrieved_asks
from retrievers.trec import QrelsError, load_qrels_texts, read_qrels
from tests.fakes import FakeLLMClient
from tests.pipelines.tools.vera.fakes import QRELS, fake_reply, in_process

# q1: a, b relevant (grade 2), c irrelevant; q2: c relevant (grade 2 for q2), d irrelevant, e grade 1.
QRELS_ROWS = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q2"],
                           "doc_id": ["a", "b", "c", "c", "d", "e"], "grade": [2, 2, 0, 2, 0, 1]})
QUERIES = {"q1": ("first?", "truth 1"), "q2": ("second?", "truth 2")}
CORPUS = {d: f"passage {d}" for d in "abcde"}
WINDOW = {"context_window": 8192}


def _ranker(seen):
    """Ranks a pool in reverse id order for 'rev' and in id order for 'fwd'; q2 gets nothing from 'fwd' in
    the irrelevant pool (BM25 with no shared term)."""
    def rank(pool, texts, names, k):
        seen.append((sorted(pool), list(texts)))
        out = {}
        for name in names:
            order = sorted(pool, reverse=name == "rev")
            out[name] = [[] if (name == "fwd" and text == "second?" and "d" in pool) else order[:k]
                         for text in texts]
        return out
    return rank


def test_each_condition_pool_is_ranked_per_query_and_the_fed_passages_counted_by_their_grade():
    seen = []
    built = retrieved_asks(QRELS_ROWS, QUERIES, CORPUS, ["rev", "fwd"], _ranker(seen), k=2)
    assert built.relevant_grade == 2
    # the PR pool: every passage judged at grade 2 (any query); the IR pool: grade 0; grade 1 in neither
    assert seen == [(["a", "b", "c"], ["first?", "second?"]), (["c", "d"], ["first?", "second?"])]
    by_key = {(a.system, a.query_id): a for a in built.asks}
    assert by_key[("rev", "perfectly_relevant/q1")].passage_ids == ("c", "b")
    assert by_key[("rev", "perfectly_relevant/q2")].passages == ("passage c", "passage b")
    assert by_key[("fwd", "irrelevant/q1")].passage_ids == ("c", "d")
    assert ("fwd", "irrelevant/q2") not in by_key  # nothing retrieved: no ask, counted
    assert built.dropped == {"fwd, irrelevant: no passage retrieved": 1}
    # rev, PR: q1 got c (grade 0 for q1) and b (2); q2 got c (2) and b (not judged for q2)
    assert built.retrieved["rev"][PERFECTLY_RELEVANT] == {"queries": 2, "at_grade_0": 1,
                                                          "at_relevant_grade": 2, "unjudged": 1}
    # fwd, IR: q1 got c (grade 0 for q1) and d (judged for q2 only); q2 got nothing
    assert built.retrieved["fwd"][IRRELEVANT] == {"queries": 2, "at_grade_0": 1, "unjudged": 1,
                                                  "queries_without_passage": 1}
    assert {a.query_set for a in built.asks} == {PERFECTLY_RELEVANT, IRRELEVANT}
    assert [a.query_set for a in built.asks].index(IRRELEVANT) > 0  # PR first: differences read PR - IR


def test_the_query_draw_is_seeded_and_the_same_for_every_retriever():
    built = retrieved_asks(QRELS_ROWS, QUERIES, CORPUS, ["rev", "fwd"], _ranker([]), k=1, limit=1, seed=3)
    for condition in (PERFECTLY_RELEVANT, IRRELEVANT):
        drawn = {a.query_id for a in built.asks if a.query_set == condition and a.system == "rev"}
        assert len(drawn) == 1
    assert built == retrieved_asks(QRELS_ROWS, QUERIES, CORPUS, ["rev", "fwd"], _ranker([]), k=1, limit=1,
                                   seed=3)
    with pytest.raises(QrelsError, match="no usable judgment at grade 3"):
        retrieved_asks(QRELS_ROWS, QUERIES, CORPUS, ["rev"], _ranker([]), relevant_grade=3)


def _two_query_qrels(tmp_path):
    qrels = read_qrels(QRELS)
    first = qrels[qrels.query_id.isin(qrels.query_id.unique()[:2])]
    path = tmp_path / "qrels.txt"
    path.write_text("".join(f"{r.query_id} 0 {r.doc_id} {r.grade}\n" for r in first.itertuples()))
    return path, first


def test_vera_qrels_prints_and_writes_a_reader_by_retriever_grid(monkeypatch, tmp_path, capsys):
    """Two LLM readers of the config x BM25 over the shipped BioASQ qrels (2 queries, top 2), a fake reader
    and judge in this process (the judge backs an answer exactly where its context holds a passage judged
    relevant): one grid row per reader, PR beside IR, written as qrels.json and qrels.md, and the same
    grid again from the saved scores."""
    from pipelines.tools import endpoint
    from tests.pipelines.tools.vera.fakes import SAMPLE_DIR

    qrels_file, judged = _two_query_qrels(tmp_path)
    _, corpus = load_qrels_texts(SAMPLE_DIR, SAMPLE_DIR, judged)
    relevant = [corpus[d][:40] for d in judged.loc[judged.grade == 1, "doc_id"]]
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "readers": [{"name": "small", "kind": "llm", "model": "m1", "max_tokens": 32, **WINDOW},
                    {"name": "extractive", "kind": "extractive"},
                    {"name": "large", "kind": "llm", "model": "m2", "max_tokens": 32, **WINDOW}],
        "retrieval": {"retrievers": ["bm25"]},
        "judge": {"model": "m", "cache": False, "context_window": 8192,
                  "vera": {"metrics": ["faithfulness", "retrieval_recall"], "max_reasks": 0}}}))
    monkeypatch.setenv("CCRS_HOME", str(tmp_path / "home"))
    fake = FakeLLMClient(fake_reply(lambda prompt: any(r in prompt for r in relevant)))
    in_process(monkeypatch, fake)
    monkeypatch.setattr(endpoint, "fitted_judge", lambda config, suites, url, err=True: config.judge)
    out = tmp_path / "out"
    base = ["vera", "qrels", "--qrels", str(qrels_file), "--config", str(config), "--llm-base-url",
            "http://unused/v1", "--b", "50", "--out", str(out)]
    assert main([*base, "--retrievers", "bm25", "--unit", "pair"]) == 2
    assert "--unit pair with --retrievers" in capsys.readouterr().err
    assert main([*base, "--retrievers", "bm25", "--top-k", "2"]) == 0
    report = json.loads((out / "qrels.json").read_text())
    assert [(c["reader"], c["retriever"]) for c in report["grid"]] == [("small", "bm25"), ("large", "bm25")]
    assert report["readers"] == {"small": "m1", "large": "m2"} and report["k"] == 2
    assert "BM25" in report["retrievers"]["bm25"]
    fed = report["retrieved"]["bm25"]
    assert fed[PERFECTLY_RELEVANT]["queries"] == fed[IRRELEVANT]["queries"] == 2
    assert fed[PERFECTLY_RELEVANT] == {"queries": 2, "at_relevant_grade": 4}
    # one query shares no term with the irrelevant pool (BM25 retrieves nothing: no IR context); the other
    # got its own grade-0 passage and one judged for the other query only
    assert fed[IRRELEVANT] == {"queries": 2, "at_grade_0": 1, "unjudged": 1, "queries_without_passage": 1}
    assert report["dropped_judgments"] == {"bm25, irrelevant: no passage retrieved": 1}
    for cell in report["grid"]:
        assert cell["n_asks"] == {PERFECTLY_RELEVANT: 2, IRRELEVANT: 1}
        faith = cell["metrics"]["vera_faithfulness"]
        assert faith[IRRELEVANT]["mean"] == 0.0 and faith[PERFECTLY_RELEVANT]["mean"] > 0
    models = {request.model for request in fake.requests}
    assert {"m1", "m2"} <= models  # both readers answered
    scores = pd.read_parquet(out / "qrels_scores.parquet")
    assert set(scores.system) == {"small + bm25", "large + bm25"}
    assert set(scores.reader) == {"small", "large"} and set(scores.retriever) == {"bm25"}
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if "Dataset" in line).split()
    assert header[:8] == ["Reader", "Retriever", "Dataset", "Faithfulness", "Relevance", "Recall",
                          "Precision", "Agg"]
    assert re.search(r"small\s+bm25\s+IR\s+0\.00\s+-\s+0\.00\s+-\s+-\s+1\s+0/2", printed)
    markdown = (out / "qrels.md").read_text()
    assert markdown.count("| large | bm25 |") == 2 and "| Reader | Retriever | Dataset |" in markdown
    again = tmp_path / "again"
    assert main(["vera", "qrels", "--qrels", str(qrels_file), "--scores", str(out / "qrels_scores.parquet"),
                 "--b", "50", "--out", str(again)]) == 0
    rebuilt = json.loads((again / "qrels.json").read_text())
    assert [c["metrics"] for c in rebuilt["grid"]] == [c["metrics"] for c in report["grid"]]
    assert (again / "qrels.md").exists()
