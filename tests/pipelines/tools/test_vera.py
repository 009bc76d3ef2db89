import importlib.util
import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from judges.config import ClientConfig, JudgeConfig, VeraOptions
from judges.vera import UNTRAINED_DEMO_HEAD
from pipelines.cli import main
from pipelines.tools import vera as vera_tool
from pipelines.tools.vera import (
    AGGREGATE,
    AGGREGATE_OFF,
    DEFAULT_SETS,
    DEMO_AGGREGATE,
    IRRELEVANT,
    PERFECTLY_RELEVANT,
    aggregate_metric,
    answer_asks,
    bootstrap_report,
    compare_sets_from_scores,
    hit_score_frame,
    judged_set_scores,
    load_query_sets,
    load_samples,
    qrels_asks,
    qrels_report,
    run_vera,
    topicality_asks,
    topicality_report,
    vera_reader,
)
from retrievers.config import DatasetConfig
from retrievers.trec import QrelsError, load_qrels_texts, read_qrels
from retrievers.types import Hit
from tasks.runtime.layout import RunLayout
from tests.conftest import REPO, bioasq_questions, write_bioasq_subset
from tests.fakes import FakeLLMClient


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


SAMPLE_DIR = REPO / "data" / "bioasq-sample"
QRELS = REPO / "data" / "vera-bioasq" / "qrels.txt"
TWO_METRICS = VeraOptions(metrics=["faithfulness", "retrieval_recall"], max_reasks=0)


def in_process(monkeypatch, llm) -> None:
    """The generate stage and the judge session ask `llm` in this process instead of from Ray tasks."""
    from tasks import generate as generate_stage
    from tasks.runtime import judge_session
    from tasks.runtime.fanout import FanOutReport

    def here(fn, items, *args, **kwargs):
        return [fn(llm, item) for item in items], FanOutReport(items=len(items))

    monkeypatch.setattr(generate_stage, "fan_out_report", here)
    monkeypatch.setattr(judge_session, "fan_out_report", here)


def fake_reply(supported):
    """Reader: one sentence (a failure where the query says so); judge: one statement, and a Yes /
    [Supported by Context] verdict exactly where `supported(prompt)`."""
    from judges.client import LLMRequestError

    def reply(request):
        prompt = request.messages[-1]["content"]
        if prompt.startswith("Passages:"):
            if "fails?" in prompt:
                return LLMRequestError("HTTP 500 from the reader")
            return "A summary of the passages."
        if "<ground_truth>" in prompt:
            label = "[Supported by Context]" if supported(prompt) else "[Not Supported by Context]"
            return f"1. Checked. {label}"
        if "Verdict" in prompt:
            return f"1. Explanation: checked. Verdict: {'Yes' if supported(prompt) else 'No'}"
        return "1. The passages say something."

    return reply


def query_set(name, texts, truth=""):
    return vera_tool.QuerySet(name, f"{name} queries", "test", tuple(texts), (truth,) * len(texts))


def test_the_default_query_sets_are_the_papers_three():
    """Section 5.2, Table 3: an on-topic set (the repository's own questions), a minority-topic set
    (colorectal cancer questions of other BioASQ batches) and an unrelated set, in that order."""
    sets = load_query_sets(DEFAULT_SETS, DatasetConfig(path=str(SAMPLE_DIR), limit=8))
    assert [s.name for s in sets] == ["on-topic", "minority-colorectal", "unrelated"]
    on_topic, minority, unrelated = sets
    sample = bioasq_questions()
    assert list(on_topic.texts) == [q["body"] for q in sample[:8]] and all(on_topic.ground_truths)
    assert len(minority.texts) == 29 and all(minority.ground_truths)
    assert not set(minority.texts) & {q["body"] for q in sample}
    assert all(re.search(r"colorectal|\bcolon\b|\brectal\b", t, re.IGNORECASE) for t in minority.texts)
    # the unrelated set has reference answers (data/vera-bioasq/unrelated-answers.json): recall computes
    assert len(unrelated.texts) == 20 and all(unrelated.ground_truths)
    assert dict(zip(unrelated.texts, unrelated.ground_truths))["What is the capital city of Australia?"] == (
        "Canberra is the capital city of Australia.")
    capped = load_query_sets(DEFAULT_SETS, DatasetConfig(path=str(SAMPLE_DIR)), limit=2)
    assert [len(s.texts) for s in capped] == [2, 2, 2] and all(capped[2].ground_truths)


def _answers_case(tmp_path, answers):
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({"queries": ["One?", "Two?"]}))
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({"answers": answers}))
    path = tmp_path / "sets.yaml"
    path.write_text(yaml.safe_dump({"sets": [{"name": "a", "run_dataset": True},
                                             {"name": "b", "queries": "q.yaml", "answers": "a.yaml"}]}))
    return path


def test_reference_answers_of_a_query_list_are_its_ground_truth_and_must_match_it(tmp_path):
    dataset = DatasetConfig(path=str(SAMPLE_DIR), limit=8)
    sets = load_query_sets(_answers_case(tmp_path, {"Two?": "2", "One?": " 1 "}), dataset)
    assert (sets[1].texts, sets[1].ground_truths) == (("One?", "Two?"), ("1", "2"))
    with pytest.raises(ValueError, match=r"no answer: \['Two\?'\]; not a query of the set: \['Three\?'\]"):
        load_query_sets(_answers_case(tmp_path, {"One?": "1", "Three?": "3"}), dataset)
    with pytest.raises(ValueError, match="non-empty answer"):
        load_query_sets(_answers_case(tmp_path, {"One?": "1", "Two?": ""}), dataset)


@pytest.mark.parametrize(("sets", "message"), [
    ([{"name": "a", "run_dataset": True, "queries": "q.yaml"}, {"name": "b", "run_dataset": True}],
     "exactly one of"),
    ([{"name": "a", "run_dataset": True}], "at least 2"),
    ([{"name": "a", "run_dataset": True}, {"name": "a", "queries": "q.yaml"}], "unique"),
    ([{"name": "a", "run_dataset": True}, {"name": "b", "file": "q.yaml"}], "Extra inputs"),
    ([{"name": "a", "run_dataset": True, "answers": "a.yaml"}, {"name": "b", "queries": "q.yaml"}],
     "answers go with queries"),
])
def test_a_bad_query_sets_file_is_refused_with_its_reason(tmp_path, sets, message):
    path = tmp_path / "sets.yaml"
    path.write_text(yaml.safe_dump({"sets": sets}))
    with pytest.raises(ValueError, match=message):
        load_query_sets(path, DatasetConfig(path=str(SAMPLE_DIR)))


def test_the_minority_set_and_the_qrels_are_rebuilt_from_the_scripts_sources():
    """data/vera-bioasq/qrels.txt is what build.py makes from data/bioasq-sample (seeded draw)."""
    script = REPO / "data" / "vera-bioasq" / "build.py"
    spec = importlib.util.spec_from_file_location("build_vera_bioasq", script)
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert "\n".join(build.qrels_lines(SAMPLE_DIR)) + "\n" == QRELS.read_text()
    assert build.minority_share(SAMPLE_DIR) == (59, 685)  # the topic's share of the repository (README)


def test_topicality_end_to_end_without_a_server(monkeypatch):
    """Three sets through two retrievers' hits: every answer from VERA's summarisation prompt (top 3
    passages in rank order, temperature 0, top_p 0.01), judged with two VERA metrics, compared per
    retriever and metric; the minority set's contexts support half its answers, so on-topic (all) >
    minority (half) > unrelated (none). A failed generation is a counted failed row, not a dropped one."""
    sets = [query_set("on-topic", ["q0?", "q1?"], "Truth one."),
            query_set("minority", ["m0?", "m1?"], "Truth two."),
            query_set("unrelated", ["u0?", "u1?", "fails?"])]
    texts = [t for s in sets for t in s.texts]
    good = {"q0?", "q1?", "m0?"}

    def hits_for(retriever):
        return [[Hit(f"{retriever}-{q}-{r}", "d", 1.0 / r,
                     f"{'GOOD' if q in good else 'bad'} passage {r} for {q}") for r in (1, 2, 3)]
                for q in texts]

    llm = FakeLLMClient(fake_reply(lambda prompt: "GOOD passage" in prompt))
    in_process(monkeypatch, llm)
    asks = topicality_asks(sets, {"bm25": hits_for("bm25"), "knn": hits_for("knn")})
    assert len(asks) == 2 * 7 and asks[0].query_id == "on-topic/0" and asks[0].passage_ids[0] == "bm25-q0?-1"
    samples, failed = answer_asks(asks, vera_reader("m", 32), ClientConfig(), "http://unused/v1")
    assert len(samples) == 12 and [f["query_id"] for f in failed] == ["unrelated/2", "unrelated/2"]
    readers = [r for r in llm.requests if r.messages[-1]["content"].startswith("Passages:")]
    assert len(readers) == 14
    assert all(r.temperature == 0.0 and r.extra_body == {"top_p": 0.01} for r in readers)
    prompt = readers[0].messages[-1]["content"]
    assert prompt.index("passage 1 for q0?") < prompt.index("passage 2") < prompt.index("passage 3")
    judge = JudgeConfig(model="m", cache=False, vera=TWO_METRICS)
    scores = judged_set_scores(asks, samples, failed, judge, ClientConfig(), "http://unused/v1")
    assert len(scores) == 14 * 2 and set(scores.system) == {"bm25", "knn"}
    assert scores.groupby("query_set")["set_order"].first().to_dict() == {"on-topic": 0, "minority": 1,
                                                                          "unrelated": 2}
    assert (scores.loc[scores.query_id == "unrelated/2", "status"] == "failed").all()
    report = topicality_report(scores, b=300, seed=1, sets=sets)
    json.dumps(report, allow_nan=False)
    assert [(s["name"], s["n_queries"]) for s in report["sets"]] == [("on-topic", 2), ("minority", 2),
                                                                     ("unrelated", 3)]
    bm25 = report["systems"]["bm25"]
    faith = bm25["metrics"]["vera_faithfulness"]
    assert {k: v["observed_mean"] for k, v in faith["sets"].items()} == {"on-topic": 1.0, "minority": 0.5,
                                                                         "unrelated": 0.0}
    assert faith["n_scored"] == {"on-topic": 2, "minority": 2, "unrelated": 2}  # the failed one: no score
    assert faith["expected_order_holds"] and faith["ranking"] == ["on-topic", "minority", "unrelated"]
    pairs = {(p["higher"], p["lower"]): p for p in faith["pairs"]}
    assert set(pairs) == {("on-topic", "minority"), ("on-topic", "unrelated"), ("minority", "unrelated")}
    assert pairs[("on-topic", "unrelated")]["separated"]
    assert pairs[("on-topic", "unrelated")]["diff_low"] == 1.0
    assert not pairs[("on-topic", "minority")]["separated"]  # {1, 1} vs {1, 0}: a resample can tie
    recall = bm25["metrics"]["vera_retrieval_recall"]  # needs a ground truth: the unrelated set has none
    assert recall["computable"] and recall["sets_without_scores"] == ["unrelated"]
    assert [(p["higher"], p["lower"]) for p in recall["pairs"]] == [("on-topic", "minority")]
    assert bm25["order_holds"] == ["vera_faithfulness", "vera_retrieval_recall"]
    knn = report["systems"]["knn"]["metrics"]["vera_faithfulness"]["sets"]  # its own stream, same data
    assert [v["observed_mean"] for v in knn.values()] == [v["observed_mean"] for v in faith["sets"].values()]


def test_the_cosine_method_compares_the_mean_hit_scores():
    sets = [query_set("on-topic", ["a", "b"]), query_set("unrelated", ["c", "d"])]
    scores = [[0.9, 0.7], [0.8, 0.8], [0.2, 0.1], [0.3, 0.1]]
    hits = {"knn": [[Hit("c", "d", s, "t") for s in row] for row in scores]}
    frame = hit_score_frame(sets, hits)
    assert frame.score.tolist() == pytest.approx([0.8, 0.8, 0.15, 0.2])
    entry = topicality_report(frame, b=200, sets=sets)["systems"]["knn"]["metrics"]["mean_hit_cosine"]
    assert entry["expected_order_separated"]
    assert entry["pairs"][0]["diff_mean"] == pytest.approx(0.625, abs=0.05)


def test_topicality_cli_reads_judged_scores(tmp_path, capsys):
    assert main(["vera", "topicality"]) == 2  # method llm by default: needs an endpoint or scores
    assert "--llm-base-url" in capsys.readouterr().err
    values = {"on-topic": [0.9, 0.7, 0.8], "minority": [0.5, 0.6], "unrelated": [0.1, 0.3]}
    frame = pd.DataFrame([(f"{s}/{i}", s, order, "bm25", "vera_answer_relevance", v)
                          for order, (s, vs) in enumerate(values.items()) for i, v in enumerate(vs)],
                         columns=["query_id", "query_set", "set_order", "system", "metric", "score"])
    scores, out = tmp_path / "t.scores.parquet", tmp_path / "out"
    frame.to_parquet(scores)
    assert main(["vera", "topicality", "--scores", str(scores), "--b", "200", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report_file = out / "topicality.json"
    assert "retriever bm25" in printed and "holds, separated" in printed and f"wrote {report_file}" in printed
    report = json.loads(report_file.read_text())
    # the former file form of --out: written for one release, with a one-line note
    assert main(["vera", "topicality", "--scores", str(scores), "--b", "200", "--out",
                 str(tmp_path / "t.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text()) == report
    assert "--out" in capsys.readouterr().err
    assert report["systems"]["bm25"]["order_separated"] == ["vera_answer_relevance"]
    # a scores file of the two-set version (positive/negative, no retriever) still reads, in file order
    old = judged([(f"{s}-{i}", s, "vera_faithfulness", v) for s, vs in (("positive", [1.0, 1.0]),
                                                                         ("negative", [0.0, 0.0]))
                  for i, v in enumerate(vs)])
    entry = compare_sets_from_scores(old, b=100)["topicality"]["metrics"]["vera_faithfulness"]
    assert entry["expected_order"] == ["positive", "negative"] and entry["expected_order_separated"]


def judged(rows):
    return pd.DataFrame(rows, columns=["query_id", "query_set", "metric", "score"])


# --- the section 5.1 experiment on qrels ------------------------------------------------------------------

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
    assert main(["vera", "qrels", "--qrels", str(qrels_file), "--unit", "query", "--k", "2", "--config",
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


@pytest.mark.llm
def test_llm_topicality_three_sets_through_the_runs_retriever(llm_endpoint, judge_cache_dir, tmp_path,
                                                             monkeypatch, capsys):
    """The paper's method end to end on the real stack, through the CLI: three query sets of 2 queries
    (the default sets file) retrieved by the run config's BM25 over a 4-question BioASQ repository,
    answered with VERA's summarisation prompt by the served model, judged with two VERA metrics,
    compared pairwise per metric."""
    monkeypatch.setenv("CCRS_HOME", str(tmp_path / "home"))
    repository = write_bioasq_subset(tmp_path / "repository", 4)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "name": "vera-topicality", "dataset": {"path": str(repository)},
        "chunking": {"chunk_tokens": 128, "overlap_tokens": 25}, "retrieval": {"retrievers": ["bm25"]},
        "readers": [{"name": "r", "kind": "llm", "model": llm_endpoint.judge_model, "max_tokens": 32}],
        "judge": {"model": llm_endpoint.judge_model,
                  "vera": {"metrics": ["faithfulness", "retrieval_recall"], "max_tokens": 96,
                           "max_statements": 2}},
        "client": {"max_concurrency": 4, "timeout_s": 120}}))
    out = tmp_path / "vera"
    assert main(["vera", "topicality", "--config", str(config), "--run-dir", str(tmp_path / "run"),
                 "--llm-base-url", llm_endpoint.base_url, "--limit", "2", "--k", "3", "--b", "200",
                 "--out", str(out)]) == 0
    report = json.loads((out / "topicality.json").read_text())
    assert [(s["name"], s["n_queries"]) for s in report["sets"]] == [
        ("on-topic", 2), ("minority-colorectal", 2), ("unrelated", 2)]
    assert report["reader_prompt"] == "vera-summary-v1" and list(report["systems"]) == ["bm25"]
    scores = pd.read_parquet(out / "topicality_scores.parquet")
    assert len(scores) == 6 * 2 and set(scores.query_set) == {"on-topic", "minority-colorectal", "unrelated"}
    unrelated_recall = scores[(scores.query_set == "unrelated") & (scores.metric == "vera_retrieval_recall")]
    assert unrelated_recall.score.isna().all()  # no ground truth
    metrics = report["systems"]["bm25"]["metrics"]
    assert set(metrics) == {"vera_faithfulness", "vera_retrieval_recall"}
    assert all(entry["computable"] or entry["reason"] for entry in metrics.values())
    assert "retriever bm25" in capsys.readouterr().out
