"""The pipeline DAG: composes the Ray stages of tasks/ in order and hands results to MLflow."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.config import REPO_ROOT, STAGES, RunConfig
from tasks.layout import RunLayout


@dataclass
class PipelineResult:
    run_dir: Path
    stats_dir: Path
    tracked: dict
    stages: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    summary_path: Path | None = None


def _forced(stage: str, from_stage: str | None) -> bool:
    return from_stage is not None and STAGES.index(stage) >= STAGES.index(from_stage)


def _resolve_paths(config: RunConfig) -> RunConfig:
    """Relative dataset/hypotheses paths are taken from the working directory, then from the repo."""
    data = config.model_dump()
    for section, key in (("dataset", "path"), ("stats", "hypotheses"), (None, "gqm_goals")):
        tree = data[section] if section else data
        value = tree[key]
        if value and not Path(value).is_absolute():
            candidate = Path.cwd() / value
            tree[key] = str((candidate if candidate.exists() else REPO_ROOT / value).resolve())
    return RunConfig.model_validate(data)


def run_pipeline(config: RunConfig, from_stage: str | None = None,
                 keep_serving: bool = False) -> PipelineResult:
    from infra.console import say
    from infra.ray_runtime import copy_session_logs, ensure_ray
    from infra.serving import start_serve_app, stop_serve_app
    from tasks.failures import format_failure_table, write_failure_report
    from tasks.generate import run_generation
    from tasks.reduce import run_reduce
    from tasks.retrieval_stages import preflight_index, run_retrieval
    from tasks.tracking import check_tracking_reachable
    from tasks.verdict import write_summary

    config = _resolve_paths(config)
    if config.gqm_goals:
        from pipelines.tools.gqm_report import load_goals

        load_goals(config.gqm_goals)  # a broken goal tree fails now, not after hours of judging
    check_tracking_reachable(config.mlflow.resolved_uri(Path.cwd()))
    preflight_index(config.index)
    run_dir = config.resolved_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    layout = RunLayout(run_dir)
    layout.config_json.write_text(config.model_dump_json(indent=2))
    dashboard = ensure_ray(config.ray.address, config.ray.num_cpus)
    say(f"Ray: {dashboard or 'local (no dashboard)'}; run directory: {run_dir}")
    say("retrieve: ingest, chunk, embed, index, retrieve")

    retrieval = run_retrieval(
        run_dir, config.dataset, config.chunking, config.embedder, config.index, config.retrieval,
        force=_forced("retrieve", from_stage),
    )
    say(f"retrieval: {json.dumps(retrieval.metrics_summary, default=str)}")
    say(f"serving: starting the LLM endpoint (profile {config.serving.profile}; minutes on CPU)")
    base_url = start_serve_app(config.serving)
    try:
        say(f"generate: {len(config.readers)} readers x {len(config.retrieval.retrievers)} retrievers")
        generation = run_generation(
            run_dir, retrieval.queries_path, retrieval.retrieved_path, config.readers, config.client,
            base_url, config.retrieval.top_k, force=_forced("generate", from_stage),
        )
        judged = _judge(config, run_dir, retrieval, generation, base_url, _forced("judge", from_stage))
    finally:
        if not keep_serving:
            stop_serve_app()
    say("reduce: statistics (randomized Tukey HSD, Holm, bootstrap CIs)")
    reduce = run_reduce(
        run_dir, [outputs.scores_path for outputs in judged.values()], config.stats.b, config.stats.seed,
        config.stats.alpha, config.stats.hypotheses, force=_forced("reduce", from_stage),
    )
    failures_path, failures = write_failure_report(
        run_dir,
        {"generate": generation.summary, **{_stage(name): out.summary for name, out in judged.items()}})
    say(format_failure_table(failures))
    summary_path = write_summary(run_dir)
    copy_session_logs(layout.ray_logs_dir)
    say("track: logging to MLflow")
    tracked = _track(config, run_dir, retrieval, generation, judged, reduce, failures_path,
                     force=_forced("track", from_stage))
    stages = {"retrieve": {"reused": all(stage.reused for stage in retrieval.stages),
                           "summary": retrieval.counts},
              "generate": {"reused": generation.reused, "summary": generation.summary},
              **{_stage(name): {"reused": out.reused, "summary": out.summary}
                 for name, out in judged.items()},
              "reduce": {"reused": reduce.reused, "summary": reduce.summary}}
    return PipelineResult(run_dir, reduce.out_dir, tracked, stages, failures, summary_path)


def _stage(suite: str) -> str:
    return RunLayout.judge_stage(suite)


def _judge(config: RunConfig, run_dir: Path, retrieval, generation, base_url: str, force: bool) -> dict:
    """Every registered judge suite the config selects (`judges: [ccrs, grouse, vera, ragchecker]`), on the
    same generations, through the same stage."""
    from infra.console import say
    from tasks.judge import run_judging

    say(f"judge: {', '.join(config.judges)} ({config.judge.model})")
    return {
        name: run_judging(
            run_dir, name, retrieval.queries_path, retrieval.retrieved_path, generation.path, config.judge,
            config.client, base_url, config.retrieval.top_k, force=force,
        )
        for name in config.judges
    }


def _track(config, run_dir, retrieval, generation, judged, reduce, failures_path: Path, force: bool) -> dict:
    from tasks.stage import code_version, run_stage, stage_key
    from tasks.tracking import git_commit, log_pipeline_run, package_versions

    tracking_uri = config.mlflow.resolved_uri(Path.cwd())
    key = stage_key("track", {"uri": tracking_uri, "experiment": config.mlflow.experiment,
                              "gqm_goals": config.gqm_goals}, [reduce.key],
                    code_version("tasks.tracking", "pipelines.tools.gqm_report"))

    def log(out_dir: Path) -> dict:
        provenance = {
            "git_commit": git_commit(REPO_ROOT),
            "packages": package_versions(),
            "seeds": {"client": config.client.seed, "stats": config.stats.seed},
            "models": {"judge": config.judge.model, "readers": [r.model or r.kind for r in config.readers],
                       "embedder": config.embedder.model},
            "prompt_versions": {f"{name}_judge": out.summary.get("prompt_version")
                                for name, out in judged.items()},
        }
        provenance["prompt_versions"]["reader"] = generation.summary["prompt_version"]
        tracked = log_pipeline_run(
            tracking_uri=tracking_uri,
            experiment=config.mlflow.experiment,
            run_name=config.mlflow.run_name or config.name,
            config=config.model_dump(mode="json"),
            provenance=provenance,
            stats_dir=reduce.out_dir,
            generations_path=generation.path,
            judgments_paths={name: out.judgments_path for name, out in judged.items()},
            queries_path=retrieval.queries_path,
            retrieval_metrics=retrieval.metrics_summary,
            stage_summaries={"generate": generation.summary,
                             **{_stage(name): out.summary for name, out in judged.items()}},
            failures_path=failures_path,
            pending_marker=RunLayout(run_dir).track_pending,
            summary_path=RunLayout(run_dir).summary_md,
            logs_dir=RunLayout(run_dir).logs_dir,
        )
        if config.gqm_goals:
            from pipelines.tools.gqm_report import log_to_mlflow, write_report

            report, files = write_report(run_dir, config.gqm_goals, out_dir / "gqm")
            log_to_mlflow(report, files, tracking_uri, tracked.run_id)
        return {"run_id": tracked.run_id, "experiment_id": tracked.experiment_id, "url": tracked.url,
                "tracking_uri": tracked.tracking_uri, "system_run_ids": tracked.system_run_ids}

    return run_stage(run_dir, "track", key, log, force=force).summary
