"""The track stage (tasks/track.py): one MLflow run per call, the GQM report beside it, its key covering the
MLflow logging and GQM code."""
import json
import shutil

import pandas as pd

from pipelines.tools.gqm_report import DEFAULT_GOALS
from tasks.layout import RunLayout
from tasks.reduce import run_reduce
from tasks.stage import code_version
from tasks.track import RunRecord, run_track
from tests.tasks.test_gqm_report import make_run

GOALS = str(DEFAULT_GOALS)


def _record(run_dir, tags):
    layout = RunLayout(run_dir)
    scores = pd.read_parquet(layout.scores("ccrs"))
    judgments = scores.assign(status="ok", raw="r", reason=None)
    judgments.to_parquet(layout.judgments("ccrs"))
    generations = pd.read_parquet(run_dir / "generate" / "generations.parquet")
    generations = generations.assign(chunk_ids=[["c1"]] * len(generations), status="ok", error=None,
                                     tagged=True)
    generations.to_parquet(run_dir / "generate" / "generations.parquet")
    return RunRecord(run_name="track-test", config={"name": "t", "dataset": {"path": str(run_dir)}},
                     provenance={"git_commit": "abc"}, tags=tags,
                     queries_path=run_dir / "retrieve" / "queries.parquet",
                     generations_path=run_dir / "generate" / "generations.parquet",
                     judgments_paths={"ccrs": layout.judgments("ccrs")},
                     stage_summaries={"judge_ccrs": {"judgments": len(judgments)}}, retrieval_metrics={})


def test_track_logs_a_run_with_its_tags_and_the_gqm_report_every_time(tmp_path):
    from mlflow.tracking import MlflowClient

    run_dir = make_run(tmp_path / "run")
    reduce = run_reduce(run_dir, [RunLayout(run_dir).scores("ccrs")], b=50, seed=0, alpha=0.05)
    record = _record(run_dir, {"ccrs.config_name": "t"})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = run_track(run_dir, record, reduce, uri, "track-test", GOALS)
    second = run_track(run_dir, record, reduce, uri, "track-test", GOALS)
    assert first.summary["run_id"] != second.summary["run_id"] and not second.reused
    assert json.loads((RunLayout(run_dir).track_dir / "gqm" / "gqm_report.json").read_text())["systems"]
    client = MlflowClient(uri)
    run = client.get_run(second.summary["run_id"])
    assert run.data.tags["ccrs.config_name"] == "t"
    assert {a.path for a in client.list_artifacts(run.info.run_id, "gqm")} >= {"gqm/gqm_report.json"}
    assert not RunLayout(run_dir).track_pending.exists()


def test_the_track_stage_key_covers_the_mlflow_logging_and_the_gqm_report(tmp_path, monkeypatch):
    from tasks import stage

    before = code_version("tasks.track")
    found = stage._module_file
    for module in ("tasks.gqm_report", "tasks.tracking"):
        edited = tmp_path / f"{module}.py"
        shutil.copy(found(module), edited)
        edited.write_text(edited.read_text() + "\n# an edit\n")
        monkeypatch.setattr(stage, "_module_file",
                            lambda name, m=module, e=edited: e if name == m else found(name))
        assert code_version("tasks.track") != before
        monkeypatch.setattr(stage, "_module_file", found)
