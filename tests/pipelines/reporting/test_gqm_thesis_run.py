"""configs/gqm-thesis-cpu.yaml, the shipped thesis run: the thesis report (`ccrs report RUN_DIR --goals
thesis`, pipelines/reporting/gqm.py) over the metrics that config produces covers the thesis tree, but for
what cannot install here, each named with its reason. No run: the config's metric list, scores made up."""
from pathlib import Path

import pandas as pd
import pytest

from judges.suite import get_suite
from pipelines.config import load_config
from pipelines.reporting.gqm import load_goals
from pipelines.tools.gqm_report import goals_path, write_report
from tasks.runtime.layout import RunLayout

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "gqm-thesis-cpu.yaml"
DENSE = "knn"  # the dense retriever: its embeddings give SD@k
# Components the thesis names that this machine cannot install, and the tree metrics standing in for them:
# each such metric's note in the thesis tree names the component it replaces.
STAND_INS = {"gqm_faithfulness": "HHEM", "gqm_factual_consistency": "HHEM", "gqm_entity_recall": "spaCy",
             "gqm_bertscore": "roberta-large", "SD@k": "Voyage", "vera_answer_relevance": "Voyage"}


def cannot_install_here() -> dict[str, str]:
    """Tree metrics this machine cannot compute at all, with the reason (bert-score or its encoder
    missing)."""
    from judges.bertscore import check_installed

    try:
        check_installed()
    except ValueError as exc:
        return {"gqm_bertscore": str(exc)}
    return {}


def produced_metrics(config) -> list[str]:
    """What a run of `config` writes: each judged suite's selected metrics, SD@<top_k> of the retrieval
    metrics."""
    judged = [m for suite in config.judges for m in get_suite(suite).selected_metrics(config.judge)]
    return judged + [f"SD@{config.retrieval.top_k}"]


def _fake_run(root: Path, metrics: list[str], retriever: str) -> Path:
    layout = RunLayout(root)
    system = "A"
    for suite in ("gqm", "vera"):
        layout.judge_dir(suite).mkdir(parents=True)
        rows = [(f"q{i}", system, m, 0.5) for i in range(4) for m in metrics if m.startswith(f"{suite}_")]
        pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"]).to_parquet(layout.scores(suite))
    (root / "generate").mkdir()
    generations = [{"query_id": f"q{i}", "system": system, "retriever": retriever, "reader": "r",
                    "answer": "x"} for i in range(4)]
    pd.DataFrame(generations).to_parquet(root / "generate" / "generations.parquet")
    (root / "retrieval_metrics").mkdir()
    pd.DataFrame([(f"q{i}", retriever, m, 0.5) for i in range(4) for m in metrics if "@" in m],
                 columns=["query_id", "retriever", "measure", "value"]).to_parquet(
        root / "retrieval_metrics" / "retrieval_metrics.parquet")
    return root


def test_the_config_has_the_thesis_settings():
    config = load_config(CONFIG)
    assert config.retrieval.top_k == 3 and DENSE in config.retrieval.retrievers  # section 6.1: k = 3
    (reader,) = config.readers
    assert reader.temperature == pytest.approx(0.1) and reader.samples >= 2  # T = 0.1; self-consistency
    assert set(config.judges) == {"gqm", "vera"} and config.judge.vera.relevance_weighting == "gqm"
    assert set(get_suite("gqm").selected_metrics(config.judge)) == set(get_suite("gqm").metrics)


def test_its_thesis_report_covers_the_tree_but_what_cannot_install_here(tmp_path):
    config = load_config(CONFIG)
    unavailable = cannot_install_here()
    metrics = [m for m in produced_metrics(config) if m not in unavailable]
    report, _ = write_report(_fake_run(tmp_path / "run", metrics, DENSE), "thesis", tmp_path / "out")
    assert sorted(report["missing_metrics"]) == sorted(unavailable)
    assert all(reason for reason in unavailable.values())
    assert report["not_computed"] == []
    entry = report["systems"]["A"]["all"]
    if not unavailable:
        assert entry["overall"]["coverage"] == pytest.approx(1.0)
        assert all(q["coverage"] == pytest.approx(1.0) for g in entry["goals"] for q in g["questions"])


def test_every_stand_in_names_what_it_replaces():
    tree = load_goals(goals_path("thesis"))
    notes = {m.name: m.note for g in tree.goals for q in g.questions for m in q.metrics}
    for metric, component in STAND_INS.items():
        assert component in notes[metric], (metric, notes[metric])
    assert CONFIG.read_text().count("->") >= len(set(STAND_INS.values()))  # the config lists them too
