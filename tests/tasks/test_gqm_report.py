import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines.tools.gqm_report import DEFAULT_GOALS, write_report
from tasks.gqm_report import GQMConfigError, build_report, load_goals, load_metric_table

from tasks.layout import RunLayout

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


def test_thesis_goals_load():
    config = load_goals(DEFAULT_GOALS)
    assert [g.id for g in config.goals] == ["G1", "G2", "G3", "G4", "G5"]
    assert any(nc.metric == "BERTScore" for g in config.goals for q in g.questions for nc in q.no_counterpart)


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["goals"][0]["questions"][0]["metrics"][0].update(weight=0.3), "outside the thesis range"),
    (lambda d: d["goals"][0]["questions"][0]["metrics"][0].update(role="tertiary"), "role"),
    (lambda d: d["goals"][0].update(questions=[]), "empty goal"),
    (lambda d: d["goals"][0].update(colour="red"), "Extra inputs"),
    (lambda d: d["metric_categories"]["system"].append("BLEU"), "metric_categories name metrics"),
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
    # Q1.1: only CC and AC present -> renormalized (coverage 1.2 / 3.4, the sum of the tree's Q1.1 weights)
    q11 = entry["goals"][0]["questions"][0]
    assert q11["coverage"] == pytest.approx(1.2 / 3.4)
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
    """No trained cross-encoder: `ccrs vera score` writes no vera_aggregate, and the demo head's
    vera_aggregate_untrained is not a goal-tree metric; Q5.1 is renormalized over AC, RR@k, ID."""
    root = make_run(tmp_path / "run")
    layout = RunLayout(root)
    layout.vera_dir.mkdir()
    rows = [(f"q{i}", s, "vera_aggregate_untrained", 1.0) for i in range(8) for s in ("bm25+r", "knn+r")]
    pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(
        layout.vera_dir / "scores.parquet")
    table, sources = load_metric_table(root)
    report = build_report(load_goals(DEFAULT_GOALS), table, sources)
    assert "vera_aggregate" in report["missing_metrics"]
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
    from tasks.stage import MANIFEST

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
