"""`ccrs show`: a run directory's verdict, the same rebuilt for an older run, and one fetched from MLflow."""
import mlflow

from pipelines.cli import main
from pipelines.reporting.verdict import write_summary
from tests.pipelines.reporting.test_verdict import make_judged_run


def test_show_prints_the_verdict_of_a_run_directory_and_of_an_mlflow_run(tmp_path, mlflow_db, capsys,
                                                                         monkeypatch):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path / "home"))  # a run id's lookup logs there
    layout = make_judged_run(tmp_path / "run")
    assert main(["show", str(layout.root), "--markdown"]) == 0  # no summary.md yet: rebuilt from the files
    rebuilt = capsys.readouterr().out
    assert rebuilt == write_summary(layout.root).read_text()
    assert main(["show", str(layout.root)]) == 0
    rendered = capsys.readouterr().out
    assert "Verdict: planted" in rendered and "Means, 95% CIs and HSD groups" in rendered
    assert "| CC |" not in rendered and "smollm2-135m-instruct" in rendered  # tables are drawn

    uri = mlflow_db
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("show", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.log_artifact(run_id, str(layout.summary_md))
    assert main(["show", run_id, "--tracking-uri", uri, "--markdown"]) == 0
    assert capsys.readouterr().out == rebuilt


def test_show_names_what_is_missing(tmp_path, mlflow_db, capsys, monkeypatch):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path / "home"))
    (tmp_path / "empty").mkdir()
    assert main(["show", str(tmp_path / "empty")]) == 2
    assert "did not reach the statistics" in capsys.readouterr().err
    uri = mlflow_db
    mlflow.MlflowClient(uri).search_experiments()  # creates the store
    assert main(["show", "0123456789abcdef", "--tracking-uri", uri]) == 2
    assert "has no run with that id" in capsys.readouterr().err
