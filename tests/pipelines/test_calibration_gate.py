"""The calibration gate in the commands (`judge.preflight`): `ccrs run` / `ccrs evaluate` exit 6 when it
stops a run, `ccrs nightly` reports status judge_calibration (6) on the run the pipeline logged, and on the
real CPU stack a threshold the 135M judge cannot meet stops `ccrs run` before its judge stage sends a
request."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from pipelines.config import DEFAULT_CONFIG
from tasks.calibration import STOP_EXIT_CODE, JudgeCalibrationStop
from tasks.runtime.layout import PREFLIGHT_STAGE, RunLayout

REPO = Path(__file__).resolve().parents[2]
LINE = "judge calibration 0.34 < 0.60: stopped before 20 judge calls"


def test_a_stopped_run_exits_6_with_its_line(tmp_path, monkeypatch, capsys):
    from pipelines.tools.run_outcome import run_guarded

    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray stays up

    def stopped():
        raise JudgeCalibrationStop(LINE, None, f"the judge's unit-test results are in "
                                               f"{RunLayout(tmp_path).preflight_dir}")

    assert run_guarded("ccrs run", RunLayout(tmp_path), stopped) == (STOP_EXIT_CODE, None) == (6, None)
    err = capsys.readouterr().err
    assert f"ccrs run: {LINE}" in err and str(RunLayout(tmp_path).preflight_dir) in err


def test_a_stopped_night_is_status_judge_calibration_on_the_run_the_pipeline_logged(tmp_path, mlflow_db,
                                                                                   monkeypatch):
    from mlflow.tracking import MlflowClient

    from pipelines import nightly_cmd
    from pipelines.reporting.tracking import log_failed_run

    uri = mlflow_db
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    logged = log_failed_run(tracking_uri=uri, experiment="ccrs-cpu-demo", run_name="stopped", error=LINE,
                            tags={"ccrs.judge_calibration": "stop"})

    def stops(config, outputs, started_at, *where):  # where: tracking URI, baseline
        raise JudgeCalibrationStop(LINE, logged)

    monkeypatch.setattr(nightly_cmd, "_run_night", stops)
    parser = argparse.ArgumentParser()
    nightly_cmd.add_arguments(parser)
    args = parser.parse_args(["--config", str(DEFAULT_CONFIG), "--out", str(tmp_path / "run")])
    assert nightly_cmd.night(args) == 6
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("ccrs-cpu-demo")
                                          .experiment_id])
    assert [run.info.run_id for run in runs] == [logged]  # tagged, not logged twice
    tags = runs[0].data.tags
    assert tags["regression.status"] == "judge_calibration" and tags["ccrs.nightly"] == "true"


# --- on the real CPU stack ---------------------------------------------------------------------------------

def _config(tmp_path: Path, llm_base_url: str, tests: Path, tracking_uri: str):
    """The demo config on 2 questions, two extractive readers over BM25 (2 systems, no embedding model to
    load), integer CCRS marks, and the gate at 1.0 over two unit tests (a correct answer, a correct
    refusal) with the smallest reply budgets: the subject is the stop, not the marks (a reply cut short is a
    failed judgment, which fails its condition: tasks/calibration.py check_test)."""
    from pipelines.config import load_config

    return load_config(DEFAULT_CONFIG, {
        "name": "preflight-stop", "run_dir": str(tmp_path / "run"), "gqm_goals": None, "dataset.limit": 2,
        "readers": [{"name": "extractive-top1", "kind": "extractive", "max_sentences": 1},
                    {"name": "extractive-top3", "kind": "extractive", "max_sentences": 3}],
        "retrieval.retrievers": ["bm25"],
        "stats.hypotheses": None, "serving": {"profile": "external", "base_url": llm_base_url},
        "mlflow.tracking_uri": tracking_uri, "mlflow.experiment": "ccrs-preflight-stop",
        "judge.scoring": "integer", "judge.max_reasks": 0,
        "judge.grouse": {"max_tokens": 32, "faithfulness_max_tokens": 32},
        "judge.preflight": {"tests": str(tests), "min_pass_rate": 1.0, "on_fail": "stop"},
    })


@pytest.mark.llm
def test_a_threshold_the_135m_judge_cannot_meet_stops_ccrs_run_before_the_judge_stage(
        tmp_path, llm_endpoint, mlflow_server, monkeypatch, capsys):
    """`ccrs run`'s own path (run_guarded around run_pipeline) in this process, on the session's model
    server and MLflow server: exit 6, the line, the preflight kept, no judge stage."""
    from mlflow.tracking import MlflowClient

    from pipelines.pipeline import run_pipeline
    from pipelines.tools.run_outcome import run_guarded

    tests = tmp_path / "two-tests.jsonl"
    tests.write_text("".join((REPO / "data" / "grouse-bioasq" / "train.jsonl").read_text()
                             .splitlines(keepends=True)[:2]))
    config = _config(tmp_path, llm_endpoint.base_url, tests, mlflow_server)
    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(tmp_path / "cache"))  # the preflight is asked, not cached
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray serves the model
    layout = RunLayout(config.resolved_run_dir())
    code, result = run_guarded("ccrs run", layout, lambda: run_pipeline(config, keep_serving=True))
    printed = capsys.readouterr()
    assert (code, result) == (6, None), printed.err[-3000:]
    # 2 questions x 2 systems x 5 CCRS metrics: the judge stage's planned calls
    stopped = re.search(r"ccrs run: (judge calibration (\d\.\d\d) < 1\.00: stopped before 20 judge calls)",
                        printed.err)
    assert stopped, printed.err[-3000:]

    summary = json.loads((layout.preflight_dir / "_STAGE.json").read_text())["summary"]
    assert summary["tests"] == 2 and summary["judge_calls"] >= 8 and summary["cache_hits"] == 0
    assert f"{summary['pass_rate_overall']:.2f}" == stopped.group(2)
    assert "judge preflight: 2 GroUSE unit tests" in printed.out
    assert (layout.stage_dir("generate") / "_STAGE.json").exists()  # finished stages are kept
    # the judge stage never started: no output, no checkpoint, no line of it on the console
    assert not layout.judge_dir("ccrs").exists() and not list(layout.root.glob(".judge_ccrs*"))
    assert "judge ccrs:" not in printed.out

    client = MlflowClient(mlflow_server)
    (run,) = client.search_runs([client.get_experiment_by_name("ccrs-preflight-stop").experiment_id],
                                "tags.`ccrs.config_name` = 'preflight-stop'")
    assert run.info.status == "FAILED" and run.data.tags["ccrs.judge_calibration"] == "stop"
    assert run.data.tags["ccrs.error"] == stopped.group(1)
    assert run.data.metrics["preflight_pass_rate_overall"] == pytest.approx(summary["pass_rate_overall"])
    assert f"{PREFLIGHT_STAGE}/results.json" in {f.path for f in client.list_artifacts(run.info.run_id,
                                                                                        PREFLIGHT_STAGE)}
