"""Production traces as the systems of a run (docs/traces.md): `ccrs evaluate --traces EXPERIMENT` (and
`ccrs nightly --traces`, `ccrs_eval.evaluate(traces=...)`) reads the traces of an MLflow experiment as the
outputs table instead of files (pipelines/tools/traces/: the selection, the mapping, the reasons a trace
cannot be used), judges them as any outputs, and writes every judgment back onto its trace as MLflow
feedback once the run is logged. Declared on the registry's hooks: its config block `traces` (the selection
and what was read, recorded with the run), its command options and the outputs they name, its verdict
section, and the write-back as its MLflow payload. Systems whose traces share no question are compared
unpaired by the `unpaired` extension."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.extensions.registry import (
    CommandOptions,
    ExtensionOption,
    MlflowPayload,
    RunExtension,
    SourcedOutputs,
    register_extension,
)
from pipelines.option_schema import ANY_COMMAND, Option
from pipelines.reporting.verdict import VerdictInputs, VerdictSection

KEY = "traces"
COMMANDS = ("evaluate", "nightly")
FAILED_KEPT = 200  # failed traces listed in config.json (all are counted)
# the CCRS judge inputs the outputs table gives per row, and its column (tasks/outputs.py FIELD_INPUTS)
ROW_INPUTS = {"context": "contexts", "ground_truth": "reference"}


class TracesBlock(BaseModel):
    """`traces:` of a run config: which traces are the run's outputs; `selected`: what the selection found
    and read (written by the command, recorded with the run)."""

    model_config = ConfigDict(extra="forbid")

    experiment: str = Field(min_length=1)
    tracking_uri: str | None = None
    filter: str | None = None
    since: str | None = None
    max_traces: int | None = Field(default=None, ge=1)
    sample: int | None = Field(default=None, ge=1)
    seed: int = 0
    system_from: str | None = None
    mapping: str | None = None
    write_back: bool = True
    selected: dict[str, Any] | None = None


# --- the options and the outputs they name

def _option(flag: str, meaning: str, kind: dict, **declared) -> ExtensionOption:
    return ExtensionOption(Option(flag, meaning, kind, **declared), COMMANDS)


OPTIONS = (
    _option("--traces", "judge the traces of this MLflow experiment (name or id, in --tracking-uri's store) "
            "instead of outputs files (docs/traces.md)", {"metavar": "EXPERIMENT"}),
    _option("--filter", "with --traces: MLflow's trace filter, e.g. \"tags.variant = 'B'\"",
            {"metavar": "STRING"}),
    _option("--since", "with --traces: traces started since a duration ago (30m, 24h, 7d) or an ISO time",
            {"metavar": "WHEN"}),
    _option("--max-traces", "with --traces: the newest N of the matching traces",
            {"type": int, "metavar": "N"}),
    _option("--system-from", "with --traces: one system per value of a trace tag, metadata key or root span "
            "attribute (tag:NAME, metadata:NAME, attribute:NAME)", {"metavar": "tag:NAME"},
            defaults={ANY_COMMAND: (None, "one system, the experiment")}),
    _option("--mapping", "with --traces: a YAML file naming where an app's question, answer and contexts are",
            {"metavar": "FILE"}),
    _option("--no-write-back", "with --traces: do not write the judgments back onto the traces as feedback",
            {"action": "store_true"}),
)
TRACE_ONLY = ("filter", "since", "max_traces", "system_from", "mapping", "no_write_back")


def _shared(flag: str, commands: tuple[str, ...]) -> ExtensionOption:
    from pipelines.options import SHARED

    return ExtensionOption(SHARED[flag], commands)


def overrides(values: dict[str, Any], command: str) -> dict[str, Any]:
    """`--traces EXPERIMENT [...]` as the run config's `traces` block."""
    from pipelines.config import ConfigError

    if values.get("traces") is None:
        given = [f"--{name.replace('_', '-')}" for name in (*TRACE_ONLY, "sample") if values.get(name)]
        if given:
            raise ConfigError(f"{', '.join(given)} need --traces EXPERIMENT")
        return {}
    block = TracesBlock(experiment=values["traces"], tracking_uri=values.get("tracking_uri"),
                        filter=values.get("filter"), since=values.get("since"),
                        max_traces=values.get("max_traces"),
                        sample=values.get("sample"), seed=values.get("seed") or 0,
                        system_from=values.get("system_from"), mapping=values.get("mapping"),
                        write_back=not values.get("no_write_back"))
    return {KEY: block.model_dump(exclude={"selected"})}


def outputs(values: dict[str, Any], command: str) -> SourcedOutputs | None:
    """The traces `--traces` names as the outputs table (a `trace_id` per row), the run's name, and the
    record of what was selected and read; None without --traces. A ValueError (one line) where nothing
    usable is selected."""
    if values.get("traces") is None:
        return None
    from pipelines.tools.traces.mapping import TraceInputError, trace_rows
    from pipelines.tools.traces.select import select_traces

    block = TracesBlock.model_validate(overrides(values, command)[KEY])
    selection = _selection(block)
    selected = select_traces(selection)
    read = trace_rows(selected.traces, selection, experiment_name=selected.experiment_name)
    if read.rows.empty:
        raise TraceInputError(f"none of the {len(read.failed)} selected traces of "
                              f"{selected.experiment_name!r} "
                              f"can be judged: {_reasons(read.failure_counts)}")
    rows, chosen, note = _judgeable(read.rows, values)
    record = {"selection": selected.record, "read": read.summary(),
              "failed": read.failed.head(FAILED_KEPT).to_dict("records"), "metrics_note": note}
    # the command's --seed and --tracking-uri (options of other declarations) as the selection used them
    found = {f"{KEY}.seed": block.seed, f"{KEY}.tracking_uri": block.tracking_uri, f"{KEY}.selected": record}
    found |= {"judge.ccrs.metrics": chosen} if chosen else {}
    return SourcedOutputs(rows, f"traces-{selected.experiment_name}", found)


def _selection(block: TracesBlock):
    from pipelines.options import dataset_path
    from pipelines.tools.traces.mapping import TraceMapping
    from pipelines.tools.traces.select import TraceSelection

    mapping = TraceMapping.from_file(dataset_path(block.mapping)) if block.mapping else TraceMapping()
    return TraceSelection(experiment=block.experiment, tracking_uri=block.tracking_uri,
                          filter_string=block.filter, since=block.since, max_traces=block.max_traces,
                          sample=block.sample, seed=block.seed, system_from=block.system_from,
                          mapping=mapping)


def _judgeable(rows, values: dict[str, Any]):
    """(rows, CCRS metrics to judge or None for the config's, a note): a judge input that only some traces
    give (contexts without a retriever span, a reference only where an expectation was logged) leaves the
    metrics that need it out unless --metrics names them, and then every row must have it."""
    from judges.suite import get_suite
    from pipelines.config import load_config

    lacking = {judge_input: int((rows[column].map(len) == 0).sum())
               for judge_input, column in ROW_INPUTS.items()
               if column in rows}
    partial = {judge_input for judge_input, missing in lacking.items() if missing}
    if not partial:
        return rows, None, ""
    metrics = get_suite("ccrs").metrics
    named = values.get("metrics")
    if named:
        wrong = [name for name in named if name in metrics and set(metrics[name].inputs) & partial]
        if wrong:
            counts = ", ".join(f"{lacking[i]} lack {i}" for i in sorted(partial))
            raise ValueError(f"--metrics {','.join(wrong)} need {' and '.join(sorted(partial))} on every "
                             f"trace; {counts}: select the traces "
                             "that have it (--filter) or leave those metrics out")
        return rows, None, ""
    configured = load_config(values.get("config")).judge.ccrs.metrics
    kept = [name for name in configured if not set(metrics[name].inputs) & partial]
    left_out = [name for name in configured if name not in kept]
    counts = ", ".join(f"{lacking[i]} traces lack {i}" for i in sorted(partial))
    note = (f"{', '.join(left_out)} left out: {counts}"
            if left_out else "")
    return rows, kept or None, note


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in counts.items()) or "none read"


# --- the verdict

def section(inputs: VerdictInputs) -> str:
    """What the run read: the selection, the traces used and those that could not be, by reason."""
    block = (inputs.config or {}).get(KEY) or {}
    selected = block.get("selected")
    if not selected:
        return ""
    read, selection = selected["read"], selected["selection"]
    lines = ["## Traces", f"Experiment {block['experiment']!r}: {read['traces']} traces selected "
             f"({_selection_said(selection)}), {read['rows']} judged as "
             f"{', '.join(f'{system} ({n})' for system, n in read['systems'].items())}."]
    if read["failed"]:
        lines.append(f"Not judged: {_reasons(read['failed'])} (config.json traces.selected.failed lists "
                     "them).")
    if read["warnings"]:
        lines.append(f"Judged with a caveat: {_reasons(read['warnings'])}.")
    if selected.get("metrics_note"):
        lines.append(selected["metrics_note"] + ".")
    lines.append("Each judgment is written back onto its trace as feedback `ccrs/<metric>` once the run is "
                 "logged" + ("." if block.get("write_back", True) else " (off: --no-write-back)."))
    return "\n\n".join(lines)


def _selection_said(selection: dict) -> str:
    said = [f"filter {selection['filter_string']!r}" if selection.get("filter_string") else "",
            f"since {selection['since']}" if selection.get("since") else "",
            f"newest {selection['max_traces']}" if selection.get("max_traces") else "",
            f"a sample of {selection['sample']} (seed {selection['seed']})" if selection.get("sample")
            else ""]
    return ", ".join(part for part in said if part) or "all"


# --- the write-back

def write_back(context, block: TracesBlock | None) -> None:
    """Every judgment of the run as feedback on its trace (idempotent: a rerun writes none twice)."""
    import json

    import pandas as pd

    from infra.console import say
    from pipelines.tools.traces.write_back import write_feedback
    from tasks.runtime.layout import RunLayout

    if block is None or not block.write_back:
        return
    layout = RunLayout(context.run_dir)
    generations = pd.read_parquet(layout.generations)
    if "answer_id" not in generations:
        return
    trace_ids = {(str(q), str(s)): str(t) for q, s, t in
                 zip(generations["query_id"], generations["system"], generations["answer_id"])}
    judgments = pd.concat([pd.read_parquet(layout.judgments(suite)) for suite in layout.judged_suites()],
                          ignore_index=True)
    summary = write_feedback(judgments, trace_ids, block.tracking_uri or context.tracking_uri, context.run_id,
                             judge_model=(context.config.get("judge") or {}).get("model"))
    (context.out_dir / "traces_write_back.json").write_text(json.dumps(summary.as_dict(), indent=2))
    say(f"traces: {summary.written} feedback written on {summary.traces} traces"
        f"{f', {summary.already_present} already there' if summary.already_present else ''}"
        f"{f', {len(summary.errors)} errors (traces_write_back.json)' if summary.errors else ''}", err=True)


register_extension(RunExtension(
    name=KEY,
    description="production traces: an MLflow experiment's traces as the run's outputs, judgments written "
                "back as feedback",
    key=KEY,
    model=TracesBlock,
    paths=("mapping",),
    verdict=(VerdictSection("header", section),),
    mlflow=MlflowPayload(write_back, code=(__name__, "pipelines.tools.traces.write_back")),
    tags=lambda config: {"ccrs.traces": block.experiment} if (block := _block(config)) else {},
    options=CommandOptions((*OPTIONS, _shared("--sample", COMMANDS), _shared("--seed", ("evaluate",))),
                           overrides,
                           outputs=outputs),
    names=(r"TracesBlock", r"write_feedback", r"trace_rows", r"select_traces"),
    rank=70,
))


def _block(config: Any) -> TracesBlock | None:
    from pipelines.extensions import extensions

    return extensions()[KEY].block(config)
