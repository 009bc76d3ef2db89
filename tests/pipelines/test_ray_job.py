"""`ray job submit --working-dir . -- ccrs run --config ...` against a Ray head node started by the test
on loopback, as a user submits to a cluster (the LLM endpoint is the session's real CPU stack)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.pipelines.conftest import free_port, wait_http

pytestmark = [pytest.mark.llm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def ray_head(tmp_path):
    """A separate Ray head on loopback (`ray start --head --block` in its own process group, stopped by
    killing that group: `ray stop` would kill every Ray on the machine, the session's LLM stack included).
    Token auth is off because it is loopback only and ~/.ray/auth_token is shared by every local cluster."""
    dashboard_port = free_port()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    temp_dir = Path("/tmp") / f"ccrs-ray-{dashboard_port}"
    start = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
             f"--port={free_port()}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
             "--num-cpus=8", "--disable-usage-stats", f"--temp-dir={temp_dir}",
             # Every agent port explicit: the defaults (e.g. 52365) are taken by the session's own Ray.
             f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
             f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]
    head = subprocess.Popen(start, env=env, stdout=open(tmp_path / "ray_head.log", "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dashboard_port}"
    try:
        wait_http(f"{address}/api/version", 180)
        yield address, env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


def test_ray_job_submit_runs_the_pipeline(ray_head, llm_endpoint, mlflow_server, tmp_path):
    address, env = ray_head
    run_dir = tmp_path / "job-run"
    config = yaml.safe_load((ROOT / "configs" / "cpu-demo.yaml").read_text())
    config.update(name="ray-job", run_dir=str(run_dir))
    config["dataset"]["limit"] = 2
    config["serving"] = {"profile": "external", "base_url": llm_endpoint.base_url}
    config["stats"]["b"] = 500
    config["judge"]["scoring"] = "integer"  # CI time: the demo's expected marks cost 3x (tested in e2e)
    config["mlflow"] = {"tracking_uri": mlflow_server, "experiment": "ccrs-ray-job"}
    config_path = tmp_path / "job.yaml"
    config_path.write_text(yaml.safe_dump(config))
    submit = [str(BIN / "ray"), "job", "submit", "--address", address, "--working-dir", ".",
              "--runtime-env-json", json.dumps({"env_vars": {"HF_HUB_OFFLINE": "1"}}),
              "--", "ccrs", "run", "--config", str(config_path)]
    for _ in range(20):  # the head's job agent registers a little after the dashboard answers
        finished = subprocess.run(submit, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        if "No available agent" not in finished.stderr:
            break
        time.sleep(3)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    assert "MLflow run:" in finished.stdout
    assert (run_dir / "reduce" / "stats.json").exists()
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("ccrs-ray-job")
    runs = client.search_runs([experiment.experiment_id], "tags.`ccrs.kind` = 'pipeline'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
