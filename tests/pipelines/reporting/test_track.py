"""The track stage (pipelines/reporting/track.py): one MLflow run per call, the GQM report beside it (the
`gqm_goals`
run extension's payload), its key covering the MLflow logging and GQM code."""
import json
import shutil

import pandas as pd

from judges.suite import metric_order, suite_membership
from pipelines.extensions import track_payloads
from pipelines.tools.gqm_report import DEFAULT_GOALS
from tasks.runtime.layout import RunLayout
from tasks.reduce import run_reduce
from pipelines.reporting.track import RunRecord, run_track, track_code
from tests.pipelines.reporting.test_gqm import make_run

GOALS = track_payloads({"gqm_goals": str(DEFAULT_GOALS)})  # what the pipeline passes for `gqm_goals: FILE`


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


def test_track_logs_a_run_with_its_tags_and_the_gqm_report_every_time(tmp_path, mlflow_db):
    from mlflow.tracking import MlflowClient

    run_dir = make_run(tmp_path / "run")
    reduce = run_reduce(run_dir, [RunLayout(run_dir).scores("ccrs")], b=50, seed=0, alpha=0.05,
                        metric_order=metric_order(), suites=suite_membership())
    record = _record(run_dir, {"ccrs.config_name": "t"})
    uri = mlflow_db
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
    from tasks.runtime import stage

    before = track_code(GOALS)
    found = stage._module_file
    for module in ("pipelines.reporting.gqm", "pipelines.reporting.tracking"):
        edited = tmp_path / f"{module}.py"
        shutil.copy(found(module), edited)
        edited.write_text(edited.read_text() + "\n# an edit\n")
        monkeypatch.setattr(stage, "_module_file",
                            lambda name, m=module, e=edited: e if name == m else found(name))
        assert track_code(GOALS) != before
        monkeypatch.setattr(stage, "_module_file", found)


def test_the_mlflow_run_spans_the_command_and_its_description_is_the_verdicts_headline(tmp_path, mlflow_db):
    """The run starts when the command started (RunRecord.started_at) and ends when it is logged, so that
    the UI's Duration is the command's; its Description (mlflow.note.content) is the verdict's headline,
    and `ccrs nightly`'s gate outcome goes into it before the link to summary.md."""
    import dataclasses
    import time

    from mlflow.tracking import MlflowClient

    from pipelines.reporting.tracking import GATE_PREFIX, NOTE_TAG, set_gate_status

    run_dir = make_run(tmp_path / "run")
    layout = RunLayout(run_dir)
    layout.summary_md.write_text("# Verdict: t\n")
    reduce = run_reduce(run_dir, [layout.scores("ccrs")], b=50, seed=0, alpha=0.05,
                        metric_order=metric_order(), suites=suite_membership())
    started_at = time.time() - 3600  # the command began an hour before its track stage
    record = _record(run_dir, {"ccrs.config_name": "t"})
    record = dataclasses.replace(record, config={**record.config, "judge": {"model": "judge-x"}},
                                 started_at=started_at)
    uri = mlflow_db
    tracked = run_track(run_dir, record, reduce, uri, "track-test").summary
    client = MlflowClient(uri)
    run = client.get_run(tracked["run_id"])
    assert run.info.start_time == int(started_at * 1000) and run.info.status == "FINISHED"
    assert run.info.end_time >= run.info.start_time + 3600 * 1000
    assert run.data.tags["mlflow.user"] and run.data.tags["ccrs.config_name"] == "t"

    stats = json.loads((reduce.out_dir / "stats.json").read_text())
    note = run.data.tags[NOTE_TAG]
    assert note.startswith("**track-test**: 2 systems (bm25+r, knn+r), 8 questions, judge `judge-x`.")
    for metric, block in stats["per_metric"].items():
        best = max(block["means"], key=block["means"].get)
        assert f"- {metric}: {best} {block['means'][best]:.3f}" in note
    link = f"/#/experiments/{tracked['experiment_id']}/runs/{run.info.run_id}/artifacts/summary.md"
    assert note.endswith(")") and link in note.splitlines()[-1]

    set_gate_status(uri, run.info.run_id, f"{GATE_PREFIX} **baseline**")
    set_gate_status(uri, run.info.run_id, f"{GATE_PREFIX} **regression** against run r0: bm25+r/CC")
    gated = client.get_run(run.info.run_id).data.tags[NOTE_TAG].split("\n\n")
    assert gated[:-2] == note.split("\n\n")[:-1] and gated[-1] == note.split("\n\n")[-1]
    assert gated[-2] == f"{GATE_PREFIX} **regression** against run r0: bm25+r/CC"
