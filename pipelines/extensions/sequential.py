"""Sequential judging (`judge.sequential`, docs/sequential.md): the judge stages judge the questions in a
seeded random order, in looks, and stop once every comparison is settled (tasks/runtime/sequential_judging.py,
stats/sequential.py). Declared here on the registry's hooks: its judge-loop policy, its block of stats.json
(`sequential`, the judge stages' sequential.json merged), its verdict section, its MLflow metrics, its gate
cells (a night settled against its baseline), its command options (`--sequential`, `--margin`,
`--look-every`; `ccrs stats --sequential` replays scores) and its files (judge_<suite>/sequential.json)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.config import BLOCK_ON
from pipelines.option_schema import ANY_COMMAND, Option
from pipelines.extensions.registry import (
    CommandOptions,
    ExtensionOption,
    GateCells,
    GateInputs,
    JudgeLoop,
    JudgeLoopContext,
    RunExtension,
    register_extension,
)
from pipelines.reporting.tracking import MetricsContribution
from pipelines.reporting.verdict import VerdictInputs, VerdictSection
from stats.sequential import DEFAULT_TARGET, TARGETS
from tasks.runtime.contributions import StatisticsContext, StatisticsContributor
from tasks.runtime.layout import JUDGE_PREFIX
from tasks.runtime.sequential_judging import (
    SEQUENTIAL_FILE,
    SequentialJudging,
    SequentialOptions,
    merged_sequential,
)
from tasks.runtime.stage import file_fingerprint

SEQUENTIAL_NOTE = ("sequential cells (basis `sequential`): the night was judged with judge.sequential and "
                   "stopped once every (system, metric) cell was settled against this baseline; the verdict "
                   "is the anytime-valid decision (`sequential`: regressed, improved, within the margin or "
                   "open), the paired test on the judged questions beside it is descriptive.")
RUN_COMMANDS = ("run", "evaluate", "nightly")


# --- the judge loop

def policy(context: JudgeLoopContext) -> SequentialJudging:
    from judges.suite import get_suite

    metrics = get_suite(context.suite).selected_metrics(context.config.judge)
    return SequentialJudging(SEQUENTIAL.block(context.config), metrics, context.family, context.baseline)


def metrics_judged(config: Any) -> None:
    """judge.sequential.metrics names metrics the run judges (checked when a config is loaded)."""
    from judges.suite import get_suite

    chosen = SEQUENTIAL.block(config).metrics
    if chosen is None:
        return
    judged = [metric for name in config.judges for metric in get_suite(name).selected_metrics(config.judge)]
    wrong = [metric for metric in chosen if metric not in judged]
    if wrong or not chosen:
        raise ValueError(f"judge.sequential.metrics {wrong or '[]'}: name metrics this run judges, "
                         f"from {judged}")


def settled_line(summary: dict) -> str:
    """`; stopped after 40 of 120 questions: 480 of 1,440 judge calls not sent (67%)`."""
    sequential = summary.get("sequential")
    if not sequential:
        return ""
    total, not_sent = sequential["judge_calls_total"], sequential["judge_calls_not_sent"]
    return (f"; stopped after {sequential['stopped_at']} of {sequential['n_questions']} questions: "
            f"{not_sent:,} of {total:,} judge calls not sent ({not_sent / total if total else 0:.0%})")


def baseline_line(found: str | None) -> str:
    """The night's console line: what its judge stages are settled against."""
    return "judge.sequential: " + (f"the night stops once every (system, metric) cell is settled against "
                                   f"baseline {found}" if found else "no baseline yet: the night stops once "
                                   "its systems' comparisons are settled")


# --- the statistics, the verdict, MLflow

def _records(context: StatisticsContext) -> list[Path]:
    return [path.parent / SEQUENTIAL_FILE for path in context.scores_paths]


def block(context: StatisticsContext) -> dict | None:
    """stats.json["sequential"]: the run stopped once its comparisons were settled."""
    return merged_sequential(_records(context))


def fingerprint(context: StatisticsContext) -> list[str]:
    return [file_fingerprint(path) for path in _records(context) if path.is_file()]


def section(inputs: VerdictInputs) -> str:
    from pipelines.reporting.sequential import sequential_section

    return sequential_section(inputs.stats)


def run_metrics(stats: dict) -> dict[str, float]:
    """Where the run stopped and what it decided."""
    sequential = stats.get("sequential")
    if not sequential:
        return {}
    metrics = {"sequential_stopped_at": sequential["stopped_at"],
               "sequential_judge_calls_saved_share": sequential["judge_calls_saved_share"]}
    for decision in ("different", "equivalent", "open"):
        metrics[f"sequential_{decision}"] = sum(item["decision"] == decision
                                                for item in sequential["decisions"])
    return metrics


# --- the gate

def with_sequential_decisions(table: pd.DataFrame, sequential: dict | None, base_id: str) -> pd.DataFrame:
    """A night judged with judge.sequential against this baseline: each cell's verdict is its anytime-valid
    decision (regression: the interval of run - baseline lies below 0; same: within the margin or still
    open), `basis` sequential; the fixed-n paired test's columns stay, descriptive."""
    if not sequential or sequential.get("baseline_run") != base_id:
        return table
    verdicts = {(d["a"], d["metric"]): _cell_verdict(d) for d in sequential["decisions"]}
    cells = list(zip(table["system"], table["metric"]))
    decided = [cell in verdicts for cell in cells]
    table = table.assign(basis=np.where(decided, "sequential", table.get("basis", "judge")),
                         sequential=[verdicts.get(cell, (None, None))[1] for cell in cells])
    table["verdict"] = [verdicts[cell][0] if cell in verdicts else verdict
                        for cell, verdict in zip(cells, table["verdict"])]
    return table


def _cell_verdict(decision: dict) -> tuple[str, str]:
    """(gate verdict, the decision as said) of one sequential (system, metric) decision."""
    low, high = decision["interval"]
    if decision["decision"] == "different":
        return ("regression", "regressed") if high < 0 else ("improvement", "improved")
    return "same", "within the margin" if decision["decision"] == "equivalent" else "open"


def gate(table: pd.DataFrame, inputs: GateInputs) -> pd.DataFrame:
    return with_sequential_decisions(table, (inputs.run_stats or {}).get("sequential"), inputs.base_id)


# --- the command options

def overrides(values: dict[str, Any], command: str) -> dict[str, Any]:
    """`--sequential [--margin M] [--look-every N]` (or `ccrs_eval.evaluate(sequential=...)`) as dotted
    overrides of judge.sequential: True turns it on (the config's block, else its defaults), a dict of its
    fields also sets them (`{"margin": 0.05}`), False turns a config's block off, None leaves the config."""
    from pipelines.config import ConfigError

    sequential = values.get("sequential")
    given = {field: values[field] for field in ("margin", "look_every") if values.get(field) is not None}
    if sequential is None or sequential is False:
        if given:
            raise ConfigError("--margin and --look-every need --sequential")
        return {} if sequential is None else {"judge.sequential": None}
    if isinstance(sequential, dict):
        given = {**sequential, **given}
    elif sequential is not True:
        raise ConfigError(f"sequential: expected True, False, None or a dict of judge.sequential fields, got "
                          f"{sequential!r}")
    return {"judge.sequential": BLOCK_ON} | {f"judge.sequential.{key}": value for key, value in given.items()}


def check_stats(args: argparse.Namespace) -> None:
    from pipelines.tools.sequential_replay import check_sequential_options

    check_sequential_options(args)


def stats_verdict(args: argparse.Namespace, frame: pd.DataFrame, verdict: str) -> str:
    """`ccrs stats --sequential`: the scores replayed as a sequential run, its section added."""
    from pipelines.tools.sequential_replay import sequential_replay

    return sequential_replay(args, frame, verdict) if args.sequential else verdict


def power_plan(args: argparse.Namespace, pilot: pd.DataFrame, plan: dict) -> dict:
    """`ccrs plan power --sequential --margin M`: a sequential run of the planned questions, simulated."""
    from judges.suite import metric_order
    from pipelines.tools.planning.power import sequential_plan
    from stats.errors import StatsInputError

    if not args.sequential and args.margin is None:
        return {}
    if args.margin is None:
        raise StatsInputError("--sequential needs --margin M on `plan power`: the margin the simulated runs "
                              "decide equivalence with")
    return {"sequential": sequential_plan(pilot, plan, args.margin, args.look_every,
                                          args.sequential_replicates, metric_order())}


SEQUENTIAL_COMMANDS = (*RUN_COMMANDS, "stats", "plan power")
OPTIONS = (
    ExtensionOption(Option(
        "--sequential", "sequential judging (judge.sequential, docs/sequential.md): questions in a seeded "
        "random "
        "order, stopping once every comparison is settled; `stats` replays the scores so, `plan power` "
        "simulates it on the planned questions", {"action": "store_true", "default": None}),
        SEQUENTIAL_COMMANDS),
    ExtensionOption(Option(
        "--margin", "with --sequential: pairs whose interval lies in [-M, M] on the [0, 1] score scale are "
        "equivalent (judge.sequential.margin)", {"type": float, "metavar": "M"},
        aliases={"plan power": ("--sequential-margin",)}), SEQUENTIAL_COMMANDS),
    ExtensionOption(Option(
        "--look-every", "with --sequential: questions judged between two looks (judge.sequential.look_every)",
        {"type": int, "metavar": "N"}, {"plan power": (None, "a twentieth of the planned questions")}),
        SEQUENTIAL_COMMANDS),
    ExtensionOption(Option(
        "--min-questions", "with --sequential: no stop before N questions", {"type": int, "metavar": "N"},
        {ANY_COMMAND: (None, "0")}), ("stats",)),
    ExtensionOption(Option(
        "--max-questions", "with --sequential: stop after N questions at the latest",
        {"type": int, "metavar": "N"},
        {ANY_COMMAND: (None, "all")}), ("stats",)),
    ExtensionOption(Option(
        "--sequential-replicates", "with --sequential: simulated sequential runs",
        {"type": int, "metavar": "R"},
        {ANY_COMMAND: (50, "50")}), ("plan power",)),
    ExtensionOption(Option(
        "--target", "with --sequential: decide about the population of questions the scores are drawn from "
        "(population, as the HSD), or about these questions only (questions: sampling without replacement)",
        {"choices": TARGETS}, {ANY_COMMAND: (None, DEFAULT_TARGET)}), ("stats",)),
)


SEQUENTIAL = register_extension(RunExtension(
    name="sequential",
    description="sequential judging: questions in a seeded random order, the judge stages stop once every "
                "comparison is settled",
    key="judge.sequential",
    model=SequentialOptions,
    on=lambda options: options is not None,
    validate=metrics_judged,
    judge_loop=JudgeLoop(policy, settled_line),
    statistics=StatisticsContributor("sequential", key="sequential", block=block, fingerprint=fingerprint,
                                     code=(__name__, "tasks.runtime.sequential_judging")),
    verdict=(VerdictSection("header", section),),
    metrics=MetricsContribution(run_metrics=run_metrics),
    gate=GateCells(gate, "sequential", SEQUENTIAL_NOTE),
    options=CommandOptions(OPTIONS, overrides, check=check_stats, stats_verdict=stats_verdict,
                           power_plan=power_plan),
    baseline=baseline_line,
    files=(f"{JUDGE_PREFIX}<suite>/{SEQUENTIAL_FILE}",),
    names=(r"sequential", r"settled_line"),
    rank=50,
))
