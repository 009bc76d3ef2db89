"""The nightly gate's outcome said: the Markdown report of a comparison (the table, the MDD note, the
contributed cells' notes, the questions that moved most), its JSON summary, the alert (a Slack-compatible
payload POSTed to a webhook), the line in the run's MLflow description, the console and the exit code
(`ccrs compare`, `ccrs nightly`)."""
from __future__ import annotations

import argparse
import json
import os

import pandas as pd

from infra.console import say
from pipelines.tools.gate.decide import (
    MDD_POWER,
    Comparison,
    GateOptions,
    RegressionReport,
    cell_status,
    differing_text,
    in_cells,
    stop_headline,
)
from pipelines.tools.gate.fetch import MOVES_ARTIFACT, SUMMARY_MARKDOWN

ALERT_MOVES = 3  # the largest drops named in the alert's text
ALERT_FIELD_CHARS = 300  # an answer or judge reply in the alert's `moves` (the MLflow table has them whole)
MARKDOWN_TEXT_CHARS = 160  # an answer or judge reply in the report's tables; the MLflow table keeps more
MDD_NOTE = ("mdd: the minimum detectable difference of each cell, the smallest drop that its n questions "
            "find with power {power:.0%} (paired t approximation at the Holm first-step level "
            "{alpha}/{cells}); a 'same' verdict rules out only drops larger than its mdd.")
HEADLINES = {
    "failure_rate": lambda report: f"{report.failure_rate:.1%} of the judgments failed",
    "incomparable": lambda report: "judged otherwise than the baseline: " + ", ".join(
        f"{k} {old} -> {new}" for k, (old, new) in report.differing.items()),
    "baseline": lambda report: (f"no baseline yet for series {report.series or 'unknown'}: this run is the "
                                "baseline" + (f" (this experiment also holds series "
                                              f"{', '.join(report.other_series)})" if report.other_series
                                              else "")),
    "regression": lambda report: (f"regression in {len(report.regressed_cells())} cell(s): "
                                  + ", ".join(report.regressed_cells())),
    "crash": lambda report: "the run crashed",
    "setup_error": lambda report: "the run could not start",
    "pass": lambda report: "no regression",
}


# --- the report ---------------------------------------------------------------------------------------------

def comparison_markdown(comparison: Comparison, run_id: str, base_id: str, series: str, rate: float,
                        options: GateOptions, differing: dict) -> str:
    """The report of a paired comparison (`series`: as fetch.series_said says it)."""
    table = comparison.table
    allowed = (f"\n\nCompared despite different judge settings (--allow-judge-change): "
               f"{differing_text(differing)}." if differing else "")
    return "\n\n".join(part for part in (
        f"Regression check of run {run_id} against {base_id} (series {series}; paired sign-flip test, "
        f"B={options.b}, Holm over {len(table)} cells, alpha={options.alpha}; failed judgments {rate:.1%})",
        unpaired_line(comparison.unpaired),
        table.to_markdown(index=False, floatfmt=".4f"),
        MDD_NOTE.format(power=MDD_POWER, alpha=options.alpha, cells=len(table)) + allowed,
        *comparison.notes,
        moves_markdown(comparison.moves, table, comparison.listed)) if part)


def unpaired_line(unpaired: dict[str, list[str]]) -> str:
    """One line naming the systems left out of the comparison; "" when there are none."""
    labels = {"run_only": "only in this run", "baseline_only": "only in the baseline"}
    parts = [f"{label}: {', '.join(unpaired[key])}" for key, label in labels.items() if unpaired.get(key)]
    return f"Systems not compared ({'; '.join(parts)})." if parts else ""


def moves_markdown(moves: pd.DataFrame, table: pd.DataFrame, cells: list[tuple[str, str]] | None) -> str:
    """The report's section: per listed cell, its movers with both nights' scores, answers and replies."""
    listed = list(zip(table["system"], table["metric"])) if cells is None else cells
    if not listed:
        return ""
    cell_rows = table.set_index(["system", "metric"])
    parts = ["## What moved, question by question"]
    for system, metric in listed:
        cell = cell_rows.loc[(system, metric)]
        rows = moves[(moves["system"] == system) & (moves["metric"] == metric)]
        parts.append(f"### {system}/{metric}: {cell['diff']:+.3f} ({cell['verdict']}), "
                     f"the {len(rows)} question(s) that moved most")
        if rows.empty:
            parts.append("No question's score moved.")
            continue
        shown = pd.DataFrame({
            "question": [_short(q or i) for q, i in zip(rows["question"], rows["query_id"])],
            "baseline": rows["score_baseline"].to_numpy(), "run": rows["score_run"].to_numpy(),
            "move": rows["move"].to_numpy(),
            "answer (baseline)": rows["answer_baseline"].map(_short),
            "answer (run)": rows["answer_run"].map(_short),
            "judge (baseline)": rows["judge_baseline"].map(_short),
            "judge (run)": rows["judge_run"].map(_short)})
        parts.append(shown.to_markdown(index=False, floatfmt=".3f"))
    return "\n\n".join(parts)


def summary(report: RegressionReport) -> dict:
    """The outcome as regression/summary.json holds it."""
    moves_logged = report.moves is not None and not report.moves.empty
    return {"status": report.status, "baseline": report.baseline_id, "series": report.series,
            "other_series": list(report.other_series), "failure_rate": report.failure_rate,
            "differing": report.differing, "systems_not_compared": report.unpaired,
            "cells": [] if report.table is None else report.table.to_dict(orient="records"),
            "moves": MOVES_ARTIFACT if moves_logged else None}


def _short(text: str) -> str:
    """A markdown table cell: one line, `|` escaped."""
    return _one_line(text, MARKDOWN_TEXT_CHARS).replace("|", "\\|")


def _one_line(text: str, limit: int) -> str:
    """`text` on one line, cut at `limit` characters; "(empty)" for no text."""
    flat = " ".join(str(text).split())
    if not flat:
        return "(empty)"
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


# --- the alert ----------------------------------------------------------------------------------------------

def alert_moves_text(moves: pd.DataFrame | None, regressed: list[tuple[str, str]]) -> str:
    """The ALERT_MOVES largest drops of the regressed cells, for the alert's text ("" when none)."""
    if moves is None or moves.empty or not regressed:
        return ""
    drops = moves[in_cells(moves, regressed) & (moves["move"] < 0).to_numpy()]
    drops = drops.sort_values(["move", "query_id"]).head(ALERT_MOVES)
    items = [f'{row.system}/{row.metric} "{_one_line(row.question or row.query_id, 60)}" '
             f'{row.score_baseline:.2f} -> {row.score_run:.2f} (answer now "{_one_line(row.answer_run, 60)}")'
             for row in drops.itertuples()]
    return "Largest drops: " + "; ".join(items) + "." if items else ""


def headline(report: RegressionReport) -> str:
    """The alert's headline of the outcome: the gate's own statuses, else the stopping extension's, else
    the gate cell kind's whose outcome it is."""
    said = HEADLINES.get(report.status)
    if said:
        return said(report)
    kind = cell_status(report.status)
    if kind is not None:
        return kind.headline(report.cells_with(kind.verdict))
    return stop_headline(report.status) or report.status


def alert_payload(report: RegressionReport) -> dict:
    """A Slack-compatible message (`text`) and the machine-readable outcome."""
    table = [] if report.table is None else json.loads(report.table.to_json(orient="records"))
    regressed = report.failing_pairs()
    extra = " ".join(part for part in (alert_moves_text(report.moves, regressed),
                                       unpaired_line(report.unpaired)) if part)
    moves = [] if report.moves is None else [
        {key: _one_line(value, ALERT_FIELD_CHARS) if isinstance(value, str) else value
         for key, value in row.items()}
        for row in json.loads(report.moves[in_cells(report.moves, regressed)].to_json(orient="records"))]
    return {"text": f"ccrs nightly [{report.experiment}] {report.status.upper()} (exit {report.exit_code}): "
                    f"{headline(report)}. {extra + ' ' if extra else ''}"
                    f"Run {report.run_id}, baseline {report.baseline_id or 'none'}.",
            "status": report.status, "exit_code": report.exit_code, "experiment": report.experiment,
            "run_id": report.run_id, "baseline_id": report.baseline_id, "series": report.series,
            "failure_rate": report.failure_rate,
            "differing": {k: list(v) for k, v in report.differing.items()}, "cells": table,
            "systems_not_compared": report.unpaired, "moves": moves, "detail": report.markdown[:3000]}


def notify(url: str, payload: dict, timeout_s: float = 15.0) -> str:
    """POST the payload as JSON; the outcome as one line (never the URL, which may hold a secret)."""
    import httpx

    try:
        response = httpx.post(url, json=payload, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"notification failed ({type(exc).__name__})"
    return f"notified (HTTP {response.status_code})"


def notify_target(value: str | None) -> str | None:
    """--notify URL, or env:NAME for a URL kept in the environment / secrets file (never printed)."""
    if not value or not value.startswith("env:"):
        return value
    name = value.removeprefix("env:")
    if not os.environ.get(name):
        raise ValueError(f"--notify {value}: the variable {name} is not set (secrets file or environment)")
    return os.environ[name]


# --- the commands' ends (`ccrs compare`, `ccrs nightly`) ----------------------------------------------------

def gate_options(args: argparse.Namespace, command: str) -> GateOptions:
    """The gate's limits from the options of pipelines.options.add_gate, and the values of the run
    extensions' options of `command` (their gate cell kinds read them)."""
    from pipelines.extensions.registry import command_values

    return GateOptions(alpha=args.alpha, b=args.b, seed=args.seed, max_failure_rate=args.max_failure_rate,
                       allow_judge_change=args.allow_judge_change, show_moves=args.show_moves,
                       extensions=command_values(args, command))


def describe_gate(uri: str, report: RegressionReport, command: str) -> None:
    """The gate's outcome in the checked run's MLflow Description, beside the verdict's headline (a
    failure to write it is said in one line: the gate's outcome stands)."""
    from mlflow.tracking import MlflowClient

    from pipelines.reporting.tracking import GATE_PREFIX, run_url, set_gate_status

    held = cell_status(report.status)
    cells = report.regressed_cells() + (report.cells_with(held.verdict) if held is not None else [])
    shown = "; ".join(cells[:5]) + (f"; and {len(cells) - 5} more" if len(cells) > 5 else "")
    try:
        experiment_id = MlflowClient(uri).get_run(report.run_id).info.experiment_id
        line = (f"{GATE_PREFIX} **{report.status}**"
                + (f" against run {report.baseline_id}" if report.baseline_id else "")
                + (f": {shown}" if cells else "") + f" ([{SUMMARY_MARKDOWN}]("
                + run_url(uri, experiment_id, report.run_id, SUMMARY_MARKDOWN) + "))")
        set_gate_status(uri, report.run_id, line)
    except Exception as exc:  # noqa: BLE001 - the gate's outcome stands; the description is a convenience
        say(f"{command}: the run's description lacks the gate's outcome ({type(exc).__name__}: {exc})",
            err=True)


def report_outcome(report: RegressionReport, notify_url: str | None, fail: bool = True) -> int:
    """The gate's outcome on the console (and as one JSON line), the alert, and the exit code."""
    say(report.markdown)
    say(json.dumps({"status": report.status, "run": report.run_id, "baseline": report.baseline_id,
                    "regressions": report.n_regressions, "failure_rate": round(report.failure_rate, 4),
                    "exit_code": report.exit_code}))
    if notify_url and report.status != "pass":
        say(notify(notify_url, alert_payload(report)), err=True)
    return report.exit_code if fail else 0
