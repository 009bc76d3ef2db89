from pipelines.reporting.tracking import flatten, redact, run_description, run_url


def test_redact_hides_secret_values_but_keeps_env_var_names():
    config = {"opensearch": {"password_env": "OPENSEARCH_PASSWORD", "password": "hunter2"},
              "client": {"api_key": "sk-123", "api_key_env": "CCRS_LLM_API_KEY", "timeout_s": 5},
              "list": [{"token": "t"}]}
    clean = redact(config)
    assert clean["opensearch"] == {"password_env": "OPENSEARCH_PASSWORD", "password": "***"}
    assert clean["client"] == {"api_key": "***", "api_key_env": "CCRS_LLM_API_KEY", "timeout_s": 5}
    assert clean["list"] == [{"token": "***"}]


def test_flatten_uses_dotted_keys_and_json_for_lists():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None, "e": True}) == {
        "a.b": "1", "a.c": "[1, 2]", "d": "null", "e": "true"}


def test_run_url_for_server_and_local_store():
    assert (run_url("http://mlflow:5000/", "3", "abc")
            == "http://mlflow:5000/#/experiments/3/runs/abc?workflowType=machine_learning")
    assert run_url("sqlite:///x.db", "1", "r").startswith("http://127.0.0.1:5000/#/experiments/1/runs/r?")
    assert (run_url("http://m", "1", "r", "samples/per_sample.json")
            == "http://m/#/experiments/1/runs/r/artifacts/samples/per_sample.json?workflowType=machine_learning")


def test_unreachable_tracking_server_is_a_clear_error_naming_the_address():
    import socket

    import pytest

    from pipelines.reporting.tracking import TrackingError, check_tracking_reachable

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TrackingError, match=f"127.0.0.1:{port}"):
        check_tracking_reachable(f"http://127.0.0.1:{port}", timeout_s=2)


def test_comparison_table_is_logged_as_an_mlflow_table(tmp_path, mlflow_db):
    import mlflow

    from pipelines.reporting.tracking import COMPARISON_TABLE_ARTIFACT, log_comparison_table

    rows = [{"suite": "ccrs", "metric": "QR", "rank": 1, "discriminative_power": 0.9333},
            {"suite": "ragchecker", "metric": "rc_recall", "rank": 1, "discriminative_power": 0.8}]
    mlflow.set_tracking_uri(mlflow_db)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "comparison", artifact_location=(tmp_path / "artifacts").as_uri()))
    with mlflow.start_run() as logged:
        log_comparison_table(mlflow, {"discriminative_power_comparison": rows})
    with mlflow.start_run() as empty:
        log_comparison_table(mlflow, {"discriminative_power_comparison": []})
    table = mlflow.load_table(COMPARISON_TABLE_ARTIFACT, run_ids=[logged.info.run_id])
    assert table[list(rows[0])].to_dict("records") == rows
    client = mlflow.MlflowClient()
    assert [a.path for a in client.list_artifacts(empty.info.run_id, "tables")] == []


def _per_sample_inputs():
    import numpy as np
    import pandas as pd

    from tests.conftest import bioasq_questions

    questions = bioasq_questions(2)
    queries = pd.DataFrame({"query_id": [q["id"] for q in questions], "text": [q["body"] for q in questions]})
    generations = pd.DataFrame([
        {"query_id": q["id"], "system": system, "retriever": retriever, "reader": "extractive-top1",
         "answer": q["ideal_answer"][0] if system == "A" else "", "chunk_ids": np.array(["c1", "c2"]),
         "status": "ok" if system == "A" else "failed", "error": None if system == "A" else "timeout"}
        for q in questions for system, retriever in (("A", "bm25"), ("B", "knn"))])
    judgments = pd.DataFrame([
        {"query_id": q["id"], "system": system, "metric": metric,
         "score": None if (system, metric) == ("A", "QR") else 0.5, "raw": f"{metric} reply",
         "status": "failed" if (system, metric) == ("A", "QR") else "ok",
         "reason": "no integer in 0-100" if (system, metric) == ("A", "QR") else None}
        for q in questions for system in ("A", "B") for metric in ("CC", "QR")])
    return queries, generations, judgments


def test_per_sample_table_has_one_row_per_question_and_system():
    from pipelines.reporting.tracking import per_sample_table

    queries, generations, judgments = _per_sample_inputs()
    table = per_sample_table(queries, generations, judgments)
    assert list(table.columns) == ["question", "system", "retriever", "reader", "answer", "chunk_ids", "CC",
                                   "QR", "judge_raw", "failures", "query_id"]
    assert len(table) == 4
    first = table.iloc[0]
    assert first["question"] == queries["text"][0] and first["chunk_ids"] == "c1, c2"
    assert first["CC"] == 0.5 and first["QR"] != first["QR"]  # the failed judgment has no score
    assert first["judge_raw"] == "CC: CC reply\nQR: QR reply"
    assert first["failures"] == "QR failed: no integer in 0-100"
    assert table.iloc[1]["failures"] == "generation failed: timeout"


def test_per_sample_table_shows_the_mean_of_the_repeats_and_each_repeats_reply():
    """judge.repeats k = 2: one row per (question, system) still; a metric's cell is the mean of its scored
    repeats (a failed repeat left out), the replies and failures are labelled metric[repeat]."""
    import pandas as pd

    from pipelines.reporting.tracking import per_sample_table

    queries, generations, judgments = _per_sample_inputs()
    second = judgments.assign(repeat=1, raw=judgments["raw"] + " again", score=judgments["score"] / 2)
    first = judgments.assign(repeat=0)
    first.loc[first["system"] == "A", ["status", "score", "reason"]] = ["failed", None, "no integer"]
    table = per_sample_table(queries, generations, pd.concat([first, second], ignore_index=True))
    assert len(table) == 4
    row = table.iloc[0]
    assert row["CC"] == 0.25 and row["QR"] != row["QR"]  # QR failed in both repeats
    assert row["judge_raw"] == ("CC[0]: CC reply\nQR[0]: QR reply\n"
                                "CC[1]: CC reply again\nQR[1]: QR reply again")
    assert row["failures"] == ("CC[0] failed: no integer; QR[0] failed: no integer; "
                               "QR[1] failed: no integer in 0-100")


def test_per_sample_table_is_an_mlflow_table_in_a_runs_first_experiment(tmp_path, mlflow_db):
    import mlflow

    from pipelines.reporting.tracking import (
        EXPERIMENT_KIND,
        EXPERIMENT_KIND_TAG,
        PER_SAMPLE_TABLE_ARTIFACT,
        _ensure_experiment,
        per_sample_table,
    )

    uri = mlflow_db
    mlflow.set_tracking_uri(uri)
    experiment_id = _ensure_experiment(uri, "per-sample")
    assert mlflow.get_experiment(experiment_id).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    table = per_sample_table(*_per_sample_inputs())
    with mlflow.start_run() as run:
        mlflow.log_table(data=table, artifact_file=PER_SAMPLE_TABLE_ARTIFACT)
    loaded = mlflow.load_table(PER_SAMPLE_TABLE_ARTIFACT, run_ids=[run.info.run_id])
    assert list(loaded["question"]) == list(table["question"]) and list(loaded["CC"]) == list(table["CC"])


def test_logged_log_files_have_secret_values_masked(tmp_path, mlflow_db, monkeypatch):
    import mlflow

    from infra import secrets
    from pipelines.reporting.tracking import _log_logs

    monkeypatch.setattr(secrets, "_registered", set())  # this test's secret is gone afterwards
    secrets.register_secret("sk-planted-logs-0042")
    logs = tmp_path / "logs"
    (logs / "ray" / "serve").mkdir(parents=True)
    (logs / "console.log").write_text("INFO client ready, key sk-planted-logs-0042\n")
    (logs / "ray" / "serve" / "controller.log").write_text("deployed\n")
    mlflow.set_tracking_uri(mlflow_db)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "logs", artifact_location=(tmp_path / "artifacts").as_uri()))
    with mlflow.start_run() as run:
        _log_logs(mlflow, logs)
    local = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="logs",
                                                dst_path=str(tmp_path / "down"))
    assert (tmp_path / "down" / "logs" / "ray" / "serve" / "controller.log").read_text() == "deployed\n"
    text = (tmp_path / "down" / "logs" / "console.log").read_text()
    assert "sk-planted-logs-0042" not in text and "key ***" in text and local


def test_the_description_of_a_run_without_scores_points_at_the_failures():
    stats = {"systems": [], "metrics": [], "n_queries": 0, "per_metric": {}}
    note = run_description("prod", stats, "judge-x", "http://mlflow/summary.md")
    assert note.startswith("**prod**: no judgment has a score, so no statistics (judge `judge-x`)")
    assert "0 systems" not in note and note.endswith("(the run's artifact `summary.md`)")


def test_the_description_names_the_best_system_and_its_ties():
    block = {"means": {"A": 0.8, "B": 0.7, "C": 0.2},
             "pairwise": [{"a": "A", "b": "B", "significant": False},
                          {"a": "A", "b": "C", "significant": True}]}
    stats = {"systems": ["A", "B", "C"], "metrics": ["CC"], "n_queries": 4, "per_metric": {"CC": block}}
    note = run_description("demo", stats, "judge-x", None)
    assert "**demo**: 3 systems (A, B, C), 4 questions" in note and "- CC: A 0.800 (tied: B)" in note


def test_per_sample_table_names_the_questions_a_sequential_run_never_judged():
    from pipelines.reporting.tracking import per_sample_table
    from tasks.runtime.judge_loop import NOT_JUDGED

    queries, generations, judgments = _per_sample_inputs()
    second = queries["query_id"][1]
    table = per_sample_table(queries, generations, judgments[judgments["query_id"] != second])
    unjudged = table[table["query_id"] == second]
    assert len(unjudged) == 2 and (unjudged["judge_raw"] == "").all()
    assert unjudged["CC"].isna().all() and NOT_JUDGED in unjudged.iloc[0]["failures"]


def test_the_reason_a_question_was_not_judged_is_the_stopped_stages_policys():
    from pipelines.reporting.tracking import not_judged_reason
    from tasks.runtime.judge_loop import NOT_JUDGED

    stopped = {"judge_ccrs": {"not_judged": "not judged: the toy stopped"}, "reduce": {}, "track": None}
    assert not_judged_reason(stopped) == "not judged: the toy stopped"
    assert not_judged_reason({"judge_ccrs": {"batches": 3}}) == NOT_JUDGED
