"""The track stage: one MLflow run for every invocation, finished stages reused or not (a nightly history
exists even when nothing changed), logged by pipelines/reporting/tracking.py; then what the run's optional
parts add to
that MLflow run (`TrackPayload`s: the run extensions of pipelines/extensions/, passed in by the caller,
which may also write into the stage's folder). The stage's folder holds the ids of the latest MLflow run."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.runtime.layout import RunLayout
from tasks.runtime.stage import StageResult, code_version, run_stage, stage_key
from pipelines.reporting.tracking import MetricsContribution, log_pipeline_run

TRACK_STAGE = "track"


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
    started_at: float | None = None  # when the command started (epoch seconds): the MLflow run's start


@dataclass(frozen=True)
class TrackContext:
    """What a payload logs from: the run directory, the track stage's folder being written (`out_dir`,
    renamed into place when the stage ends), the run config as JSON data and the run's MLflow run."""

    run_dir: Path
    out_dir: Path
    config: dict
    tracking_uri: str
    run_id: str


@dataclass(frozen=True)
class TrackPayload:
    """What a caller adds to the run's MLflow run: `log` is called once the run is logged; `settings` (JSON
    data) and the modules of `code` enter the track stage's key."""

    name: str
    log: Callable[[TrackContext], None]
    settings: Any = None
    code: tuple[str, ...] = field(default_factory=tuple)


def track_code(payloads: Sequence[TrackPayload] = ()) -> str:
    """The code the track stage's key covers: this stage (MLflow logging included) and every payload's."""
    return code_version(__name__, *(module for payload in payloads for module in payload.code))


def run_track(run_dir: Path, record: RunRecord, reduce: StageResult, tracking_uri: str, experiment: str,
              payloads: Sequence[TrackPayload] = (),
              contributions: Sequence[MetricsContribution] = ()) -> StageResult:
    """Always runs (force): its key covers the tracking store, the payloads' settings, the reduce stage and
    the code of this stage and of the payloads. `contributions`: the run extensions' metrics of stats.json
    and their files, logged with the run."""
    settings = {payload.name: payload.settings for payload in payloads}
    key = stage_key(TRACK_STAGE, {"uri": tracking_uri, "experiment": experiment, "payloads": settings},
                    [reduce.key], track_code(payloads))

    def track(out_dir: Path) -> dict:
        tracked = _log_run(run_dir, record, reduce.out_dir, tracking_uri, experiment, contributions)
        context = TrackContext(run_dir, out_dir, record.config, tracking_uri, tracked.run_id)
        for payload in payloads:
            payload.log(context)
        return {"run_id": tracked.run_id, "experiment_id": tracked.experiment_id, "url": tracked.url,
                "tracking_uri": tracked.tracking_uri, "system_run_ids": tracked.system_run_ids}

    return run_stage(run_dir, TRACK_STAGE, key, track, force=True)


def _log_run(run_dir: Path, record: RunRecord, stats_dir: Path, tracking_uri: str, experiment: str,
             contributions: Sequence[MetricsContribution]):
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
        contributions=contributions,
        run_dir=run_dir,
        tags=record.tags,
        started_at=record.started_at,
    )
