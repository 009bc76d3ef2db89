"""The run-extension registry: each optional part of a run declared once, as a judge suite or a metric is.

A `RunExtension` says what it adds to a run: its config block (where it lives in a run config, its model),
whether a config turns it on, its stage (when it runs, the function, its run-layout folder, the code its
key covers), the judge calls it plans (`ccrs plan cost`), its verdict sections and what it logs on the
run's MLflow run. The pipeline, the cost plan, the verdict and the track stage read the registry through
the functions below and name no extension. Every module of pipelines/extensions/ declares one; any other
module registers one by calling `register_extension` when it is imported (docs/architecture.md, "Recipe:
add a run extension").
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipelines.option_schema import Option

if TYPE_CHECKING:
    import argparse

    import pandas as pd
    from pydantic import BaseModel

    from judges.client import ChatRequest
    from judges.config import ClientConfig
    from pipelines.reporting.track import TrackContext, TrackPayload
    from pipelines.reporting.tracking import MetricsContribution
    from pipelines.reporting.verdict import VerdictSection
    from tasks.runtime.contributions import StatisticsContributor
    from tasks.runtime.judge_loop import Baseline, JudgeLoopPolicy
    from tasks.runtime.stops import RunStopped

When = Literal["before_judge", "after_judge", "after_reduce"]
WHEN: tuple[When, ...] = ("before_judge", "after_judge", "after_reduce")
_EXTENSIONS: dict[str, RunExtension] = {}


@dataclass(frozen=True)
class StageContext:
    """What an extension's stage gets from the pipeline. `config` is the run's pipelines.config.RunConfig
    (typed Any: that module imports this one); `judge_url` and `judge_client` are None after the judge
    stages (their endpoint is closed then)."""

    config: Any
    run_dir: Path
    inputs: tuple[Path, Path, Path]  # the judged answers: queries, retrieved, generations
    top_k: int
    judge_client: ClientConfig | None
    judge_url: str | None
    identity: dict = field(default_factory=dict)  # what the judge's endpoint serves
    force: bool = False  # rerun a finished stage (`--from-stage`)
    run_tags: dict[str, str] = field(default_factory=dict)  # the invocation's extra MLflow tags

    def run_with_judge(self, stage: Callable[..., Any], *arguments: Any, draw: Callable | None = None) -> Any:
        """`stage(run_dir, *arguments, judge, client, judge_url, identity, force=, draw=)`: a stage of tasks/
        that asks the run's judge, handed it as every such stage takes it (the judge block, the client
        settings, the endpoint and what it serves) and its plot function `draw`."""
        return stage(self.run_dir, *arguments, self.config.judge, self.judge_client, self.judge_url,
                     self.identity, force=self.force, draw=draw)


@dataclass(frozen=True)
class ExtensionStage:
    """A stage of its own: `run(context)` at `when`, writing the run folder `folder` (through
    tasks/runtime/stage.py's run_stage); `code`: the modules its key covers, the first one the module that
    runs it."""

    when: When
    run: Callable[[StageContext], None]
    folder: str
    code: tuple[str, ...]


@dataclass(frozen=True)
class PlannedCalls:
    """The judge calls an extension adds to a run (`ccrs plan cost`): `requests`, the first request of each
    call of its own stage (not scaled with the run's questions), with `note` on its line; what it does to the
    judge stages' own calls (planned by the judge stage, judges.repeats.planned_judge_units): `judge_note`
    on each judge stage's line (after the suite's name) and `calls_clause` in the calls assumption."""

    requests: tuple[ChatRequest, ...] = ()
    note: str = ""
    judge_note: str = ""
    calls_clause: str = ""


@dataclass(frozen=True)
class MlflowPayload:
    """What an extension logs on the run's MLflow run (in the track stage): `log(context, block)`, with its
    block of the run's config; `code`: the modules the track stage's key then covers."""

    log: Callable[[TrackContext, Any], None]
    code: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgeLoopContext:
    """What a judge-loop policy is made from, for one judge stage: the run's config, the stage's suite, every
    metric the run judges (all its judge stages) and the baseline a night is compared with (None: none)."""

    config: Any
    suite: str
    family: tuple[str, ...]
    baseline: Baseline | None = None


@dataclass(frozen=True)
class JudgeLoop:
    """A judge-loop policy (tasks/runtime/judge_loop.py): `policy(context)` makes one for a judge stage of a
    run that turns the extension on; `line(summary)`: what the stage's console line adds ("" for nothing)."""

    policy: Callable[[JudgeLoopContext], JudgeLoopPolicy]
    line: Callable[[dict], str] = lambda summary: ""


@dataclass(frozen=True)
class GateInputs:
    """What a gate cell kind reads: the night's stats.json (None where the run logged none), the baseline's
    (fetched only when asked: `base_stats()`), the baseline run's id and the gate's alpha; for a kind
    that tests cells itself, both nights' scores (one per question, system, metric: query_id, system,
    metric, score) with the gate's iterations `b` and `seed`; and `options`, the values of the extensions'
    options of the gate's command ({extension: {dest: value}}, as command_values gives them)."""

    run_stats: dict | None
    base_stats: Callable[[], dict | None]
    base_id: str
    alpha: float
    run_scores: pd.DataFrame | None = None
    base_scores: pd.DataFrame | None = None
    b: int = 10_000
    seed: int = 0
    options: Mapping[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class GateStatus:
    """A night's outcome a gate cell kind adds: when no cell regressed and some cell has `verdict`, the
    night's status is `status` with `exit_code` (not accepted as a baseline); `headline(cells)`, the alert's
    headline, given those cells ("system/metric" each); `note`, said under the table where a cell has it."""

    verdict: str
    status: str
    exit_code: int
    headline: Callable[[list[str]], str]
    note: str = ""


@dataclass(frozen=True)
class GateCells:
    """How an extension decides gate cells (`ccrs nightly`, `ccrs compare`): `decide(table, inputs)` returns
    the gate's table (system, metric, diff, p_value, verdict, ...) with the cells it decides given its
    `basis`; `note` is said under the table where a cell has that basis. `last(table, inputs)`, where given,
    runs after every kind's `decide` (a verdict on the cells all kinds decided, e.g. a regression held back
    until people confirm it), and `status` is the night's outcome its verdict gives (GateStatus)."""

    decide: Callable[[pd.DataFrame, GateInputs], pd.DataFrame]
    basis: str
    note: str = ""
    last: Callable[[pd.DataFrame, GateInputs], pd.DataFrame] | None = None
    status: GateStatus | None = None


@dataclass(frozen=True)
class ExtensionOption:
    """A command option an extension adds: its declaration (pipelines/option_schema.py `Option`: name, kind,
    one meaning, its default on each command, old spellings) on each command of `commands` (`run`,
    `evaluate`, `nightly`, `stats`, `plan power`, ...)."""

    option: Option
    commands: tuple[str, ...]

    @property
    def dest(self) -> str:
        return self.option.dest


@dataclass(frozen=True)
class SourcedOutputs:
    """Outputs an extension's options name instead of files (`ccrs evaluate`, `ccrs nightly`): `data` in the
    outputs format (tasks/outputs.py; a DataFrame), the run's `name`, and dotted config `overrides` that
    record what was read."""

    data: Any
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommandOptions:
    """An extension's command options and where their values land: `overrides(values, command)`, dotted
    config overrides of a command that runs a config (`run`, `evaluate`, `nightly`; `values` holds the
    options of `command` by dest); in `ccrs stats` the values reach its statistics contributor
    (StatisticsContext.options), `check(args)` is made before any work, `stats_verdict(args, scores,
    verdict)` may add to the verdict and `metric_lines(entry)` gives its console lines under a metric's; in
    `ccrs plan power`, `power_plan(args, pilot, plan)` gives the entries it adds to the plan; in `ccrs
    evaluate` and `ccrs nightly` (and `ccrs_eval.evaluate()`), `outputs(values, command)` gives the outputs
    its options name instead of files (SourcedOutputs; None where they name none; `values`: every option of
    the command by dest; a ValueError, one line, where they name nothing usable)."""

    options: tuple[ExtensionOption, ...]
    overrides: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    check: Callable[[argparse.Namespace], None] | None = None
    stats_verdict: Callable[[argparse.Namespace, pd.DataFrame, str], str] | None = None
    metric_lines: Callable[[dict], list[str]] | None = None
    power_plan: Callable[[argparse.Namespace, pd.DataFrame, dict], dict] | None = None
    outputs: Callable[[dict[str, Any], str], SourcedOutputs | None] | None = None


def _given(block: Any) -> bool:
    return bool(block)


@dataclass(frozen=True)
class RunExtension:
    """One optional part of a run.

    `key`: where its block lives in a run config (dotted, as the user writes it: `judge.preflight`,
    `probes`); `model`: the block's pydantic model (a key the run config has no field for, at its top level
    or in a block of it such as `judge.`, becomes a block of its own, validated by it); `on(block)`: whether
    the block turns it on (default: the block is given). Everything else is optional: `stage`;
    `plan(config)`, the one count of the judge calls it adds; `verdict`, its sections; `mlflow`, its
    payload; `tags(config)`, MLflow tags every run carries, on or off (what `ccrs compare` reads); `paths`,
    keys of its block holding a file path (resolved like dataset paths); `validate(config)`, its block
    checked against the rest of the config when a config is loaded (a ValueError refuses it);
    `check(config)`, made before any work; `rank`, its place among the extensions.

    The hooks where a feature lives: `judge_loop`, the judge stages' loop of a run that turns it on;
    `statistics`, its part of stats.json (every run and `ccrs stats`, on or off: it reads what it finds);
    `metrics`, what it logs of stats.json on the run's MLflow run and its systems' runs; `gate`, the gate
    cells it decides; `options`, its command options; `baseline(found)`: a night that turns it on reads the
    baseline's scores (Baseline), and this console line says what it does with the run id found (None on
    the first night); `stops()`: the exception its stage raises to stop a run before judging (a subclass of
    tasks.runtime.stops.RunStopped: the status, exit code and alert headline; a function, so that declaring
    it imports nothing), which the gate's statuses list; `files`, its
    run-layout folders and files (relative to the run folder); `names`, patterns of the words that are its
    own (its config key, its functions), which the core may not use, and `own`, the product files where
    they belong besides its module (its command) (tests/pipelines/test_extension_recipe.py)."""

    name: str
    description: str
    key: str
    model: type[BaseModel] | None = None
    on: Callable[[Any], bool] = _given
    stage: ExtensionStage | None = None
    plan: Callable[[Any], PlannedCalls] | None = None
    verdict: tuple[VerdictSection, ...] = ()
    mlflow: MlflowPayload | None = None
    tags: Callable[[Any], dict[str, str]] | None = None
    paths: tuple[str, ...] = ()
    check: Callable[[Any], None] | None = None
    validate: Callable[[Any], None] | None = None
    rank: int = 100
    judge_loop: JudgeLoop | None = None
    statistics: StatisticsContributor | None = None
    metrics: MetricsContribution | None = None
    gate: GateCells | None = None
    options: CommandOptions | None = None
    baseline: Callable[[str | None], str] | None = None
    stops: Callable[[], type[RunStopped]] | None = None
    files: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    own: tuple[str, ...] = ()

    def block(self, config: Any) -> Any:
        """Its block of `config` (a RunConfig, or the JSON data of config.json), as its model where it
        declares one; None where the config has none."""
        value = config
        for name in self.key.split("."):
            value = _member(value, name)
            if value is None:
                break
        if value is None and "." in self.key and hasattr(config, "extension_block"):
            value = config.extension_block(self.key)  # a RunConfig: a block inside one of its blocks
        if value is None:
            return None
        return self.model.model_validate(value) if isinstance(value, dict) and self.model else value

    def enabled(self, config: Any) -> bool:
        return self.on(self.block(config))


def _member(tree: Any, name: str) -> Any:
    if isinstance(tree, dict):
        return tree.get(name)
    if name in type(tree).model_fields:
        return getattr(tree, name)
    blocks = getattr(tree, "extension_block", None)  # a RunConfig: the blocks registered extensions declare
    return blocks(name) if blocks is not None else None


def register_extension(extension: RunExtension) -> RunExtension:
    """Add an extension to the registry (again under the same name: replaced)."""
    if extension.stage is not None and extension.stage.when not in WHEN:
        raise ValueError(f"extension {extension.name!r}: stage when {extension.stage.when!r} is not one of "
                         f"{WHEN}")
    _EXTENSIONS[extension.name] = extension
    return extension


def unregister_extension(name: str) -> None:
    """Take an extension out of the registry (tests that declare one of their own)."""
    _EXTENSIONS.pop(name, None)


@cache
def extension_modules() -> tuple[str, ...]:
    """The modules of pipelines/extensions/ (each declares an extension), found on disk: no list to edit."""
    folder = Path(__file__).parent
    return tuple(f"{__package__}.{module.name}" for module in pkgutil.iter_modules([str(folder)])
                 if not module.ispkg and module.name != "registry")


def extensions() -> dict[str, RunExtension]:
    """Every registered extension by `rank`, then name; importing the extension modules registers them."""
    for module in extension_modules():
        importlib.import_module(module)
    return dict(sorted(_EXTENSIONS.items(), key=lambda item: (item[1].rank, item[0])))


def enabled(config: Any) -> list[RunExtension]:
    """The extensions `config` (a RunConfig or config.json's data) turns on."""
    return [extension for extension in extensions().values() if extension.enabled(config)]


# --- what the pipeline, the cost plan, the verdict and the track stage read -----------------------------

def config_blocks() -> dict[str, type[BaseModel]]:
    """{dotted key: block model} of the extensions that declare a block model (RunConfig accepts those of
    them it has no field for: at its top level, or inside one of its blocks, `judge.sequential`)."""
    return {extension.key: extension.model for extension in extensions().values()
            if extension.model is not None}


def validate_blocks(config: Any) -> None:
    """Every enabled extension's checks of its block against the rest of a run config being loaded."""
    for extension in enabled(config):
        if extension.validate is not None:
            extension.validate(config)


def config_paths() -> tuple[str, ...]:
    """The dotted config keys that hold a file path, of every extension."""
    return tuple(path for extension in extensions().values() for path in extension.paths)


def check_before_work(config: Any) -> None:
    """Every enabled extension's checks, before the run starts any work."""
    for extension in enabled(config):
        if extension.check is not None:
            extension.check(config)


def run_stages(when: When, context: StageContext) -> None:
    """The stages of the enabled extensions that run at `when`, in registry order."""
    for extension in enabled(context.config):
        if extension.stage is not None and extension.stage.when == when:
            extension.stage.run(context)


def planned_calls(config: Any) -> list[tuple[str, When | None, PlannedCalls]]:
    """(stage, when, planned calls) of every enabled extension that plans some; the stage is its folder
    (its name where it has no stage of its own)."""
    planned = []
    for extension in enabled(config):
        if extension.plan is not None:
            stage = extension.stage
            planned.append((stage.folder if stage else extension.name, stage.when if stage else None,
                            extension.plan(config)))
    return planned


def verdict_sections() -> tuple[VerdictSection, ...]:
    """Every extension's verdict sections (each renders "" where its part has nothing to say)."""
    return tuple(section for extension in extensions().values() for section in extension.verdict)


def track_payloads(config: dict) -> list[TrackPayload]:
    """The MLflow payloads of the extensions `config` (config.json's data) turns on; each one's block
    enters the track stage's key."""
    from pipelines.reporting.track import TrackPayload

    payloads = []
    for extension in enabled(config):
        if extension.mlflow is not None:
            block = extension.block(config)
            payloads.append(TrackPayload(extension.name, _bound(extension.mlflow.log, block), _json(block),
                                         extension.mlflow.code))
    return payloads


def run_tags(config: Any) -> dict[str, str]:
    """The MLflow tags every extension gives every run, on or off."""
    tags: dict[str, str] = {}
    for extension in extensions().values():
        if extension.tags is not None:
            tags.update(extension.tags(config))
    return tags


def _bound(log: Callable[[TrackContext, Any], None], block: Any) -> Callable[[TrackContext], None]:
    return lambda context: log(context, block)


def _json(block: Any) -> Any:
    return block.model_dump(mode="json") if hasattr(block, "model_dump") else block



# --- the hooks: the judge loop, the statistics, MLflow, the gate, the command options -------------------

def judge_loop_policy(config: Any, suite: str, family: tuple[str, ...],
                      baseline: Baseline | None = None) -> JudgeLoopPolicy:
    """The judge-loop policy of one judge stage: the enabled extension's (at most one), else the default."""
    from tasks.runtime.judge_loop import BOUNDED_BATCHES

    loops = [extension for extension in enabled(config) if extension.judge_loop is not None]
    if len(loops) > 1:
        raise ValueError(f"one judge-loop policy per run, got {[extension.name for extension in loops]}")
    if not loops:
        return BOUNDED_BATCHES
    return loops[0].judge_loop.policy(JudgeLoopContext(config, suite, family, baseline))


def judge_loop_line(config: Any, summary: dict) -> str:
    """What the enabled judge-loop policy adds to a judge stage's console line."""
    return "".join(extension.judge_loop.line(summary) for extension in enabled(config)
                   if extension.judge_loop is not None)


def statistics_contributors() -> tuple[StatisticsContributor, ...]:
    """Every extension's statistics contributor (the reduce stage and `ccrs stats` hand them on)."""
    return tuple(extension.statistics for extension in extensions().values() if extension.statistics)


def metrics_contributions() -> tuple[MetricsContribution, ...]:
    """Every extension's MLflow metrics of stats.json (the track stage logs them)."""
    return tuple(extension.metrics for extension in extensions().values() if extension.metrics)


def gate_cells() -> tuple[GateCells, ...]:
    """Every extension's gate cell kind, in registry order (a later one decides over an earlier one)."""
    return tuple(extension.gate for extension in extensions().values() if extension.gate)


def gate_statuses() -> tuple[GateStatus, ...]:
    """The night's outcomes the gate cell kinds add, in registry order."""
    return tuple(kind.status for kind in gate_cells() if kind.status is not None)


def run_stops() -> tuple[type[RunStopped], ...]:
    """The exceptions with which extensions stop a run before judging (each its status and exit code)."""
    return tuple(extension.stops() for extension in extensions().values() if extension.stops)


def baseline_lines(config: Any) -> list[Callable[[str | None], str]]:
    """The console lines of the enabled extensions that read the baseline's scores (empty: none does)."""
    return [extension.baseline for extension in enabled(config) if extension.baseline is not None]


def command_hooks(command: str) -> list[CommandOptions]:
    """The command options of the extensions that add some to `command`."""
    return [extension.options for extension in extensions().values() if extension.options
            and any(command in option.commands for option in extension.options.options)]


def sourced_outputs(args: argparse.Namespace | Mapping[str, Any], command: str) -> SourcedOutputs | None:
    """The outputs an extension's options of `command` name instead of files (None: none named)."""
    given = dict(args if isinstance(args, Mapping) else vars(args))
    found = [sourced for hook in command_hooks(command) if hook.outputs is not None
             if (sourced := hook.outputs(given, command)) is not None]
    if len(found) > 1:
        names = ", ".join(sourced.name for sourced in found)
        raise ValueError(f"the options name {len(found)} sources of outputs ({names}); "
                         "give one")
    return found[0] if found else None


def outputs_named(args: argparse.Namespace | Mapping[str, Any], command: str) -> bool:
    """Whether an extension's options of `command` in `args` name outputs (its config block is given),
    without reading them."""
    values = command_values(args, command)
    return any(extension.options.outputs is not None and extension.options.overrides is not None
               and values.get(name) and extension.options.overrides(values[name], command)
               for name, extension in extensions().items() if extension.options)


def add_command_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Every extension's options of `command` on its parser."""
    for extension in extensions().values():
        for option in extension.options.options if extension.options else ():
            if command in option.commands:
                option.option.add(parser, command)


def command_values(args: argparse.Namespace | Mapping[str, Any], command: str) -> dict[str, dict[str, Any]]:
    """{extension: {dest: value}} of the extensions' options of `command` in `args` (a Namespace, or the
    Python API's keyword arguments)."""
    given = args if isinstance(args, Mapping) else vars(args)
    return {extension.name: {option.dest: given[option.dest] for option in extension.options.options
                             if command in option.commands and option.dest in given}
            for extension in extensions().values() if extension.options}


def command_options(command: str) -> list[ExtensionOption]:
    """The extensions' options of `command` (`ccrs_eval.evaluate()` takes those of `evaluate`)."""
    return [option for extension in extensions().values() if extension.options
            for option in extension.options.options if command in option.commands]


def command_overrides(args: argparse.Namespace | Mapping[str, Any], command: str) -> dict[str, Any]:
    """The dotted config overrides of the extensions' options of `command` in `args` (ConfigError where
    they do not go together)."""
    overrides: dict[str, Any] = {}
    for name, values in command_values(args, command).items():
        options = extensions()[name].options
        if options.overrides is not None and values:
            overrides.update(options.overrides(values, command))
    return overrides
