"""`ccrs run` end to end on real BioASQ questions with the real CPU model stack, asserting on what lands
in a real MLflow server."""
import json
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from judges.ccrs import EM_COMBINED
from pipelines.pipeline import run_pipeline
from tests.pipelines.conftest import E2E_PROBES, E2E_QUESTIONS, PLANTED_SECRETS, e2e_config
from tasks.runtime.layout import PROBE_FILES, RunLayout

pytestmark = [pytest.mark.llm, pytest.mark.slow]
CCRS = ["CC", "QR", "ID", "AC", "IR"]


def _runs(tracking_uri, experiment):
    client = MlflowClient(tracking_uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    return client, client.search_runs([experiment_id])


def test_parent_run_holds_statistics_samples_config_and_provenance(e2e_run):
    config, result = e2e_run
    client, runs = _runs(config.mlflow.tracking_uri, config.mlflow.experiment)
    # (a rerun in another test logs a run of its own: this test reads the session run's)
    (parent,) = [run for run in runs if run.info.run_id == result.tracked["run_id"]]
    assert parent.data.tags["ccrs.kind"] == "pipeline" and parent.data.tags["ccrs.config_name"] == "e2e"
    assert parent.data.tags["ccrs.metrics"] == ",".join(sorted(CCRS))
    assert parent.data.tags["ccrs.adhoc"] == "false"
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"stats", "plots", "tables", "samples", "config", "gqm"} <= artifacts
    plots = [a.path for a in client.list_artifacts(parent.info.run_id, "plots")]
    assert plots and all(path.endswith(".png") for path in plots)
    stats_path = client.download_artifacts(parent.info.run_id, "stats/stats.json")
    stats = json.loads(open(stats_path).read())
    assert ({"n_queries", "systems", "metrics", "per_metric", "correlations", "b", "seed", "alpha"}
            <= set(stats))
    assert stats["systems"] == list("ABCDEF") and stats["metrics"] == CCRS
    params = parent.data.params
    for key in ("provenance.git_commit", "provenance.seeds.client", "provenance.seeds.stats",
                "provenance.prompt_versions.ccrs_judge", "provenance.packages.ray", "judge.model"):
        assert key in params, key
    assert len(parent.inputs.dataset_inputs) == 1


def test_probes_asked_for_are_a_stage_a_verdict_section_and_mlflow_metrics(e2e_run):
    config, result = e2e_run
    layout = RunLayout(result.run_dir)
    report = json.loads(layout.probe_report.read_text())
    assert report["kinds"] == E2E_PROBES["kinds"] and report["n_questions"] == E2E_PROBES["questions"]
    assert report["probed_questions"] == {"order": 2}
    assert report["judgments"] == 2 * (5 + 4)  # clean, order (QR does not read the context)
    assert [c["metric"] for c in report["cells"]] == [m for m in CCRS if m != "QR"]
    assert all(c["n"] == 2 and c["expected"] == "stable" for c in report["cells"])
    verdict = layout.summary_md.read_text()
    assert "## Judge bias probes" in verdict and "| order | order | CC | stable |" in verdict
    client = MlflowClient(config.mlflow.tracking_uri)
    run = client.get_run(result.tracked["run_id"])
    assert run.data.metrics["probe/flagged_cells"] == len(report["flagged"])
    assert {a.path for a in client.list_artifacts(run.info.run_id, "probes")} == {
        f"probes/{name}" for name in PROBE_FILES.values()}


def test_artifacts_land_in_s3(e2e_run, s3_endpoint):
    import boto3

    config, result = e2e_run
    url, _ = s3_endpoint
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id="moto-test",
                      aws_secret_access_key="moto-test", region_name="us-east-1")
    # every page: the session's bucket holds the artifacts of every test that logged to MLflow, and one
    # list_objects_v2 call returns at most 1,000 keys (the cause of an order-dependent failure)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="ccrs-artifacts")
    keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    assert any(key.endswith(f"{result.tracked['run_id']}/artifacts/stats/stats.json") for key in keys)


def test_one_nested_run_per_system_with_ccrs_means_and_cis(e2e_run):
    config, result = e2e_run
    _, runs = _runs(config.mlflow.tracking_uri, config.mlflow.experiment)
    systems = {run.data.tags["system"]: run for run in runs
               if run.data.tags.get("mlflow.parentRunId") == result.tracked["run_id"]}
    assert sorted(systems) == list("ABCDEF")
    for label, run in systems.items():
        assert run.data.tags["mlflow.parentRunId"] == result.tracked["run_id"]
        assert run.data.tags["retriever"] in ("bm25", "knn") and run.data.tags["reader"]
        for metric in CCRS:
            failed = run.data.metrics[f"{metric}_failed"]
            if failed < E2E_QUESTIONS:  # a metric with every judgment failed has no mean (never a NaN or 0)
                assert 0.0 <= run.data.metrics[metric] <= 1.0
                assert run.data.metrics[f"{metric}_ci_low"] <= run.data.metrics[f"{metric}_ci_high"]


def test_every_sample_has_one_judgment_or_one_recorded_failure(e2e_run):
    config, result = e2e_run
    judgments = pd.read_parquet(RunLayout(result.run_dir).judgments("ccrs"))
    assert not judgments.duplicated(["query_id", "system", "metric"]).any()
    assert len(judgments) == E2E_QUESTIONS * 6 * len(CCRS)
    ok = judgments["status"] != "failed"
    assert judgments.loc[ok, "score"].between(0, 1).all()
    assert judgments.loc[~ok, "score"].isna().all() and judgments.loc[~ok, "reason"].str.len().gt(0).all()


def test_the_demo_scores_expected_marks_and_keeps_the_integer_beside_them(e2e_run):
    """configs/cpu-demo.yaml judges with `scoring: expected`: the score every statistic reads is the
    probability-weighted mark (or the integer, counted as a fallback), the argmax integer kept beside it."""
    config, result = e2e_run
    assert config.judge.scoring == "expected"
    judgments = pd.read_parquet(RunLayout(result.run_dir).judgments("ccrs"))
    ok = judgments[judgments["status"] == "ok"]
    assert len(ok) and set(ok["scoring"]) <= {"expected", "integer_fallback"}
    expected = ok[ok["scoring"] == "expected"]
    assert len(expected) and expected["llm_score_expected"].between(0, 100).all()
    assert expected["llm_score"].notna().all()
    plain = expected[~expected["metric"].isin(EM_COMBINED)]  # AC mixes in EM
    assert (plain["score"] - plain["llm_score_expected"] / 100).abs().max() < 1e-9
    counts = result.stages[RunLayout.judge_stage("ccrs")]["summary"]["scoring_counts"]
    assert sum(counts.values()) == len(ok)


def test_rerun_reuses_every_stage_and_logs_a_run_of_its_own(e2e_run):
    config, result = e2e_run
    again = run_pipeline(config, keep_serving=True)
    assert again.tracked["run_id"] != result.tracked["run_id"]  # every invocation is a run (nightly history)
    assert all(stage["reused"] for stage in again.stages.values()), again.stages
    assert again.stages["generate"]["summary"] == result.stages["generate"]["summary"]
    tags = MlflowClient(config.mlflow.tracking_uri).get_run(again.tracked["run_id"]).data.tags
    assert tags["ccrs.reused_stages"].split(",") == list(again.stages)


def test_no_planted_secret_reaches_params_tags_or_artifacts(e2e_run, tmp_path):
    config, result = e2e_run
    client, runs = _runs(config.mlflow.tracking_uri, config.mlflow.experiment)
    secrets = list(PLANTED_SECRETS.values())
    for run in runs:
        texts = [*run.data.params.values(), *run.data.params, *run.data.tags.values()]
        assert not [s for s in secrets if any(s in text for text in texts)], run.info.run_name
        local = client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id))
        for path in Path(local).rglob("*"):
            if path.is_file():
                blob = path.read_bytes()
                assert not [s for s in secrets if s.encode() in blob], path


def test_compare_against_the_previous_run_tags_and_summarizes(e2e_run, llm_endpoint, mlflow_server, tmp_path):
    """Two more pipeline runs (same outputs), the second checked against the first. They are logged from a
    copy of the run folder into an experiment of their own: the session's run, its folder and its
    experiment stay as the other tests here expect them, in any order."""
    import shutil

    from pipelines.tools.gate import compare_runs

    _, session_result = e2e_run
    shutil.copytree(session_result.run_dir, tmp_path / "run")
    config = e2e_config(tmp_path / "run", llm_endpoint.base_url, mlflow_server, experiment="ccrs-e2e-compare")
    result = run_pipeline(config, keep_serving=True)
    assert all(stage["reused"] for stage in result.stages.values()), result.stages
    rerun = run_pipeline(config, from_stage="track", keep_serving=True)
    assert rerun.tracked["run_id"] != result.tracked["run_id"]
    report = compare_runs(config.mlflow.tracking_uri, config.mlflow.experiment, "latest", "previous",
                          alpha=0.05, b=500, seed=0)
    assert (report.run_id, report.baseline_id) == (rerun.tracked["run_id"], result.tracked["run_id"])
    assert report.n_regressions == 0 and (report.table["diff"] == 0).all()
    client = MlflowClient(config.mlflow.tracking_uri)
    tags = client.get_run(report.run_id).data.tags
    assert tags["regression.status"] == "pass" and tags["regression.baseline"] == result.tracked["run_id"]
    assert {a.path for a in client.list_artifacts(report.run_id, "regression")} == {
        "regression/summary.md", "regression/summary.json"}
