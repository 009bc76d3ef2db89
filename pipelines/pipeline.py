"""The pipeline DAG: composes the Ray stages of tasks/ in order and hands results to MLflow.

Two ways in, one way out:
- `run_pipeline` (`ccrs run`): retrieve -> generate (built-in readers x retrievers, endpoint systems);
- `run_evaluation` (`ccrs evaluate`, `ccrs_eval.evaluate`): the outputs stage (the user's systems' answers);
then both judge (every selected suite), reduce, write the failure report and the verdict, and track.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.config import REPO_ROOT, RESOURCE_ROOT, STAGES, RunConfig, load_config
from tasks.runtime.judge_loop import Baseline
from tasks.runtime.layout import OUTPUTS_STAGE, RunLayout


@dataclass
class PipelineResult:
    run_dir: Path
    stats_dir: Path
    tracked: dict
    stages: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    summary_path: Path | None = None


@dataclass
class Answers:
    """What the judge stages read, from the generate stage or the outputs stage."""

    stage: str  # "generate" | "outputs"
    queries_path: Path
    retrieved_path: Path
    generations_path: Path
    top_k: int
    summary: dict[str, Any]
    reused: bool
    retrieval: dict[str, Any] = field(default_factory=dict)  # retrieval metrics (none for outputs)
    retrieval_reused: bool | None = None


def _forced(stage: str, from_stage: str | None) -> bool:
    return from_stage is not None and STAGES.index(stage) >= STAGES.index(from_stage)


def _resolve_paths(config: RunConfig) -> RunConfig:
    """Relative dataset/hypotheses paths (and the run extensions' file paths) are taken from the working
    directory, then from the project's resources (the checkout, or the installed package's copy)."""
    from pipelines.extensions import config_paths

    data = config.model_dump()
    for dotted in ("dataset.path", "stats.hypotheses", *config_paths()):
        *sections, key = dotted.split(".")
        tree = data
        for section in sections:
            tree = tree.get(section) or {}
        value = tree.get(key)
        if value and not Path(value).is_absolute():
            candidate = Path.cwd() / value
            tree[key] = str((candidate if candidate.exists() else RESOURCE_ROOT / value).resolve())
    return RunConfig.model_validate(data)


def _prepare(config: RunConfig) -> tuple[RunConfig, Path]:
    """Checks that fail before any work (the run extensions' own, the tracking store), the run directory and
    its config.json, and Ray."""
    from infra.console import say
    from infra.ray_runtime import ensure_ray
    from pipelines.extensions import check_before_work
    from pipelines.reporting.tracking import check_tracking_reachable

    config = _resolve_paths(config)
    check_before_work(config)  # a broken block fails now, not after hours of judging
    check_tracking_reachable(config.mlflow.resolved_uri(Path.cwd()))
    run_dir = config.resolved_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    RunLayout(run_dir).config_json.write_text(config.model_dump_json(indent=2))
    dashboard = ensure_ray(config.ray.address, config.ray.num_cpus)
    say(f"Ray: {dashboard or 'local (no dashboard)'}; run directory: {run_dir}")
    return config, run_dir


@contextmanager
def _endpoint(config: RunConfig, generates: bool, keep_serving: bool):
    """The shared LLM endpoint when the run needs one, as a `ready()` that waits for it and returns its base
    URL (None without one: a judge on its own endpoint and no LLM reader). Its deployment starts on entry,
    so that the model loads while the run retrieves."""
    from infra.console import say
    from infra.serving import llm_endpoint_started

    if not config.needs_llm_endpoint(generates):
        yield lambda: None
        return
    say(f"serving: the LLM endpoint (profile {config.serving.profile})")
    announce = lambda text: say(f"serving: {text}")  # noqa: E731
    with llm_endpoint_started(config.serving, keep=keep_serving, announce=announce) as ready:
        yield ready


def run_pipeline(config: RunConfig, from_stage: str | None = None, keep_serving: bool = False,
                 run_tags: dict[str, str] | None = None, started_at: float | None = None,
                 baseline: Baseline | None = None) -> PipelineResult:
    """`ccrs run`. `run_tags`: extra MLflow tags of the run (e.g. ccrs.adhoc, ccrs.nightly); `started_at`:
    when the command started (epoch seconds; default now), the MLflow run's start; `baseline`: the run a
    night is compared with (`ccrs nightly`), for the run extensions that read it."""
    started_at = started_at or time.time()
    from infra.console import say
    from retrievers.config import RetrievalSpec
    from tasks.generate import run_generation
    from tasks.retrieval_stages import preflight_index, run_retrieval

    preflight_index(config.index)
    config, run_dir = _prepare(_run_hypotheses(config))
    with _endpoint(config, generates=True, keep_serving=keep_serving) as endpoint_ready:
        say("retrieve: ingest, chunk, embed, index, retrieve")
        retrieval = run_retrieval(run_dir, RetrievalSpec.of(config), force=_forced("retrieve", from_stage))
        say(f"retrieval: {json.dumps(retrieval.metrics_summary, default=str)}")
        base_url = endpoint_ready()
        config = _fit_judge(config, base_url)
        endpoints = ", ".join(system.name for system in config.systems)
        say(f"generate: {len(config.readers)} readers x {len(config.retrieval.retrievers)} retrievers"
            + (f" + endpoint systems {endpoints}" if endpoints else ""))
        generation = run_generation(
            run_dir, retrieval.queries_path, retrieval.retrieved_path, config.readers, config.client,
            base_url, config.retrieval.top_k, force=_forced("generate", from_stage), systems=config.systems,
            identity=_reader_identity(config, base_url),
        )
        answers = Answers("generate", retrieval.queries_path, retrieval.retrieved_path, generation.path,
                          config.retrieval.top_k, generation.summary, generation.reused,
                          retrieval.metrics_summary, all(stage.reused for stage in retrieval.stages))
        judged = _judge(config, run_dir, answers, base_url, _forced("judge", from_stage), run_tags,
                        baseline)
    return _conclude(config, run_dir, answers, judged, from_stage, run_tags, started_at)


# The demo's hypotheses are about the systems its readers x retrievers make (A-F); they live with the
# built-in pipeline, not in configs/cpu-demo.yaml, so that a config copied from the demo carries none.
DEMO_HYPOTHESES = "configs/hypotheses/cpu-demo.yaml"


def _run_hypotheses(config: RunConfig) -> RunConfig:
    """The hypotheses of a `ccrs run`, before any work: a config's own (`stats.hypotheses: FILE`) checked
    against the systems it builds and the metrics it judges (one line naming what is missing); none where
    it says `null`; without the key, the demo's where the run builds every system they name as the demo
    does (same reader, model, prompt and retriever) and judges their metrics."""
    from infra.console import say
    from stats.errors import StatsInputError
    from stats.hypotheses import check_hypotheses_against
    from tasks.reduce import load_hypotheses

    systems, metrics = _built_systems(config), _judged_metrics_of(config)
    if "hypotheses" in config.stats.model_fields_set:
        if config.stats.hypotheses:
            path = Path(config.stats.hypotheses)
            hypotheses = load_hypotheses(path if path.exists() else RESOURCE_ROOT / path)
            try:
                check_hypotheses_against(hypotheses, sorted(systems), sorted(metrics))
            except StatsInputError as exc:
                raise StatsInputError(f"{exc} (stats.hypotheses: {config.stats.hypotheses})") from exc
        return config
    path = RESOURCE_ROOT / DEMO_HYPOTHESES
    hypotheses = load_hypotheses(path).hypotheses
    named = {system for hypothesis in hypotheses for pair in hypothesis.pairs for system in pair}
    demo = _built_systems(load_config())
    if any(system not in systems or systems[system] != demo.get(system) for system in named) or \
            not {metric for hypothesis in hypotheses for metric in hypothesis.metrics} <= metrics:
        return config
    say(f"stats: the demo's hypotheses about its systems {', '.join(sorted(named))} ({DEMO_HYPOTHESES})")
    return config.model_copy(update={"stats": config.stats.model_copy(update={"hypotheses": str(path)})})


def _built_systems(config: RunConfig) -> dict[str, dict]:
    """What each system of a `ccrs run` config means: readers x retrievers (labels A, B, ...) and endpoint
    systems (by name)."""
    from tasks.generate import ENDPOINT_RETRIEVER, system_table

    return {label: meaning for label, meaning in system_table(config.readers, config.systems).items()
            if meaning["retriever"] in (*config.retrieval.retrievers, ENDPOINT_RETRIEVER)}


def _judged_metrics_of(config: RunConfig) -> set[str]:
    from judges.suite import get_suite

    return {metric for name in config.judges for metric in get_suite(name).selected_metrics(config.judge)}


def _reader_identity(config: RunConfig, base_url: str | None) -> dict:
    """What serves each LLM reader's model ({} without LLM readers)."""
    models = sorted({reader.model for reader in config.readers if reader.kind == "llm" and reader.model})
    if not models or base_url is None:
        return {}
    return {model: served_identity(config, model, base_url, config.client.api_key_env) for model in models}


def served_identity(config: RunConfig, model: str, base_url: str, api_key_env: str,
                    own_endpoint: bool = False) -> dict:
    """What the endpoint reports serving as `model` (infra.readiness.endpoint_identity) and, for the Serve
    app this config deploys, the weights it is configured to load (Ray Serve LLM's model card does not name
    them) and their dtype: other weights (or precision) behind the same model id are not served from earlier
    generations or judgments."""
    from infra.readiness import endpoint_identity

    identity = endpoint_identity(base_url, model, api_key_env)
    if config.serving.profile != "external" and not own_endpoint:
        deployed = next((served for served in config.serving.models if served.model_id == model), None)
        if deployed:
            identity["source"] = deployed.source
            # the same weights computed in another precision give other outputs
            if deployed.engine_kwargs.get("dtype") is not None:
                identity["dtype"] = str(deployed.engine_kwargs["dtype"])
    return identity


def run_evaluation(config: RunConfig, outputs, from_stage: str | None = None, keep_serving: bool = False,
                   run_tags: dict[str, str] | None = None, started_at: float | None = None,
                   baseline: Baseline | None = None) -> PipelineResult:
    """The user's systems' outputs (tasks.outputs.Outputs, already read and checked) through the judge,
    reduce and track stages of `ccrs run`. `run_tags`: extra MLflow tags of the run (e.g. ccrs.adhoc);
    `started_at`: when the command started (epoch seconds; default now), the MLflow run's start; `baseline`:
    as run_pipeline's."""
    started_at = started_at or time.time()
    from infra.console import say
    from tasks.outputs import run_outputs_stage

    config, run_dir = _prepare(config)
    stage = run_outputs_stage(run_dir, outputs, force=_forced("generate", from_stage))
    summary = stage.summary
    say(f"outputs: {summary['rows']} answers of {len(summary['systems'])} systems to {summary['questions']} "
        f"questions ({', '.join(summary['sources'])})")
    top_k = max([len(c) for c in outputs.rows["contexts"]] + [1])
    answers = Answers(OUTPUTS_STAGE, stage.queries_path, stage.retrieved_path, stage.generations_path,
                      top_k, summary, stage.reused)
    with _endpoint(config, generates=False, keep_serving=keep_serving) as endpoint_ready:
        base_url = endpoint_ready()
        config = _fit_judge(config, base_url)
        judged = _judge(config, run_dir, answers, base_url, _forced("judge", from_stage), run_tags,
                        baseline)
    return _conclude(config, run_dir, answers, judged, from_stage, run_tags, started_at)


def _judge(config: RunConfig, run_dir: Path, answers: Answers, base_url: str | None, force: bool,
           run_tags: dict[str, str] | None = None, baseline: Baseline | None = None) -> dict:
    """Every registered judge suite the config selects (`judges: [ccrs, grouse, vera, ragchecker]`), on the
    same answers, through the same stage, against the judge's endpoint, each in the judge loop of the run
    extension that turns one on (else every question); before and after them the stages of the run
    extensions the config turns on (pipelines/extensions/)."""
    from infra.console import say
    from pipelines.extensions import StageContext, judge_loop_line, judge_loop_policy, run_stages
    from tasks.judge import judge_client_config, run_judging

    judge_url = config.judge.base_url or base_url
    client = judge_client_config(config.judge, config.client)
    where = f" at {judge_url}" if config.judge.base_url else ""
    say(f"judge: {', '.join(config.judges)} ({config.judge.model}{where})")
    identity = served_identity(config, config.judge.model, judge_url, client.api_key_env,
                               own_endpoint=config.judge.base_url is not None)
    context = StageContext(config, run_dir, _inputs(answers), answers.top_k, client, judge_url, identity,
                           force, run_tags or {})
    run_stages("before_judge", context)
    judged = {}
    family = tuple(sorted(_judged_metrics_of(config)))
    for name in config.judges:
        judged[name] = run_judging(
            run_dir, name, answers.queries_path, answers.retrieved_path, answers.generations_path,
            config.judge, client, judge_url, answers.top_k, force=force, identity=identity,
            policy=judge_loop_policy(config, name, family, baseline),
        )
        say(f"judge {name}: {judge_requests_line(judged[name].summary, judged[name].reused)}"
            + judge_loop_line(config, judged[name].summary))
    run_stages("after_judge", context)
    return judged


def _inputs(answers: Answers) -> tuple[Path, Path, Path]:
    return answers.queries_path, answers.retrieved_path, answers.generations_path


def _fit_judge(config: RunConfig, base_url: str | None) -> RunConfig:
    """The judge settings its endpoint decides, before any judging (tasks.judge.fit_judge: `scoring:
    expected` probed, `structured_output: if_accepted` decided), said in one line where it decided one."""
    from pipelines.tools.endpoint import fitted_judge

    judge = fitted_judge(config, config.judges, config.judge.base_url or base_url, err=False)
    return config.model_copy(update={"judge": judge})


def judge_requests_line(summary: dict, reused: bool) -> str:
    """Where a judge stage's judgments came from: `24 judgments: 0 new judge requests (stage reused)`."""
    if reused:
        return f"{summary.get('judgments', 0)} judgments: 0 new judge requests (finished stage reused)"
    return (f"{summary.get('judgments', 0)} judgments: {summary.get('judge_requests', 0)} new judge "
            f"requests, {summary.get('cache_hits', 0)} from the judgment cache, "
            f"{summary.get('resumed', 0)} resumed")


def _conclude(config: RunConfig, run_dir: Path, answers: Answers, judged: dict, from_stage: str | None,
              run_tags: dict[str, str] | None = None, started_at: float | None = None) -> PipelineResult:
    from infra.console import say
    from infra.ray_runtime import copy_session_logs
    from pipelines.extensions import StageContext, run_stages, statistics_contributors, verdict_sections
    from judges.suite import metric_order, suite_membership
    from pipelines.reporting.failures import format_failure_table, write_failure_report
    from tasks.reduce import run_reduce
    from pipelines.reporting.report import write_reduce_reports
    from pipelines.reporting.verdict import write_summary

    layout = RunLayout(run_dir)
    say("reduce: statistics (randomized Tukey HSD, Holm, bootstrap CIs)")
    reduce = run_reduce(
        run_dir, [outputs.scores_path for outputs in judged.values()], config.stats.b, config.stats.seed,
        config.stats.alpha, config.stats.hypotheses, force=_forced("reduce", from_stage),
        metric_order=metric_order(), suites=suite_membership(), contributors=statistics_contributors(),
    )
    write_reduce_reports(json.loads(layout.stats_json.read_text()),
                         [outputs.scores_path for outputs in judged.values()], reduce.out_dir)
    run_stages("after_reduce", StageContext(config, run_dir, _inputs(answers), answers.top_k, None, None,
                                            force=_forced("reduce", from_stage), run_tags=run_tags or {}))
    generated = {"generate": answers.summary} if answers.stage == "generate" else {}
    failures_path, failures = write_failure_report(
        run_dir, {**generated, **{_stage(name): out.summary for name, out in judged.items()}})
    say(format_failure_table(failures))
    summary_path = write_summary(run_dir, verdict_sections())
    copy_session_logs(layout.ray_logs_dir)
    stages = {**({"retrieve": {"reused": answers.retrieval_reused, "summary": answers.retrieval}}
                 if answers.stage == "generate" else {}),
              answers.stage: {"reused": answers.reused, "summary": answers.summary},
              **{_stage(name): {"reused": out.reused, "summary": out.summary}
                 for name, out in judged.items()},
              "reduce": {"reused": reduce.reused, "summary": reduce.summary}}
    say("track: logging to MLflow (a run of its own for every invocation)")
    tags = {**run_tags_of(config, answers, judged, stages, run_dir), **(run_tags or {})}
    tracked = _track(config, run_dir, answers, judged, reduce, failures_path, tags, started_at)
    return PipelineResult(run_dir, reduce.out_dir, tracked, stages, failures, summary_path)


def run_tags_of(config: RunConfig, answers: Answers, judged: dict, stages: dict, run_dir: Path) -> dict:
    """The MLflow tags that `ccrs compare` reads: what makes two runs comparable (judge model, prompt
    versions, scoring mode, the run extensions' tags, metric set), which nightly series a run belongs to
    (ccrs.series), what was reused and where the outputs are."""
    from pipelines.extensions import run_tags

    metrics = sorted({metric for out in judged.values() for metric in _judged_metrics(out.judgments_path)})
    prompt_versions = {name: out.summary.get("prompt_version") for name, out in judged.items()}
    return {
        "ccrs.config_name": config.name,
        "ccrs.series": config.mlflow.resolved_series(),
        "ccrs.source": "outputs" if answers.stage == OUTPUTS_STAGE else "pipeline",
        "ccrs.judge_model": config.judge.model,
        "ccrs.scoring": config.judge.scoring,
        **run_tags(config),
        "ccrs.prompt_versions": json.dumps(prompt_versions, sort_keys=True),
        "ccrs.metrics": ",".join(metrics),
        "ccrs.adhoc": "false",
        "ccrs.reused_stages": ",".join(name for name, stage in stages.items() if stage.get("reused")) or "-",
        "ccrs.run_dir": str(run_dir),
    }


def _judged_metrics(judgments_path: Path) -> list[str]:
    import pandas as pd

    return sorted(pd.read_parquet(judgments_path, columns=["metric"])["metric"].unique())


def _stage(suite: str) -> str:
    return RunLayout.judge_stage(suite)


def _provenance(config: RunConfig, answers: Answers, judged: dict) -> dict:
    from pipelines.reporting.tracking import git_commit, package_versions

    provenance = {
        "git_commit": git_commit(REPO_ROOT),
        "packages": package_versions(),
        "seeds": {"client": config.client.seed, "stats": config.stats.seed},
        "models": {"judge": config.judge.model},
        "prompt_versions": {f"{name}_judge": out.summary.get("prompt_version")
                            for name, out in judged.items()},
    }
    if answers.stage == "generate":
        provenance["models"].update(readers=[r.model or r.kind for r in config.readers],
                                    embedder=config.embedder.model)
        provenance["prompt_versions"]["reader"] = answers.summary["prompt_version"]
        if config.systems:
            provenance["endpoint_systems"] = [system.name for system in config.systems]
    else:
        provenance["outputs"] = {"sources": answers.summary.get("sources", []),
                                 "systems": sorted(answers.summary.get("systems", {}))}
    return provenance


def _track(config: RunConfig, run_dir: Path, answers: Answers, judged: dict, reduce, failures_path: Path,
           tags: dict, started_at: float | None = None) -> dict:
    """The track stage (pipelines/reporting/track.py) with what this invocation logs and the run
    extensions' payloads."""
    from pipelines.extensions import metrics_contributions, track_payloads
    from pipelines.reporting.track import RunRecord, run_track

    record = RunRecord(
        run_name=config.mlflow.run_name or config.name,
        config=config.model_dump(mode="json"),
        provenance=_provenance(config, answers, judged),
        tags=tags,
        queries_path=answers.queries_path,
        generations_path=answers.generations_path,
        judgments_paths={name: out.judgments_path for name, out in judged.items()},
        stage_summaries={answers.stage: answers.summary,
                         **{_stage(name): out.summary for name, out in judged.items()}},
        retrieval_metrics=answers.retrieval,
        failures_path=failures_path,
        started_at=started_at,
    )
    tracked = run_track(run_dir, record, reduce, config.mlflow.resolved_uri(Path.cwd()),
                        config.mlflow.experiment, track_payloads(record.config), metrics_contributions())
    return tracked.summary
