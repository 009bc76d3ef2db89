"""A user's own RAG service as a system of `ccrs run` (`systems: [{kind: endpoint, ...}]`), beside a
built-in reader, on the real CPU stack: a local HTTP RAG service (tests/conftest.py RagService) answers
real BioASQ questions; half its requests failing is recorded and counted, and a rerun completes."""
import json

import pandas as pd
import pytest

from pipelines.config import RunConfig
from pipelines.pipeline import run_pipeline
from tasks.runtime.layout import RunLayout
from tests.conftest import bioasq_questions
from tests.pipelines.conftest import e2e_config

QUESTIONS = 2
READERS = [{"name": "extractive-top1", "kind": "extractive", "max_sentences": 1}]


@pytest.mark.llm
@pytest.mark.slow
def test_an_endpoint_system_is_judged_beside_a_built_in_reader_and_a_rerun_completes_its_failures(
        tmp_path, llm_endpoint, rag_service, mlflow_db):
    config = e2e_config(tmp_path / "run", llm_endpoint.base_url, mlflow_db,  # a copy of the empty store
                        experiment="ccrs-endpoint-systems")
    systems = [{"kind": "endpoint", "name": "my-rag", "url": rag_service.url, "max_retries": 1,
                "concurrency": 2}]
    retrieval = {**config.retrieval.model_dump(), "retrievers": ["bm25"]}  # no embedding model to load
    config = RunConfig.model_validate({**config.model_dump(), "readers": READERS, "systems": systems,
                                       "retrieval": retrieval})
    config.judge.scoring = "integer"  # CI time; scoring is not the subject
    config.judge.ccrs.metrics = ["CC", "QR"]
    config.stats.hypotheses = None
    config.stats.b = 200
    config.gqm_goals = None
    failing = bioasq_questions(QUESTIONS)[0]["id"]
    rag_service.failing.add(failing)  # half of the questions: 503 on every attempt

    first = run_pipeline(config, keep_serving=True)
    layout = RunLayout(first.run_dir)
    generations = pd.read_parquet(layout.generations)
    mine = generations[generations["system"] == "my-rag"].set_index("query_id")
    assert set(generations["system"]) == {"A", "my-rag"}
    assert mine.loc[failing, "status"] == "failed" and "HTTP 503" in mine.loc[failing, "error"]
    answered = mine.drop(failing)
    assert (answered["status"] == "ok").all() and all(len(c) == 3 for c in answered["contexts"])
    assert rag_service.requests == 1 + 2  # the answered question once, the failing one twice (1 retry)
    failures = json.loads(layout.failures_json.read_text())
    assert failures["stages"]["generate"]["failed"] == 1
    judgments = pd.read_parquet(layout.judgments("ccrs"))
    failed = judgments[(judgments["system"] == "my-rag") & (judgments["query_id"] == failing)]
    assert len(failed) == 2 and (failed["status"] == "failed").all()
    assert failed["reason"].str.startswith("generation failed: service my-rag").all()
    assert "my-rag" in layout.summary_md.read_text()

    rag_service.failing.clear()  # the service is back: a rerun asks again for the failed answer only
    second = run_pipeline(config, keep_serving=True)
    regenerated = pd.read_parquet(layout.generations)
    assert (regenerated["status"] == "ok").all() and rag_service.requests == 3 + 1
    judgments = pd.read_parquet(layout.judgments("ccrs"))
    assert len(judgments) == QUESTIONS * 2 * 2 and not (judgments["reason"].fillna("")
                                                        .str.startswith("generation failed")).any()
    assert json.loads(layout.failures_json.read_text())["stages"]["generate"]["failed"] == 0
    assert second.tracked["run_id"] != first.tracked["run_id"]
