"""Pipelines: run configs, the DAG of stages, the `ccrs` CLI, MLflow logging."""
