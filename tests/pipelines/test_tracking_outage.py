"""MLflow going away during a real pipeline run: before the track stage, and in the middle of logging.
The error names the service and its address, every finished stage stays on disk, and the next run (server
back on the same address) reuses them all and logs a complete MLflow run; a half-logged run is marked
FAILED and tagged superseded.

The run is the session's e2e run (`e2e_run`) again, in a copy of its folder without the track stage: its
retrieval, generation, judging, probes and statistics are reused, so that what runs is what is tested,
the tracking (the subject here), against a server of the test's own that it stops."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.runtime.layout import RunLayout
from tests.conftest import copy_empty_mlflow_db
from tests.pipelines.conftest import E2E_PROBES, MLFLOW_SERVER_ENV, e2e_config, free_port, wait_http

pytestmark = pytest.mark.llm


class MlflowServer:
    """`mlflow server` on loopback with a SQLite backend; stop() and start() keep the address and data."""

    def __init__(self, root: Path):
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                   "--artifacts-destination", str(self.root / "artifacts"), "--workers", "1"]
        with open(self.root / "server.log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **MLFLOW_SERVER_ENV}, start_new_session=True)
        wait_http(f"{self.url}/health", 180)

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def mlflow_outage_server(tmp_path, empty_mlflow_db):
    server = MlflowServer(tmp_path / "mlflow")
    server.root.mkdir()
    # its new store: a copy of the session's empty one, the Default experiment's artifacts proxied as the
    # server makes it (mlflow-artifacts:/0)
    copy_empty_mlflow_db(empty_mlflow_db, server.root / "mlflow.db", "mlflow-artifacts:/")
    try:  # stopped even when it never answered
        server.start()
        yield server
    finally:
        server.stop()


def _untracked_copy_of(run_dir: Path, into: Path) -> Path:
    """The finished run's folder without what tracking leaves (its track stage) and without the Ray logs
    it copied (each run copies them again)."""
    ray_logs = RunLayout(run_dir).ray_logs_dir
    shutil.copytree(run_dir, into, ignore=lambda folder, names: [ray_logs.name]
                    if Path(folder) == ray_logs.parent else [])
    layout = RunLayout(into)
    shutil.rmtree(layout.track_dir)
    layout.track_pending.unlink(missing_ok=True)
    return into


@pytest.mark.parametrize("when", ["before_tracking", "while_logging"])
def test_mlflow_down_mid_run_keeps_results_and_the_next_run_logs_them(
        when, tmp_path, monkeypatch, llm_endpoint, e2e_run, mlflow_outage_server):
    import mlflow
    from mlflow.tracking import MlflowClient

    import tasks.reduce
    import pipelines.reporting.tracking
    from pipelines.pipeline import run_pipeline
    from pipelines.reporting.tracking import TrackingError

    server = mlflow_outage_server
    run_dir = _untracked_copy_of(e2e_run[1].run_dir, tmp_path / "run")
    config = e2e_config(run_dir, llm_endpoint.base_url, server.url, experiment="ccrs-outage",
                        overrides={"probes": E2E_PROBES})
    if when == "before_tracking":
        real_reduce = tasks.reduce.run_reduce

        def reduce_then_outage(*args, **kwargs):
            result = real_reduce(*args, **kwargs)
            server.stop()
            return result

        monkeypatch.setattr(tasks.reduce, "run_reduce", reduce_then_outage)
    else:
        real_artifacts = pipelines.reporting.tracking._log_artifacts

        def outage_while_logging(*args, **kwargs):
            server.stop()
            return real_artifacts(*args, **kwargs)

        monkeypatch.setattr(pipelines.reporting.tracking, "_log_artifacts", outage_while_logging)

    with pytest.raises(TrackingError) as failure:
        run_pipeline(config, keep_serving=True)
    assert server.url in str(failure.value) and "MLflow" in str(failure.value)
    assert config.resolved_run_dir() == run_dir
    for stage in ("generate", RunLayout.judge_stage("ccrs"), "reduce"):
        assert (run_dir / stage / "_STAGE.json").exists()
    assert (run_dir / "failures.json").exists() and not (run_dir / "track").exists()
    pending = run_dir / ".track.pending"
    assert pending.exists() == (when == "while_logging")
    half_logged = pending.read_text() if pending.exists() else None

    monkeypatch.undo()
    server.start()
    result = run_pipeline(config, keep_serving=True)
    assert all(stage["reused"] for name, stage in result.stages.items())
    client = MlflowClient(server.url)
    run = client.get_run(result.tracked["run_id"])
    assert run.info.status == "FINISHED" and "stats/stats.json" in {
        a.path for a in client.list_artifacts(run.info.run_id, "stats")}
    assert run.data.metrics["failures.judge_ccrs.failed"] >= 0
    if half_logged:
        old = client.get_run(half_logged)
        assert old.info.status == "FAILED" and old.data.tags["ccrs.superseded"] == "true"
        assert not pending.exists()
    assert mlflow.active_run() is None
