"""Browse the results as a user would: the MLflow UI served on loopback, rendered by headless Chromium
(Debian's package). Checks the six systems with their CCRS metrics and the parent run's plots, and saves
screenshots under test-artifacts/."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.llm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=30000", "--window-size=1600,1100"]


def _render(url: str, tmp_path: Path, screenshot: Path | None = None) -> str:
    profile = tmp_path / f"chromium-{len(list(tmp_path.iterdir()))}"
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}"]
    if screenshot:
        subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True, timeout=180,
                       check=True)
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=180,
                         check=True).stdout
    text = re.sub(r"<style.*?</style>|<script.*?</script>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


@pytest.mark.skipif(CHROMIUM is None,
                    reason="headless chromium not installed (make test installs it as root)")
def test_mlflow_ui_lists_systems_metrics_and_plots(e2e_run, tmp_path):
    config, result = e2e_run
    client = MlflowClient(config.mlflow.tracking_uri)
    experiment_id = result.tracked["experiment_id"]
    parent_id = result.tracked["run_id"]
    children = result.tracked["system_run_ids"]
    SHOTS.mkdir(exist_ok=True)
    base = config.mlflow.tracking_uri.rstrip("/")

    runs_page = _render(f"{base}/#/experiments/{experiment_id}/runs", tmp_path, SHOTS / "mlflow-runs.png")
    assert client.get_run(parent_id).info.run_name in runs_page

    ids = ",".join(f'"{run_id}"' for run_id in children.values())
    compare = _render(f"{base}/#/compare-runs?runs=[{ids}]&experiments=[\"{experiment_id}\"]", tmp_path,
                      SHOTS / "mlflow-compare-systems.png")
    for label in children:
        assert f"system-{label}" in compare
    for metric in ("CC", "QR", "ID", "AC", "IR"):  # a mean, or at least its failure count
        assert metric in compare, metric

    artifacts = _render(f"{base}/#/experiments/{experiment_id}/runs/{parent_id}/artifacts", tmp_path,
                        SHOTS / "mlflow-parent-artifacts.png")
    assert "plots" in artifacts and "stats" in artifacts and "summary.md" in artifacts
    assert (SHOTS / "mlflow-compare-systems.png").stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None,
                    reason="headless chromium not installed (make test installs it as root)")
def test_mlflow_ui_opens_on_the_runs_and_shows_the_per_sample_table(e2e_run, tmp_path):
    """The printed run link opens the model-training view (runs, not the empty GenAI overview), and the
    per-sample table is a table in the run's Artifacts view, with no download."""
    import pandas as pd

    from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT, run_url

    config, result = e2e_run
    tracked = result.tracked
    SHOTS.mkdir(exist_ok=True)
    base = config.mlflow.tracking_uri.rstrip("/")
    experiment = _render(f"{base}/#/experiments/{tracked['experiment_id']}?workflowType=machine_learning",
                         tmp_path, SHOTS / "mlflow-experiment-runs.png")
    assert "Runs" in experiment and "No data available" not in experiment
    assert MlflowClient(config.mlflow.tracking_uri).get_run(tracked["run_id"]).info.run_name in experiment

    url = run_url(tracked["tracking_uri"], tracked["experiment_id"], tracked["run_id"],
                  PER_SAMPLE_TABLE_ARTIFACT)
    page = _render(url, tmp_path, SHOTS / "mlflow-per-sample-table.png")
    generations = pd.read_parquet(result.run_dir / "generate" / "generations.parquet")
    assert "View as table" in page
    for column in ("question", "system", "answer", "chunk_ids"):
        assert column in page, column
    assert generations["system"].iloc[0] in page
    assert (SHOTS / "mlflow-per-sample-table.png").stat().st_size > 10_000
