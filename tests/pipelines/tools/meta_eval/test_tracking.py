"""A meta-evaluation's MLflow run (pipelines/tools/meta_eval/tracking.py)."""
import pytest

from pipelines.tools.meta_eval.run import write_outputs
from pipelines.tools.meta_eval.tracking import log_meta_eval
from tests.conftest import copy_empty_mlflow_db
from tests.pipelines.tools.meta_eval.test_run import result_of
from tests.tasks.test_calibration import PERFECT_T1, TRAIN


def test_mlflow_run_holds_pass_rates_and_artifacts(tmp_path, monkeypatch, empty_mlflow_db):
    import mlflow

    monkeypatch.chdir(tmp_path)
    result = result_of(TRAIN[:2], {1: PERFECT_T1, 2: {"positive_acceptance": 1, "negative_rejection": 1}})
    paths = write_outputs(result, TRAIN, tmp_path / "out")
    uri = copy_empty_mlflow_db(empty_mlflow_db, tmp_path / "mlflow.db")  # a new store, made from tmp_path
    run_id = log_meta_eval(result, paths, uri, {"judge": "grouse"})
    run = mlflow.tracking.MlflowClient(uri).get_run(run_id)
    assert run.data.metrics["pass_rate_overall"] == pytest.approx(1.0)
    assert run.data.tags["ccrs.kind"] == "meta-eval"
    names = {f.path for f in mlflow.tracking.MlflowClient(uri).list_artifacts(run_id, "meta_eval")}
    assert {"meta_eval/results.json", "meta_eval/matrix.png", "meta_eval/failures.jsonl"} <= names
