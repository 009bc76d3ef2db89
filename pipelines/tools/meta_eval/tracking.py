"""A meta-evaluation logged to MLflow: one run, metrics = pass rates, artifacts = its files."""
from __future__ import annotations

from pathlib import Path

from pipelines.resources import REPO_ROOT
from pipelines.tools.meta_eval.run import MetaEvalResult

EXPERIMENT = "ccrs-meta-eval"


def log_meta_eval(result: MetaEvalResult, paths: dict[str, Path], tracking_uri: str, params: dict,
                  experiment: str = EXPERIMENT) -> str:
    import mlflow

    from pipelines.reporting.tracking import git_commit, log_params_redacted, open_experiment

    open_experiment(tracking_uri, experiment)
    with mlflow.start_run(run_name=f"meta-eval-{result.judge}-{result.model}") as run:
        mlflow.set_tags({"ccrs.kind": "meta-eval", "judge": result.judge, "judge_model": result.model,
                         "git_commit": git_commit(REPO_ROOT)})
        log_params_redacted(mlflow, params)
        metrics = {f"pass_rate_{k}": v for k, v in result.pass_rates.items()}
        for protocol, rates in result.protocol_pass_rates.items():
            metrics.update({f"{protocol.replace('-', '_')}_pass_rate_{k}": v for k, v in rates.items()})
        for protocol, modes in result.failure_modes.items():
            metrics.update({f"{protocol.replace('-', '_')}_{mode}_tests_all_passed": row["tests_all_passed"]
                            for mode, row in modes.items() if row["tests_all_passed"] is not None})
        if result.ccrs and result.ccrs.get("pass_rate") is not None:
            metrics["ccrs_calibration_pass_rate"] = result.ccrs["pass_rate"]
            metrics.update({f"ccrs_calibration_{k}": v for k, v in result.ccrs["per_metric"].items()})
        metrics["seconds"] = result.seconds
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        for path in paths.values():
            mlflow.log_artifact(str(path), artifact_path="meta_eval")
        return run.info.run_id
