"""The track stage: one MLflow run for every invocation, finished stages reused or not (a nightly history
exists even when nothing changed), logged by tasks/tracking.py; with a goal tree, the run's GQM report
(tasks/gqm_report.py) in the stage's folder (track/gqm/) and under gqm/ of that MLflow run; with `probes:`,
the probe stage's report under probes/ of it. The stage's folder holds the ids of the latest MLflow run."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.gqm_report import log_to_mlflow, write_report
from tasks.layout import RunLayout
from tasks.stage import StageResult, code_version, run_stage, stage_key
from tasks.tracking import log_pipeline_run

TRACK_STAGE = "track"
GQM_SUBDIR = "gqm"


@dataclass(frozen=True)
class RunRecord:
    """What the track stage logs of one invocation, besides the reduce stage's statistics."""

    run_name: str
    config: dict  # the resolved run config, as JSON data
    provenance: dict
    tags: dict[str, str]
    queries_path: Path
    generations_path: Path
    judgments_paths: dict[str, Path]  # suite -> its judgments.parquet
    stage_summaries: dict
    retrieval_metrics: dict  # {} for a run of the user's outputs
    failures_path: Path | None = None


def run_track(run_dir: Path, record: RunRecord, reduce: StageResult, tracking_uri: str, experiment: str,
              gqm_goals: str | None = None) -> StageResult:
    """Always runs (force): its key covers the tracking store, the goal tree, the reduce stage and the code
    of this stage (MLflow logging and the GQM report included)."""
    key = stage_key(TRACK_STAGE, {"uri": tracking_uri, "experiment": experiment, "gqm_goals": gqm_goals},
                    [reduce.key], code_version(__name__))

    def track(out_dir: Path) -> dict:
        tracked = _log_run(run_dir, record, reduce.out_dir, tracking_uri, experiment)
        if record.config.get("probes"):
            _log_probes(run_dir, tracking_uri, tracked.run_id)
        _log_preflight(run_dir, record.config.get("judge", {}).get("preflight"), tracking_uri, tracked.run_id)
        if gqm_goals:
            report, files = write_report(run_dir, gqm_goals, out_dir / GQM_SUBDIR)
            log_to_mlflow(report, files, tracking_uri, tracked.run_id)
        return {"run_id": tracked.run_id, "experiment_id": tracked.experiment_id, "url": tracked.url,
                "tracking_uri": tracked.tracking_uri, "system_run_ids": tracked.system_run_ids}

    return run_stage(run_dir, TRACK_STAGE, key, track, force=True)


def _log_probes(run_dir: Path, tracking_uri: str, run_id: str) -> None:
    """The probe stage's report (`probes:` in the run config) under probes/ of the run's MLflow run."""
    from tasks.bias_probes import log_probes, logged_probe_files

    report, files = logged_probe_files(run_dir)
    if report is not None:
        log_probes(report, files, tracking_uri, run_id)


def _log_preflight(run_dir: Path, options: dict | None, tracking_uri: str, run_id: str) -> None:
    """The calibration gate's pass rates, decision and files (`judge.preflight`) on the run's MLflow run."""
    if options:
        from tasks.calibration import log_preflight

        log_preflight(run_dir, options, tracking_uri, run_id)


def _log_run(run_dir: Path, record: RunRecord, stats_dir: Path, tracking_uri: str, experiment: str):
    layout = RunLayout(run_dir)
    return log_pipeline_run(
        tracking_uri=tracking_uri,
        experiment=experiment,
        run_name=record.run_name,
        config=record.config,
        provenance=record.provenance,
        stats_dir=stats_dir,
        generations_path=record.generations_path,
        judgments_paths=record.judgments_paths,
        queries_path=record.queries_path,
        retrieval_metrics=record.retrieval_metrics,
        stage_summaries=record.stage_summaries,
        failures_path=record.failures_path,
        pending_marker=layout.track_pending,
        summary_path=layout.summary_md,
        logs_dir=layout.logs_dir,
        tags=record.tags,
    )
