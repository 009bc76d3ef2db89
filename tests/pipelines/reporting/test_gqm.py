import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines.tools.gqm_report import DEFAULT_GOALS, GOAL_TREES, goals_path, write_report
from pipelines.reporting.gqm import GQMConfigError, build_report, load_goals, load_metric_table, tree_lines

from tasks.runtime.layout import RunLayout

QTYPES = ["yesno", "factoid", "list", "summary"]


def make_run(root: Path, with_retrieval: bool = True) -> Path:
    """Two systems (bm25+r, knn+r), 8 queries (2 per BioASQ type), CCRS scores + retrieval metrics."""
    rng = np.random.default_rng(0)
    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(8)], "text": "t", "answer": "a",
                            "exact_answer": "[]", "qtype": [QTYPES[i % 4] for i in range(8)],
                            "relevant_doc_ids": [["d"]] * 8})
    (root / "retrieve").mkdir(parents=True)
    queries.to_parquet(root / "retrieve" / "queries.parquet")
    systems = {"bm25+r": "bm25", "knn+r": "knn"}
    rows = [(q, s, m, float(rng.uniform()))
            for q in queries.query_id for s in systems for m in ["CC", "QR", "ID", "AC", "IR"]]
    layout = RunLayout(root)
    layout.judge_dir("ccrs").mkdir()
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores("ccrs"))
    (root / "generate").mkdir()
    pd.DataFrame([{"query_id": q, "system": s, "retriever": r, "reader": "r", "answer": "x"}
                  for q in queries.query_id for s, r in systems.items()]).to_parquet(
        root / "generate" / "generations.parquet")
    if with_retrieval:
        (root / "retrieval_metrics").mkdir()
        pd.DataFrame([(q, r, m, float(rng.uniform())) for q in queries.query_id for r in systems.values()
                      for m in ["R@10", "P@10", "RR@10", "nDCG@10"]],
                     columns=["query_id", "retriever", "measure", "value"]).to_parquet(
            root / "retrieval_metrics" / "retrieval_metrics.parquet")
    return root


def test_hybrid_goals_load():
    config = load_goals(DEFAULT_GOALS)
    assert DEFAULT_GOALS == GOAL_TREES["hybrid"] and config.name == "ccrs-hybrid-five-goals"
    assert [g.id for g in config.goals] == ["G1", "G2", "G3", "G4", "G5"]
    unmatched = {nc.metric for g in config.goals for q in g.questions for nc in q.no_counterpart}
    assert not unmatched  # every thesis metric has a gqm_ column now (issue 48)
    (q41,) = [q for g in config.goals for q in g.questions if q.id == "Q4.1"]
    assert {"gqm_self_consistency", "CC"} <= {m.name for m in q41.metrics}  # CC stays, as a proxy


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["goals"][0]["questions"][0]["metrics"][0].update(weight=0.3), "outside the thesis range"),
    (lambda d: d["goals"][0]["questions"][0]["metrics"][0].update(role="tertiary"), "role"),
    (lambda d: d["goals"][0].update(questions=[]), "empty goal"),
    (lambda d: d["goals"][0].update(colour="red"), "Extra inputs"),
    (lambda d: d["metric_categories"]["system"].append("BLEU"), "metric_categories name metrics"),
    (lambda d: d["goals"][0]["questions"][0]["metrics"][1].update(note=""), "proxy_for needs a note"),
    (lambda d: d["goals"][0]["questions"][0]["metrics"][3].update(computed=False), "needs the reason"),
    (lambda d: d["goals"][0]["questions"][1]["metrics"][2].update(computed=False, reason="r"),
     "both computed and computed: false"),  # CC, computed in Q1.1
])
def test_invalid_configs_are_rejected_clearly(tmp_path, mutate, message):
    data = yaml.safe_load(DEFAULT_GOALS.read_text())
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(GQMConfigError, match=message):
        load_goals(path)


def test_report_traceability_per_qtype_and_missing_metrics(tmp_path):
    run = make_run(tmp_path / "run")
    table, sources = load_metric_table(run)
    assert set(table.system) == {"bm25+r", "knn+r"} and "R@10" in set(table.metric)
    report = build_report(load_goals(DEFAULT_GOALS), table, sources)
    json.dumps(report, allow_nan=False)  # never NaN
    assert report["metric_columns"]["R@k"] == "R@10"
    assert "vera_faithfulness" in report["missing_metrics"]
    entry = report["systems"]["bm25+r"]["all"]
    assert set(report["systems"]["bm25+r"]["by_qtype"]) == set(QTYPES)
    assert entry["n_queries"] == 8
    total = sum(m["to_overall"] for g in entry["goals"] for q in g["questions"] for m in q["metrics"]
                if m["available"])
    assert total == pytest.approx(entry["overall"]["score"])
    # Q1.1: only CC and AC present -> renormalized (coverage 1.2 / 5.0, the sum of the tree's Q1.1 weights)
    q11 = entry["goals"][0]["questions"][0]
    assert q11["coverage"] == pytest.approx(1.2 / 5.0)
    vf = next(m for m in q11["metrics"] if m["name"] == "vera_faithfulness")
    assert vf["value"] is None and vf["reason"] == "metric not computed in this run"
    cc = table[(table.system == "bm25+r") & (table.metric == "CC")].score.mean()
    ac = table[(table.system == "bm25+r") & (table.metric == "AC")].score.mean()
    assert q11["score"] == pytest.approx((0.6 * cc + 0.6 * ac) / 1.2)
    assert set(entry["components"]) == {"retriever", "generator", "system"}


def test_without_renormalization_goals_are_not_computable_with_reason(tmp_path):
    run = make_run(tmp_path / "run")
    data = yaml.safe_load(DEFAULT_GOALS.read_text())
    data["renormalize"] = False
    path = tmp_path / "strict.yaml"
    path.write_text(yaml.safe_dump(data))
    table, sources = load_metric_table(run)
    entry = build_report(load_goals(path), table, sources)["systems"]["knn+r"]["all"]
    g1 = entry["goals"][0]
    assert g1["score"] is None and g1["computable"] is False and "vera_faithfulness" in g1["reason"]
    assert entry["overall"]["score"] is None and entry["overall"]["reason"]


def test_write_report_files(tmp_path):
    run = make_run(tmp_path / "run", with_retrieval=False)
    report, files = write_report(run, out_dir=tmp_path / "out")
    assert [f.name for f in files] == ["gqm_report.json", "radar.png", "heatmap_goals.png",
                                       "heatmap_metrics.png", "components.png"]
    for f in files[1:]:
        assert f.read_bytes()[:4] == b"\x89PNG"
    # retriever question, nothing measured
    q21 = report["systems"]["knn+r"]["all"]["goals"][1]["questions"][0]
    assert q21["score"] is None and "none of its metrics" in q21["reason"]
    # the thesis' metric categories: plain means of the metrics present; retrieval has none here
    categories = report["systems"]["knn+r"]["all"]["metric_categories"]
    assert categories["retrieval"] == {**categories["retrieval"], "score": None, "metrics_present": 0}
    generation = categories["generation"]
    present = [m for g in report["systems"]["knn+r"]["all"]["goals"] for q in g["questions"]
               for m in q["metrics"] if m["available"] and m["name"] in generation["metrics"]]
    values = {m["name"]: m["value"] for m in present}
    assert generation["metrics_present"] == len(values) > 0
    assert generation["score"] == pytest.approx(sum(values.values()) / len(values))


def test_grouse_scores_of_a_ccrs_and_grouse_run_reach_the_report(tmp_path):
    """Regression: the GroUSE stage's scores (judge_grouse/) used to be ignored, and the GroUSE-weighted
    questions were silently re-weighted away."""
    root = make_run(tmp_path / "run")
    layout = RunLayout(root)
    grouse = ["answer_relevancy", "completeness", "usefulness", "faithfulness"]
    rows = [(q, s, m, 0.5) for q in [f"q{i}" for i in range(8)] for s in ("bm25+r", "knn+r") for m in grouse]
    layout.judge_dir("grouse").mkdir()
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores("grouse"))
    report, _ = write_report(root, DEFAULT_GOALS, tmp_path / "gqm")
    assert not set(grouse) & set(report["missing_metrics"])
    assert {report["metric_sources"][m] for m in grouse} == {str(layout.scores("grouse").relative_to(root))}
    assert report["metric_sources"]["CC"] == str(layout.scores("ccrs").relative_to(root))


def test_g5_renormalizes_without_the_vera_aggregate_and_ignores_the_untrained_demo_head(tmp_path):
    """No trained cross-encoder: `ccrs vera score` writes no vera_aggregate_sigmoid, and the demo head's
    vera_aggregate_untrained is not a goal-tree metric; Q5.1 is renormalized over AC, RR@k, ID."""
    root = make_run(tmp_path / "run")
    layout = RunLayout(root)
    layout.vera_dir.mkdir()
    rows = [(f"q{i}", s, "vera_aggregate_untrained", 1.0) for i in range(8) for s in ("bm25+r", "knn+r")]
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(
        layout.vera_dir / "scores.parquet")
    table, sources = load_metric_table(root)
    report = build_report(load_goals(DEFAULT_GOALS), table, sources)
    assert "vera_aggregate_sigmoid" in report["missing_metrics"]
    q51 = report["systems"]["bm25+r"]["all"]["goals"][4]["questions"][0]
    tree_weights = sum(m.weight for m in load_goals(DEFAULT_GOALS).goals[4].questions[0].metrics)
    assert tree_weights == pytest.approx(3.7)  # with the gqm judge's multi-hop, correctness, utilisation
    assert q51["coverage"] == pytest.approx((0.8 + 0.2 + 0.2) / tree_weights)
    assert [m["name"] for m in q51["metrics"] if m["available"]] == ["AC", "RR@k", "ID"]
    means = {m: table[(table.system == "bm25+r") & (table.metric == m)].score.mean()
             for m in ("AC", "RR@10", "ID")}
    assert q51["score"] == pytest.approx((0.8 * means["AC"] + 0.2 * means["RR@10"] + 0.2 * means["ID"]) / 1.2)


def test_grouse_citation_metrics_are_left_out_for_a_reader_prompt_without_citations(tmp_path):
    """A system whose reader prompt asks for no [i] citations (fig1-v2) gets no GroUSE faithfulness, PA or
    NR in the goal tree (not applicable, with the reason); a citing system keeps them."""
    from judges.grouse import CITATION_METRICS
    from judges.readers import PROMPT_VERSIONS
    from tasks.runtime.stage import MANIFEST

    root = make_run(tmp_path / "run")
    layout = RunLayout(root)
    grouse = ["answer_relevancy", "completeness", "usefulness", *CITATION_METRICS]
    rows = [(q, s, m, 0.0) for q in [f"q{i}" for i in range(8)] for s in ("bm25+r", "knn+r") for m in grouse]
    layout.judge_dir("grouse").mkdir()
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores("grouse"))
    systems = {"bm25+r": {"prompt": PROMPT_VERSIONS["paper"]}, "knn+r": {"prompt": PROMPT_VERSIONS["citing"]}}
    (layout.generations.parent / MANIFEST).write_text(json.dumps({"summary": {"systems": systems}}))
    report, _ = write_report(root, DEFAULT_GOALS, tmp_path / "gqm")
    left_out = [(e["system"], e["metrics"]) for e in report["not_applicable"]]
    assert left_out == [("bm25+r", list(CITATION_METRICS))]
    assert "asks for no [i] citations" in report["not_applicable"][0]["reason"]

    def available(system):
        return {m["name"] for g in report["systems"][system]["all"]["goals"] for q in g["questions"]
                for m in q["metrics"] if m["available"]}

    assert "faithfulness" not in available("bm25+r") and "faithfulness" in available("knn+r")
    assert "answer_relevancy" in available("bm25+r")


def test_repeated_judgments_reach_the_report_as_each_samples_mean(tmp_path):
    """judge.repeats: scores.parquet has a repeat column; the metric table holds one row per sample, the
    mean of its repeats, so a repeated run reports what its repeat-averaged scores say."""
    root = make_run(tmp_path / "run", with_retrieval=False)
    path = RunLayout(root).scores("ccrs")
    once = pd.read_parquet(path)
    repeated = pd.concat([once.assign(repeat=0, score=once["score"] * 0.5),
                          once.assign(repeat=1, score=once["score"] * 1.5)], ignore_index=True)
    repeated.loc[(repeated["repeat"] == 1) & (repeated["score"] > 1), "score"] = 1.0
    repeated.to_parquet(path)
    table, _ = load_metric_table(root)
    assert len(table) == len(once)
    expected = repeated.groupby(["query_id", "system", "metric"])["score"].mean()
    got = table.set_index(["query_id", "system", "metric"])["score"]
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index(), check_names=False)


# --- the thesis' own tree (`--goals thesis`) ------------------------------------------------------------

# gqm-thesis.txt chapter 4.1: each question's metrics and roles, nothing else.
THESIS_QUESTIONS = {
    "Q1.1": [("Faithfulness", "primary"), ("Factual Consistency", "secondary"),
             ("Attribution Score", "supporting")],
    "Q1.2": [("Faithfulness", "primary"), ("Factual Consistency", "primary")],
    "Q2.1": [("Context Precision", "primary"), ("Context Relevance", "primary"),
             ("Semantic Diversity", "secondary")],
    "Q2.2": [("Answer Relevance", "primary"), ("Answer Completeness", "secondary")],
    "Q3.1": [("Context Recall", "primary"), ("Context Entities Recall", "secondary")],
    "Q3.2": [("Answer Completeness", "primary"), ("Context Utilization Rate", "secondary")],
    "Q4.1": [("Self-Consistency Score", "primary"), ("BERTScore", "secondary")],
    "Q5.1": [("Multi-hop Reasoning Score", "primary"), ("Answer Correctness", "secondary"),
             ("Context Utilization Rate", "supporting")],
}
MIDPOINTS = {"primary": 0.9, "secondary": 0.6, "supporting": 0.25}
# Columns that measure a thesis metric another way: wherever a tree names them, they are marked proxies.
PROXY_COLUMNS = {"P@k", "R@k", "vera_faithfulness", "vera_retrieval_precision", "vera_retrieval_recall",
                 "vera_answer_relevance"}


def test_the_thesis_tree_holds_only_the_thesis_metrics_at_their_roles():
    config = load_goals(goals_path("thesis"))
    got = {q.id: [((m.proxy_for or m.label), m.role) for m in q.metrics] for g in config.goals
           for q in g.questions}
    assert list(got) == list(THESIS_QUESTIONS)
    for qid, expected in THESIS_QUESTIONS.items():
        assert [role for _, role in got[qid]] == [role for _, role in expected], qid
        assert all(text.startswith(name) for (text, _), (name, _) in zip(got[qid], expected)), got[qid]
    metrics = [m for g in config.goals for q in g.questions for m in q.metrics]
    assert all(m.weight == MIDPOINTS[m.role] for m in metrics)
    assert config.not_computed() == set()  # every thesis metric has a column (issue 48)
    assert {"gqm_context_precision", "gqm_context_recall", "gqm_context_relevance", "gqm_entity_recall",
            "gqm_faithfulness", "gqm_factual_consistency", "gqm_bertscore", "gqm_self_consistency"} <= {
        m.name for m in metrics if m.computed}
    # no proxy where the thesis' metric is computed: Answer Relevance (eq. 5.9) is the one left
    assert {m.proxy_for for m in metrics if m.proxy_for} == {"Answer Relevance (eq. 5.9-5.10)"}


@pytest.mark.parametrize("tree", sorted(GOAL_TREES))
def test_every_proxy_is_marked_wherever_a_tree_names_it(tree):
    config = load_goals(goals_path(tree))
    metrics = [m for g in config.goals for q in g.questions for m in q.metrics]
    assert all(m.proxy_for and m.note for m in metrics if m.name in PROXY_COLUMNS)
    assert all("[proxy for " in m.display() for m in metrics if m.proxy_for)
    assert all(m.label for m in metrics), "every metric says what it is"


def _add_gqm_scores(root: Path, metrics: dict[str, float]) -> None:
    layout = RunLayout(root)
    layout.judge_dir("gqm").mkdir()
    rows = [(f"q{i}", s, m, v) for i in range(8) for s in ("bm25+r", "knn+r") for m, v in metrics.items()]
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores("gqm"))


def _thesis_tree_without_factual_consistency(tmp_path: Path) -> Path:
    """The thesis tree with Factual Consistency marked computed: false, as it was before eq. 5.8 had a
    column: the not-computed machinery, exercised on a real tree."""
    data = yaml.safe_load(goals_path("thesis").read_text())
    for goal in data["goals"]:
        for question in goal["questions"]:
            for metric in question["metrics"]:
                if metric["name"] == "gqm_factual_consistency":
                    metric.update(computed=False, reason="needs the HHEM classifier")
                    metric.pop("note")
    for members in data["metric_categories"].values():
        if "gqm_factual_consistency" in members:
            members.remove("gqm_factual_consistency")
    path = tmp_path / "thesis-without-fc.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_thesis_report_counts_the_not_computed_weight_and_prints_it_apart(tmp_path):
    root = make_run(tmp_path / "run")  # CCRS and IR metrics: none of them is in the thesis tree
    _add_gqm_scores(root, {"gqm_faithfulness": 0.8, "gqm_attribution": 0.4, "gqm_context_precision": 0.5})
    tree = _thesis_tree_without_factual_consistency(tmp_path)
    report, _ = write_report(root, str(tree), tmp_path / "gqm")
    assert {m["name"] for m in report["not_computed"]} == {"gqm_factual_consistency"}
    assert "gqm_factual_consistency" not in report["missing_metrics"]
    assert not {"CC", "AC", "P@k", "R@k"} & set(report["metric_columns"])
    entry = report["systems"]["bm25+r"]["all"]
    g1, g2, _, g4, _ = entry["goals"]
    q11, q12 = g1["questions"]
    assert q11["score"] == pytest.approx((0.9 * 0.8 + 0.25 * 0.4) / (0.9 + 0.25))
    assert q11["coverage"] == pytest.approx((0.9 + 0.25) / (0.9 + 0.6 + 0.25))  # no Factual Consistency
    assert q12["coverage"] == pytest.approx(0.9 / 1.8)
    assert g1["coverage"] == pytest.approx((q11["coverage"] + q12["coverage"]) / 2)
    assert g4["score"] is None and g4["coverage"] == 0.0  # no sampled answers, no BERTScore in this run
    assert "gqm_self_consistency" in report["missing_metrics"]
    fc = next(m for m in q11["metrics"] if m["name"] == "gqm_factual_consistency")
    assert fc["computed"] is False and fc["reason"].startswith("not computed here: needs the HHEM")
    assert g2["questions"][0]["score"] == pytest.approx(0.5)  # Context Precision alone of Q2.1

    lines = tree_lines(report)
    text = "\n".join(lines)
    assert lines[0] == "goal tree gqm-thesis"
    q11_block = text[text.index("    Q1.1"):text.index("    Q1.2")]
    computed, not_computed = q11_block.split("      not computable here: ")
    assert "gqm_faithfulness" in computed and "Factual Consistency" not in computed
    assert not_computed.startswith("Factual Consistency (eq. 5.8")
    assert "0.500  gqm_context_precision: Context Precision (eq. 5.1" in text
    assert "gqm_context_relevance: Context Relevance (eq. 5.3" in text  # absent from this run: n/a
    reasons = text[text.index("not computed here (their weight counts against coverage):"):]
    assert reasons.count("\n  ") == 1 and "HHEM" in reasons


def test_goal_trees_are_chosen_by_name_or_file(tmp_path):
    assert goals_path(None) == GOAL_TREES["hybrid"] and goals_path("thesis") == GOAL_TREES["thesis"]
    assert goals_path(str(tmp_path / "mine.yaml")) == tmp_path / "mine.yaml"
    with pytest.raises(GQMConfigError, match="unknown goal tree 'thesys'"):
        goals_path("thesys")
