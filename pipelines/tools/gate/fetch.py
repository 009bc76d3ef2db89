"""The nightly gate's side that talks to MLflow: which runs, the run and its baseline, what each logged
(judgments, answers, stats.json, else the run's own folder on this machine), the outcome written back, and
a baseline marked or accepted on purpose.

Which baseline: `previous` is the most recent earlier run of the same series (tag `ccrs.series`, the
experiment unless `--series` names one; a run logged before series tags by its config name,
`ccrs.config_name`), not ad hoc (`ccrs.adhoc`), that was accepted (`regression.status` pass, baseline or
accepted), or the first such run; `RUN_ID` and `tag:NAME` (the run tagged `ccrs.baseline=NAME`) name one."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT, attach
from pipelines.tools.gate.decide import ACCEPTED, RegressionError, scored
from tasks.runtime.judge_loop import Baseline
from tasks.runtime.layout import RunLayout
from tasks.runtime.stage import read_manifest

JUDGMENTS_ARTIFACT = "samples/judgments.parquet"
STATS_ARTIFACT = "stats/stats.json"
# an MLflow table, as the per-sample table (pipelines/reporting/tracking.py)
MOVES_ARTIFACT = "regression/moves.json"
SUMMARY_MARKDOWN, SUMMARY_JSON = "regression/summary.md", "regression/summary.json"
SERIES_TAG = "ccrs.series"  # the series a run belongs to (pipelines/pipeline.py run_tags_of)


def connect(tracking_uri: str):
    """The MLflow client of the gate's store (the fluent API pointed at it too, for its tables)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    return MlflowClient(tracking_uri)


# --- which runs ---------------------------------------------------------------------------------------------

def pipeline_runs(client, experiment_name: str) -> list:
    """Finished pipeline runs of the experiment, newest first."""
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        raise RegressionError(f"no MLflow experiment named {experiment_name!r}")
    return client.search_runs(
        [experiment.experiment_id], "tags.`ccrs.kind` = 'pipeline' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=1000,
    )


def pick_run(runs: list, run: str):
    if run == "latest":
        if not runs:
            raise RegressionError("the experiment has no finished pipeline run")
        return runs[0]
    found = [r for r in runs if r.info.run_id == run]
    if not found:
        raise RegressionError(f"run {run!r} is not a finished pipeline run of this experiment")
    return found[0]


def pick_baseline(runs: list, current, baseline: str):
    """The baseline run, or None when `previous` finds none (the current run becomes the baseline)."""
    if baseline.startswith("tag:"):
        name = baseline.removeprefix("tag:")
        tagged = [r for r in runs if r.data.tags.get("ccrs.baseline") == name and r is not current]
        if not tagged:
            raise RegressionError(f"no finished run of this experiment is tagged ccrs.baseline={name!r} "
                                  "(ccrs compare --run RUN_ID --name-baseline NAME tags one)")
        return tagged[0]
    if baseline != "previous":
        found = [r for r in runs if r.info.run_id == baseline]
        if not found:
            raise RegressionError(f"baseline {baseline!r} is not a finished pipeline run of this experiment")
        return found[0]
    earlier = [r for r in runs if r.info.start_time < current.info.start_time and same_series(r, current)
               and r.data.tags.get("ccrs.adhoc") != "true" and r.data.tags.get("ccrs.superseded") != "true"]
    accepted = [r for r in earlier if r.data.tags.get("regression.status") in ACCEPTED]
    return accepted[0] if accepted else (earlier[-1] if earlier else None)


def same_series(run, current) -> bool:
    """Whether `run` belongs to the series of `current`: the same `ccrs.series` tag; where either run was
    logged before series tags, the same config name (the lookup of those runs' time)."""
    tags, ours = run.data.tags, current.data.tags
    if SERIES_TAG in tags and SERIES_TAG in ours:
        return tags[SERIES_TAG] == ours[SERIES_TAG]
    return tags.get("ccrs.config_name") == ours.get("ccrs.config_name")


def series_label(run) -> str:
    """A run's series as said in the reports: its `ccrs.series`, else its config name, marked as such."""
    tags = run.data.tags
    if SERIES_TAG in tags:
        return tags[SERIES_TAG]
    return f"{tags.get('ccrs.config_name', 'unknown')} (config name; logged before series tags)"


def other_series(runs: list, current) -> tuple[str, ...]:
    """The series of the experiment's runs before `current` that are not of its series, sorted."""
    return tuple(sorted({series_label(r) for r in runs if r.info.start_time < current.info.start_time
                         and not same_series(r, current)}))


def series_said(current, base) -> str:
    """The series of a comparison; a baseline logged before series tags is said to be found by config name."""
    if SERIES_TAG in base.data.tags or SERIES_TAG not in current.data.tags:
        return series_label(current)
    return (f"{series_label(current)}, its baseline logged before series tags and found by its config name "
            f"{base.data.tags.get('ccrs.config_name')}")


def baseline_scores(tracking_uri: str, experiment: str, series: str, config_name: str,
                    baseline: str = "previous") -> Baseline | None:
    """The run id and per-question scores of the baseline a night about to start will be compared with, for
    the run extensions that read them (a night settled against its baseline); None on the first night (no
    experiment or no earlier run of this series)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    if client.get_experiment_by_name(experiment) is None:
        return None
    tags = {SERIES_TAG: series, "ccrs.config_name": config_name}
    tonight = SimpleNamespace(info=SimpleNamespace(run_id=None, start_time=float("inf")),
                              data=SimpleNamespace(tags=tags))
    base = pick_baseline(pipeline_runs(client, experiment), tonight, baseline)
    if base is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Baseline(base.info.run_id, scored(judgments(client, base, Path(tmp))))


# --- what a run logged --------------------------------------------------------------------------------------

def judgments(client, run, work: Path) -> pd.DataFrame:
    """Every judgment of the run (failures included): its logged artifact, else its own run folder."""
    run_id = run.info.run_id
    try:
        return pd.read_parquet(client.download_artifacts(run_id, JUDGMENTS_ARTIFACT, str(work / run_id)))
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types for a missing artifact
        layout = own_run_folder(run)
        if layout is None:
            raise RegressionError(f"run {run_id} has no {JUDGMENTS_ARTIFACT} in MLflow ({type(exc).__name__})"
                                  " and its run folder is not on this machine: nothing to compare") from exc
        return pd.concat([pd.read_parquet(layout.judgments(suite)) for suite in layout.judged_suites()],
                         ignore_index=True)


def answers(client, run, work: Path) -> pd.DataFrame | None:
    """(query_id, system, answer, question) of the run: its logged per-sample table, else its own run
    folder; None when neither is at hand (the moves then show scores and judge replies only)."""
    run_id = run.info.run_id
    try:
        path = client.download_artifacts(run_id, PER_SAMPLE_TABLE_ARTIFACT, str(work / run_id))
        table = json.loads(Path(path).read_text())
        return pd.DataFrame(table["data"], columns=table["columns"])
    except Exception:  # noqa: BLE001 - a run logged before the table existed, or a store that lost it
        layout = own_run_folder(run)
        if layout is None or not layout.generations.exists():
            return None
        generated = pd.read_parquet(layout.generations, columns=["query_id", "system", "answer"])
        questions = pd.read_parquet(layout.queries, columns=["query_id", "text"])
        return generated.merge(questions.rename(columns={"text": "question"}), on="query_id", how="left")


def stats(client, run, work: Path) -> dict | None:
    """The run's stats.json (logged artifact, else its own run folder); None when neither is at hand."""
    try:
        return json.loads(Path(client.download_artifacts(run.info.run_id, STATS_ARTIFACT,
                                                         str(work / run.info.run_id))).read_text())
    except Exception:  # noqa: BLE001 - MLflow raises many types for a missing artifact
        layout = own_run_folder(run)
        if layout is None or not layout.stats_json.is_file():
            return None
        return json.loads(layout.stats_json.read_text())


def own_run_folder(run) -> RunLayout | None:
    """The run folder (tag ccrs.run_dir) when this machine has it and it still holds this run: a night
    reuses its folder, so after a later night it holds that night's outputs (its track stage names the
    MLflow run it logged)."""
    folder = run.data.tags.get("ccrs.run_dir")
    if not folder:
        return None
    layout = RunLayout(Path(folder))
    manifest = read_manifest(layout.track_dir) if layout.track_dir.is_dir() else None
    logged = ((manifest or {}).get("summary") or {}).get("run_id")
    return layout if logged == run.info.run_id else None


# --- what the gate writes back ------------------------------------------------------------------------------

def record_outcome(tracking_uri: str, run_id: str, status: str, baseline_id: str | None, markdown: str,
                   summary: dict, moves: pd.DataFrame | None) -> None:
    """The outcome on the checked run: tags `regression.status`, `regression.baseline`, the report and its
    JSON summary, and the moves as an MLflow table (where some were listed)."""
    attach(tracking_uri, run_id,
           tags={"regression.baseline": baseline_id or "none", "regression.status": status},
           texts={SUMMARY_MARKDOWN: markdown, SUMMARY_JSON: json.dumps(summary, indent=2, default=str)},
           tables={MOVES_ARTIFACT: moves} if moves is not None and not moves.empty else None)


def mark_baseline(tracking_uri: str, experiment: str, run: str, accept: bool, name: str | None) -> str:
    """Move the baseline on purpose: `accept` tags the run regression.status=accepted (the next `previous`
    baseline); `name` tags it ccrs.baseline=NAME (for --baseline tag:NAME). Returns the run id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    run_id = pick_run(pipeline_runs(client, experiment), run).info.run_id
    if accept:
        client.set_tag(run_id, "regression.status", "accepted")
    if name:
        client.set_tag(run_id, "ccrs.baseline", name)
    return run_id
