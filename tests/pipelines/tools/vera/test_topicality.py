"""`ccrs vera topicality` (pipelines/tools/vera/topicality.py, query_sets.py): the query sets, answered,
judged and compared, by the paper's method and by the cosine one."""
import importlib.util
import json
import re

import pandas as pd
import pytest
import yaml

from judges.config import ClientConfig, JudgeConfig
from pipelines.cli import main
from pipelines.tools.vera.query_sets import (
    answer_asks,
    compare_sets_from_scores,
    judged_set_scores,
    vera_reader,
)
from pipelines.tools.vera.topicality import (
    DEFAULT_SETS,
    hit_score_frame,
    load_query_sets,
    topicality_asks,
    topicality_report,
)
from retrievers.config import DatasetConfig
from retrievers.types import Hit
from tests.conftest import REPO, bioasq_questions, write_bioasq_subset
from tests.fakes import FakeLLMClient
from tests.pipelines.tools.vera.fakes import (
    QRELS,
    SAMPLE_DIR,
    TWO_METRICS,
    fake_reply,
    in_process,
    judged,
    query_set,
)


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
    assert main(["vera", "topicality", str(tmp_path / "run"), "--config", str(config),
                 "--llm-base-url", llm_endpoint.base_url, "--limit", "2", "--top-k", "3", "--b", "200",
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
