"""`ccrs run` with every registered judge suite (`judges: [ccrs, grouse, vera, ragchecker, gqm]`) on the real
CPU stack: each suite goes through the same stage, failure accounting, statistics, GQM and MLflow."""
import json

import pandas as pd
import pytest

from judges.suite import get_suite, suites
from pipelines.config import RunConfig
from pipelines.pipeline import run_pipeline
from tasks.runtime.layout import RunLayout
from tests.pipelines.conftest import e2e_config

QUESTIONS = 2
# One extractive reader over BM25 alone (1 system: the subject is each suite through every stage, which a
# second system only doubled; deterministic generations, no embedding model to load), 3 chunks a context
# and at most 1 claim per answer keep the suites' judge calls within a CPU minute or so; every suite still
# runs through every stage. The top-3 reader: its answers are the ones the tiny judge's RAGChecker verdicts
# parse on (the top-1 reader's all failed here). Several systems through the stages and statistics: test_e2e.
READERS = [{"name": "extractive-top3", "kind": "extractive", "max_sentences": 3}]
RETRIEVERS = ["bm25"]
SYSTEMS = len(RETRIEVERS) * len(READERS)


@pytest.mark.llm
@pytest.mark.slow
def test_a_run_with_all_four_suites_judges_reduces_reports_and_tracks_each(tmp_path, llm_endpoint,
                                                                          judge_cache_dir, mlflow_db):
    # mlflow_db: a copy of a new store at tmp_path/mlflow.db (no migrations to wait for)
    config = e2e_config(tmp_path / "run", llm_endpoint.base_url, mlflow_db, experiment="ccrs-all-suites")
    retrieval = {**config.retrieval.model_dump(), "retrievers": RETRIEVERS, "top_k": 3}
    config = RunConfig.model_validate({**config.model_dump(), "judges": list(suites()), "readers": READERS,
                                       "retrieval": retrieval})
    # Small reply budgets (CI time): the tiny judge rambles up to its budget, e.g. the `paper` GroUSE
    # faithfulness analysis until the JSON is cut (a recorded failure, which this test accepts). No re-asks
    # (CI time): here every one of CCRS, GroUSE, GQM and VERA came back invalid again (the same failures);
    # RAGChecker keeps its one (its one scored judgment here came after it).
    config.judge.max_reasks = 0
    config.judge.vera.max_reasks = 0
    config.judge.scoring = "integer"  # the demo's expected marks cost 3x (tested in test_e2e)
    config.judge.ragchecker.max_claims = 1  # extraction, then one check per text: its metrics all computed
    config.judge.vera.max_statements = 4
    # two of VERA's four metrics: all four are judged on the real judge in
    # tests/judges/test_vera.py::test_vera_on_real_bioasq_questions
    config.judge.vera.metrics = ["faithfulness", "answer_relevance"]
    # GroUSE faithfulness's sentence-by-sentence analysis never fits a small budget for this judge (at 128
    # tokens as at 32: cut JSON, a recorded failure), so it gets the smallest
    config.judge.grouse.faithfulness_max_tokens = 32
    config.judge.grouse.max_tokens = 128  # (default 512: the relevancy and completeness JSON replies)
    config.judge.vera.max_tokens = 96  # (its answer-relevance questions, up to ~70 tokens here)
    config.judge.ragchecker.max_tokens = 64  # one claim (~40 tokens here) and one-line verdicts
    # 2 of its 0-10 marks (one call each, CI time) and eq. 5.1's context precision (one call per chunk)
    config.judge.gqm.metrics = ["answer_correctness", "multi_hop", "context_precision"]
    config.dataset.limit = QUESTIONS
    config.stats.b = 200
    config.stats.hypotheses = None
    result = run_pipeline(config, keep_serving=True)
    layout = RunLayout(result.run_dir)

    assert layout.judged_suites() == sorted(["ccrs", "grouse", "vera", "ragchecker", "gqm"])
    for name in suites():
        metrics = get_suite(name).selected_metrics(config.judge)
        judgments = pd.read_parquet(layout.judgments(name))
        assert len(judgments) == QUESTIONS * SYSTEMS * len(metrics), name
        assert set(judgments.metric) == set(metrics) and set(judgments.suite) == {name}
        assert not judgments.duplicated(["query_id", "system", "metric"]).any()
        failed = judgments[judgments.status == "failed"]
        assert failed.reason.str.len().gt(0).all() and failed.score.isna().all(), name
        assert result.failures["stages"][layout.judge_stage(name)]["items"] == len(judgments)
    precision = pd.read_parquet(layout.judgments("gqm")).query("metric == 'gqm_context_precision'")
    assert (precision.status == "ok").any(), precision[["status", "reason", "raw"]].to_string()  # eq. 5.1
    assert precision.score.dropna().between(0, 1).all()

    stats = json.loads(layout.stats_json.read_text())
    scored = set(pd.concat([pd.read_parquet(layout.scores(name)) for name in suites()]).metric)
    assert set(stats["metrics"]) == scored
    assert stats["metrics"][:5] == ["CC", "QR", "ID", "AC", "IR"]  # the registry's display order

    gqm = json.loads((layout.track_dir / "gqm" / "gqm_report.json").read_text())
    for name in ("grouse", "vera"):  # the suites the thesis goal tree weights besides CCRS
        scored_here = set(pd.read_parquet(layout.scores(name)).metric) & set(gqm["metric_sources"])
        assert ({gqm["metric_sources"][m] for m in scored_here}
                <= {str(layout.scores(name).relative_to(layout.root))})
    assert result.tracked["run_id"]
