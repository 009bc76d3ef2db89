"""Evaluate the user's own systems: their outputs (files, a DataFrame, records) through the judge, reduce
and track stages of `ccrs run`. `evaluate()` backs both `ccrs evaluate` and `ccrs_eval.evaluate`.

Everything that can be wrong with the inputs or the options is found by `prepare_evaluation` before any
work starts (EvaluationInputError, one line); what fails later is recorded and counted as in `ccrs run`.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from infra.process import configure_process
from pipelines.config import RESOURCE_ROOT, ConfigError, RunConfig, load_config
from pipelines.options import EVALUATE_OPTIONS, SHARED, overrides_of

OUTPUTS_NAME = "evaluate-{stem}"  # the run's name (and run folder runs/<name>) when no --run-dir is given


class EvaluationInputError(ValueError):
    """Outputs or options that cannot be evaluated; the message is one line."""


@dataclass
class EvaluationResult:
    """What `evaluate()` returns: per-sample scores (question_id, system, metric, score, suite; and repeat,
    one row per repeat, where the config's judge.repeats.k > 1), every judgment (raw reply, status,
    reason), the statistics (stats.json), the verdict (Markdown) and where it all lives (the run folder,
    the MLflow run)."""

    scores: pd.DataFrame
    judgments: pd.DataFrame
    stats: dict[str, Any]
    verdict: str
    run_dir: Path
    mlflow_run_id: str | None
    stages: dict[str, Any] = field(default_factory=dict)

    @property
    def new_judge_requests(self) -> int:
        """Judge requests sent by this call (0: every judgment came from the cache or a finished stage)."""
        return sum(int((stage.get("summary") or {}).get("judge_requests", 0)) for name, stage in
                   self.stages.items() if name.startswith("judge_") and not stage.get("reused"))

    def __repr__(self) -> str:
        systems = sorted(self.scores["system"].unique())
        return (f"EvaluationResult({len(self.scores)} scores, systems {systems}, "
                f"run_dir={str(self.run_dir)!r}, mlflow_run_id={self.mlflow_run_id!r})")


def option_names() -> tuple[str, ...]:
    """The keyword arguments `evaluate()` takes for options: the destinations of `ccrs evaluate`'s options
    (pipelines/options.py EVALUATE_OPTIONS) and of the run extensions' options of `evaluate`."""
    from pipelines.extensions import command_options

    return (*(SHARED[flag].dest for flag in EVALUATE_OPTIONS), *(option.dest for option in
                                                                command_options("evaluate")))


def checked_options(given: dict[str, Any]) -> dict[str, Any]:
    """Every option name with its value (None where not given); a name `ccrs evaluate` has no option for is a
    TypeError naming the ones it has. `run_dir` is the old name of `out` (one release, with a warning)."""
    given = dict(given)
    if "run_dir" in given:
        warnings.warn("evaluate(run_dir=) is deprecated, use out= (the old name goes in the next release)",
                      DeprecationWarning, stacklevel=3)
        old = given.pop("run_dir")
        given["out"] = old if given.get("out") is None else given["out"]
    names = option_names()
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"evaluate() got unexpected keyword arguments {unknown}; its options: "
                        f"{', '.join(names)}")
    return {name: given.get(name) for name in names}


def prepare_evaluation(data: Any, **given: Any):
    """(RunConfig, Outputs), checked: the outputs' columns and rows, the config, that every selected metric
    has its inputs, and that the hypotheses name the outputs' systems. `given`: the options of `ccrs
    evaluate` by destination (option_names), mapped onto the run config as the command maps them. The
    hypotheses: `hypotheses`, else those of the given `config` (the default config names none). One system
    is a run like any other: its verdict has means and CIs, and says that the HSD and hypotheses need two or
    more."""
    from judges.suite import get_suite
    from tasks.outputs import OutputsError, check_metric_inputs, read_outputs

    values = checked_options(given)
    data, stem, found = _outputs_named(data, values)
    try:
        outputs = read_outputs(data, values["limit"])
    except OutputsError as exc:
        raise EvaluationInputError(str(exc)) from exc
    if values["system"] is not None:
        outputs = _named_system(outputs, values["system"])
    name = OUTPUTS_NAME.format(stem=stem)
    overrides: dict[str, Any] = {"name": name, "dataset.path": _dataset_label(data, stem),
                                 "dataset.limit": None,
                                 "run_dir": "runs/{name}"}
    try:
        overrides |= overrides_of(values, EVALUATE_OPTIONS, "evaluate") | found
        run_config = load_config(values["config"], overrides)
    except ConfigError as exc:
        raise EvaluationInputError(" ".join(str(exc).split())) from exc
    suites = {name: get_suite(name) for name in run_config.judges}
    selected = {name: [suite.metrics[m] for m in suite.selected_metrics(run_config.judge)]
                for name, suite in suites.items()}
    try:
        check_metric_inputs(outputs, selected)
    except OutputsError as exc:
        raise EvaluationInputError(str(exc)) from exc
    _check_hypotheses(run_config, outputs.systems, [m.name for metrics in selected.values() for m in metrics])
    return run_config, outputs


def _outputs_named(data: Any, values: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    """(the outputs, their name, config overrides recording them): `data`, or what an extension's options
    name instead (`--traces`: pipelines/extensions/)."""
    from pipelines.extensions import command_overrides, sourced_outputs

    try:
        command_overrides(values, "evaluate")  # options that do not go together, before any is read
        sourced = sourced_outputs(values, "evaluate")
    except ValueError as exc:  # a source's one-line errors (ConfigError, TraceInputError, ...)
        raise EvaluationInputError(" ".join(str(exc).split())) from exc
    if sourced is not None and data is not None:
        raise EvaluationInputError(f"give outputs files or {sourced.name.split('-')[0]} options, not both")
    if sourced is not None:
        return sourced.data, sourced.name, sourced.overrides
    if data is None:
        raise EvaluationInputError("no outputs given: name outputs files (JSONL, CSV, Parquet), or traces "
                                   "(--traces EXPERIMENT, docs/traces.md)")
    return data, _stem(data), {}


def _named_system(outputs, system: str):
    """The outputs with their one system named `system` (--system)."""
    if not system.strip():
        raise EvaluationInputError("--system: the system's name is empty")
    if len(outputs.systems) != 1:
        raise EvaluationInputError(f"--system names the one system of the outputs; they hold "
                                   f"{len(outputs.systems)} ({', '.join(outputs.systems)}): name each row's "
                                   "in a `system` column")
    return replace(outputs, rows=outputs.rows.assign(system=system))


def _check_hypotheses(config: RunConfig, systems: list[str], metrics: list[str]) -> None:
    from stats.errors import StatsInputError
    from stats.hypotheses import check_hypotheses_against
    from tasks.reduce import load_hypotheses

    if not config.stats.hypotheses:
        return
    path = Path(config.stats.hypotheses)
    try:
        check_hypotheses_against(load_hypotheses(path if path.exists() else RESOURCE_ROOT / path), systems,
                                 metrics)
    except StatsInputError as exc:
        raise EvaluationInputError(f"{exc} (stats.hypotheses: {config.stats.hypotheses})") from exc


def evaluate(data: Any = None, judges: list[str] | None = None, config: str | Path | None = None,
             llm_base_url: str | None = None, out: str | Path | None = None, limit: int | None = None,
             *, metrics: list[str] | None = None, judge_base_url: str | None = None,
             judge_model: str | None = None, experiment: str | None = None, tracking_uri: str | None = None,
             hypotheses: str | Path | None = None, from_stage: str | None = None, scoring: str | None = None,
             series: str | None = None, system: str | None = None, verbose: bool = False,
             **extension_options: Any) -> EvaluationResult:
    """Judge the answers in `data` (a path, a list of paths, a DataFrame or a list of dicts; one row = one
    system's answer to one question), compute the statistics, write the verdict and log one MLflow run.
    The keyword arguments are `ccrs evaluate`'s options by name, with their meanings (`ccrs evaluate --help`):
    `out` the run folder (default runs/evaluate-<stem>), `scoring` judge.scoring (integer or expected; with
    `judge_base_url` and no `config` the judge gets integer marks and structured output only where the
    endpoint accepts OpenAI's response_format), `series` the run's nightly series (tag ccrs.series),
    `system` the name of the outputs' one system; `extension_options` those the run extensions add, e.g.
    `sequential=True, margin=0.05, look_every=3` (or `sequential={"margin": 0.05}`; False turns a config's
    block off; docs/sequential.md). Third-party log records go to <run dir>/logs/console.log unless
    `verbose`."""
    started_at = time.time()
    configure_process()  # the Python API's door: the process settings `ccrs` makes at its start
    named = dict(judges=judges, config=config, llm_base_url=llm_base_url, out=out, limit=limit,
                 metrics=metrics,
                 judge_base_url=judge_base_url, judge_model=judge_model, experiment=experiment,
                 tracking_uri=tracking_uri, hypotheses=hypotheses, from_stage=from_stage, scoring=scoring,
                 series=series, system=system)
    run_config, outputs = prepare_evaluation(data, **named, **extension_options)
    from infra.console import quiet_console
    from pipelines.pipeline import run_evaluation
    from tasks.runtime.layout import RunLayout

    layout = RunLayout(run_config.resolved_run_dir())
    with quiet_console(layout.console_log, verbose=verbose):
        result = run_evaluation(run_config, outputs, from_stage=from_stage, started_at=started_at)
    return collect_result(result)


def collect_result(result) -> EvaluationResult:
    from tasks.runtime.layout import RunLayout

    layout = RunLayout(result.run_dir)
    suites = layout.judged_suites()
    scores = pd.concat([pd.read_parquet(layout.scores(suite)).assign(suite=suite) for suite in suites],
                       ignore_index=True).rename(columns={"query_id": "question_id"})
    judgments = pd.concat([pd.read_parquet(layout.judgments(suite)) for suite in suites], ignore_index=True)
    return EvaluationResult(scores, judgments.rename(columns={"query_id": "question_id"}),
                            json.loads(layout.stats_json.read_text()), layout.summary_md.read_text(),
                            Path(result.run_dir), (result.tracked or {}).get("run_id"), result.stages)


def _stem(data: Any) -> str:
    if isinstance(data, (str, Path)):
        return Path(data).stem
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], (str, Path)):
        return Path(data[0]).stem + (f"-and-{len(data) - 1}-more" if len(data) > 1 else "")
    return "dataframe" if isinstance(data, pd.DataFrame) else "records"


def _dataset_label(data: Any, stem: str) -> str:
    """What the MLflow dataset input names as its source: the (first) outputs file, else the kind of data
    (and the name of outputs an extension read, e.g. traces-<experiment>)."""
    if isinstance(data, (str, Path)):
        return str(Path(data).resolve())
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], (str, Path)):
        return str(Path(data[0]).resolve())
    kind = "in-memory " + ("DataFrame" if isinstance(data, pd.DataFrame) else "records")
    return kind if stem in ("dataframe", "records") else f"{stem} ({kind})"
