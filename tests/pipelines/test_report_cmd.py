import json

from pipelines.cli import main
from tests.pipelines.reporting.test_gqm import make_run


def test_report_command_writes_and_logs_to_mlflow(tmp_path, mlflow_db, capsys):
    import mlflow

    run = make_run(tmp_path / "run")
    uri = mlflow_db
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("gqm-test", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(exp).info.run_id
    rc = main(["report", str(run), "--out", str(tmp_path / "out"), "--tracking-uri", uri, "--run", run_id])
    assert rc == 0
    out = capsys.readouterr().out
    assert "bm25+r: overall" in out
    report = json.loads((tmp_path / "out" / "gqm_report.json").read_text())
    assert report["systems"]["bm25+r"]["all"]["overall"]["score"] is not None
    names = {a.path for a in client.list_artifacts(run_id, "gqm")}
    assert names == {"gqm/gqm_report.json", "gqm/radar.png", "gqm/heatmap_goals.png",
                     "gqm/heatmap_metrics.png", "gqm/components.png"}
    metrics = client.get_run(run_id).data.metrics
    assert "gqm/bm25+r/overall".replace("+", "_") in metrics
    assert "gqm/bm25_r/category/generation" in metrics  # the thesis' component view, its metric categories


def test_report_command_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no judge_<suite>/scores.parquet" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("goals: []\n")
    make_run(tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "--goals", str(bad)]) == 2
    assert "invalid goal tree" in capsys.readouterr().err


def test_report_prints_the_thesis_tree_by_name(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert main(["report", str(run), "--goals", "thesis", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("goal tree gqm-thesis\n") and "gqm_factual_consistency: Factual Consistency" in out
    assert "P@k" not in out  # a proxy of the hybrid tree, not a thesis metric
