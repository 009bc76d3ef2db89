"""A Ray head started as docs/cluster.md and the README say (`ray start --head --num-cpus=5`, Ray 2.60's
token authentication left on), on loopback: `ray job submit --working-dir . -- ccrs run --config ...`
authenticated as they say (the LLM endpoint is the session's real CPU stack), and a Serve app too large
for that head, which fails with one line at its ready_timeout_s instead of waiting forever."""
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.pipelines.conftest import free_port

pytestmark = [pytest.mark.llm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_head_has_token_authentication_on(ray_head):
    mode = httpx.get(f"{ray_head.dashboard}/api/authentication_mode", timeout=10).json()
    assert mode == {"authentication_mode": "token"}
    assert httpx.get(f"{ray_head.dashboard}/api/jobs/", timeout=10).status_code == 401  # no token


def test_ray_job_submit_runs_the_pipeline(ray_head, llm_endpoint, mlflow_server, tmp_path):
    run_dir = tmp_path / "job-run"
    config = yaml.safe_load((ROOT / "configs" / "cpu-demo.yaml").read_text())
    config.update(name="ray-job", run_dir=str(run_dir))
    config["dataset"]["limit"] = 2
    config["serving"] = {"profile": "external", "base_url": llm_endpoint.base_url}
    config["stats"]["b"] = 500
    config["judge"]["scoring"] = "integer"  # CI time: the demo's expected marks cost 3x (tested in e2e)
    # the subject is the submission, not the systems: BM25 (kNN embeds the corpus, ~35 s), two extractive
    # readers and one metric; the full demo runs in the e2e fixture
    config["retrieval"].update({"retrievers": ["bm25"], "top_k": 3})
    config["readers"] = [reader for reader in config["readers"] if reader["kind"] == "extractive"]
    config["judge"]["ccrs"]["metrics"] = ["QR"]
    config["mlflow"] = {"tracking_uri": mlflow_server, "experiment": "ccrs-ray-job"}
    config_path = tmp_path / "job.yaml"
    config_path.write_text(yaml.safe_dump(config))
    submit = [str(BIN / "ray"), "job", "submit", "--address", ray_head.dashboard, "--working-dir", ".",
              "--runtime-env-json", json.dumps({"env_vars": {"HF_HUB_OFFLINE": "1"}}),
              "--", "ccrs", "run", "--config", str(config_path)]
    for _ in range(20):  # the head's job agent registers a little after the dashboard answers
        finished = subprocess.run(submit, cwd=ROOT, env=ray_head.env, capture_output=True, text=True,
                                  timeout=900)
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


def test_a_serve_app_too_large_for_the_head_fails_in_one_line_at_ready_timeout(ray_head, tmp_path):
    """`ccrs serve up`, a driver of the head, deploys the CPU profile's app with an engine of 5 CPUs: its
    placement group (the replica actor's CPU + 5) is larger than the head's 5. The app waits, the command
    says for what (the pending demand, the free CPUs: 4 of 5, the ingress holds one), fails with one
    line at ready_timeout_s and removes the app again."""
    from infra.models import models_dir, prepare_local_models
    from infra.serving import ServingConfig

    # CI time: the wait is told after wait_report_after_s (the product's 20 s made 1 s), so the ready timeout
    # is short; the replica the head never places is killed 1 s after the app's deletion (Serve's grace
    # period, 20 s, made 1 s)
    serving = ServingConfig.for_profile("cpu", port=free_port(), ready_timeout_s=12, wait_report_after_s=1)
    serving.models[0].cpus_per_replica = 5
    serving.models[0].graceful_shutdown_timeout_s = 1
    config_path = tmp_path / "too-large.yaml"
    config_path.write_text(yaml.safe_dump(serving.model_dump(mode="json")))
    # a CCRS_HOME of its own (logs, no head recorded), with the models `ccrs setup` prepared: converting the
    # GGUF again there took ~20 s of the command
    prepare_local_models()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "models").symlink_to(models_dir(), target_is_directory=True)
    env = {**ray_head.env, "RAY_ADDRESS": ray_head.gcs, "CCRS_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(BIN / "ccrs"), "serve", "up", "--config", str(config_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "not ready within ready_timeout_s=12s: waiting for resources" in error, error
    assert "pending demand: placement groups 1 x {CPU: 6}; free: CPU 4 of 5" in error, error
    assert "this app asks for 7 logical CPUs" in error  # 1 + 5 for the replica, 1 for the ingress
    assert "serving: waiting for resources: pending demand:" in done.stderr
    assert "Traceback" not in done.stderr
    token = {"Authorization": f"Bearer {ray_head.env['RAY_AUTH_TOKEN']}"}
    apps = httpx.get(f"{ray_head.dashboard}/api/serve/applications/", headers=token, timeout=30).json()
    assert serving.app_name not in (apps.get("applications") or {})
