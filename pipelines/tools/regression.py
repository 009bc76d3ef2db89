"""The nightly gate: a run checked against an accepted baseline run of the same experiment, on per-query
judgments stored in MLflow (`ccrs compare`, `ccrs nightly`; docs/nightly.md).

Which baseline: `previous` is the most recent earlier run of the same series (tag `ccrs.series`, the
experiment unless `--series` names one; a run logged before series tags by its config name,
`ccrs.config_name`), not ad hoc (`ccrs.adhoc`), that was accepted (`regression.status` pass, baseline or
accepted), or the first such run; `RUN_ID` and `tag:NAME` (the run tagged `ccrs.baseline=NAME`) name one.
Comparable means the same judge model, prompt versions, scoring mode and metric set (tags written by the
pipeline). Every outcome is a status with its exit code (STATUSES) and lands on the run as
`regression.status`.

What moved: for every regressed cell (or, with `show_moves`, every cell) the questions whose score moved
most, with both nights' answers, judge replies and scores (`question_moves`, a pure function of two
`sample_view` frames), in the report, as the MLflow table `regression/moves.json` and in the alert. Both
runs' judgments and answers are read from their logged artifacts, or from the run folder where the run's
own folder is on this machine. Systems only one of the two runs holds are named and left out."""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from infra.console import say
from pipelines.extensions.registry import GateInputs
from stats.multiple import holm_adjust
from stats.paired import paired_randomization_test
from stats.power import paired_minimum_detectable_difference
from tasks.calibration import STOP_EXIT_CODE
from tasks.runtime.judge_loop import Baseline
from tasks.runtime.layout import RunLayout
from stats.scores import REPEAT_COLUMN, SAMPLE_KEYS, mean_over_repeats
from tasks.runtime.stage import read_manifest
from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT, RAW_REPLY_MAX_CHARS, attach

MDD_POWER = 0.8

JUDGMENTS_ARTIFACT = "samples/judgments.parquet"
STATS_ARTIFACT = "stats/stats.json"
# an MLflow table, as the per-sample table (pipelines/reporting/tracking.py)
MOVES_ARTIFACT = "regression/moves.json"
MOVES_PER_CELL = 5  # questions listed per regressed cell unless --show-moves N says otherwise
ALERT_MOVES = 3  # the largest drops named in the alert's text
ALERT_FIELD_CHARS = 300  # an answer or judge reply in the alert's `moves` (the MLflow table has them whole)
MARKDOWN_TEXT_CHARS = 160  # an answer or judge reply in the report's tables; the MLflow table keeps more
MOVE_COLUMNS = ["system", "metric", "rank", "query_id", "question", "score_baseline", "score_run", "move",
                "answer_baseline", "answer_run", "judge_baseline", "judge_run"]


MDD_NOTE = ("mdd: the minimum detectable difference of each cell, the smallest drop that its n questions "
            "find with power {power:.0%} (paired t approximation at the Holm first-step level "
            "{alpha}/{cells}); a 'same' verdict rules out only drops larger than its mdd.")


# status -> exit code: the one table of `ccrs compare` / `ccrs nightly` outcomes (docs/nightly.md)
STATUSES = {
    "pass": 0,          # no cell regressed against the baseline
    "baseline": 0,      # no baseline yet: this run is the baseline
    "crash": 1,         # the run failed while running (logged as a FAILED MLflow run with its error)
    "setup_error": 2,   # bad config, inputs, store or run/baseline ids: nothing was compared
    "regression": 3,    # at least one (system, metric) cell dropped significantly (Holm over cells)
    "failure_rate": 4,  # more failed judgments than --max-failure-rate: the comparison is not trusted
    "incomparable": 5,  # the baseline was judged otherwise (judge model, prompts, scoring, repeats, metrics)
    "judge_calibration": STOP_EXIT_CODE,  # judge.preflight stopped the run before the judge stage (6)
}
ACCEPTED = ("pass", "baseline", "accepted")  # statuses that make a run a baseline for `previous`
SERIES_TAG = "ccrs.series"  # the series a run belongs to (pipelines/pipeline.py run_tags_of)
COMPARABLE = {"ccrs.judge_model": "judge model", "ccrs.prompt_versions": "prompt versions",
              "ccrs.scoring": "scoring mode", "ccrs.judge_repeats": "judge repeats",
              "ccrs.metrics": "metric set"}


class RegressionError(RuntimeError):
    """A setup error of the gate (exit 2): no such experiment or run, nothing to pair."""


@dataclass(frozen=True)
class GateOptions:
    alpha: float = 0.05
    b: int = 10_000
    seed: int = 0
    max_failure_rate: float = 0.05
    allow_judge_change: bool = False
    show_moves: int | None = None  # None: MOVES_PER_CELL movers of each regressed cell; N: of every cell


@dataclass(frozen=True)
class RegressionReport:
    """The gate's outcome on one run: its status (STATUSES), the baseline (None: there is none yet), the
    per-cell table (None when nothing was compared), the differing judge settings and the failure rate."""

    status: str
    run_id: str
    baseline_id: str | None
    table: pd.DataFrame | None
    n_regressions: int
    markdown: str
    failure_rate: float = 0.0
    differing: dict = field(default_factory=dict)
    experiment: str = ""
    moves: pd.DataFrame | None = None  # question_moves of the listed cells (None when nothing was compared)
    unpaired: dict = field(default_factory=dict)  # {"run_only": [...], "baseline_only": [...]} systems
    series: str = ""  # the run's series (series_label)
    other_series: tuple[str, ...] = ()  # the other series of the experiment's earlier runs (other_series)

    @property
    def exit_code(self) -> int:
        return STATUSES[self.status]

    def regressed_cells(self) -> list[str]:
        return [f"{r.system}/{r.metric} ({r.diff:+.3f}, adjusted p {r.adjusted_p:.4f})"
                for r in self._regressed_rows().itertuples()]

    def regressed_pairs(self) -> list[tuple[str, str]]:
        rows = self._regressed_rows()
        return list(zip(rows["system"], rows["metric"]))

    def _regressed_rows(self) -> pd.DataFrame:
        if self.table is None:
            return pd.DataFrame(columns=["system", "metric", "diff", "adjusted_p"])
        return self.table[self.table["verdict"] == "regression"]


# --- which runs ------------------------------------------------------------------------------------------

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


def baseline_line(run_id: str, series: str, others: tuple[str, ...]) -> str:
    """The report's line of a night with no baseline, naming the experiment's other series."""
    also = (f" This experiment also holds runs of series {', '.join(others)}; `--series` names the series of "
            "a night (the experiment by default)." if others else "")
    return f"Run {run_id}: no baseline yet for series {series}; this run is the baseline.{also}"


def baseline_scores(tracking_uri: str, experiment: str, series: str, config_name: str,
                    baseline: str = "previous") -> Baseline | None:
    """The run id and per-question scores of the baseline a night about to start will be compared with, for
    the run extensions that read them (a night settled against its baseline); None on the first night (no
    experiment or no earlier run of this series)."""
    from types import SimpleNamespace

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
        return Baseline(base.info.run_id, scored(_judgments(client, base, Path(tmp))))


def differing_settings(current, baseline) -> dict[str, tuple[str, str]]:
    """{setting: (baseline's, run's)} for the judge settings recorded on both runs that differ."""
    differing = {}
    for tag, label in COMPARABLE.items():
        ours, theirs = current.data.tags.get(tag), baseline.data.tags.get(tag)
        if ours is not None and theirs is not None and ours != theirs:
            differing[label] = (theirs, ours)
    return differing




def _judgments(client, run, work: Path) -> pd.DataFrame:
    """Every judgment of the run (failures included): its logged artifact, else its own run folder."""
    run_id = run.info.run_id
    try:
        return pd.read_parquet(client.download_artifacts(run_id, JUDGMENTS_ARTIFACT, str(work / run_id)))
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types for a missing artifact
        layout = _own_run_folder(run)
        if layout is None:
            raise RegressionError(f"run {run_id} has no {JUDGMENTS_ARTIFACT} in MLflow ({type(exc).__name__})"
                                  " and its run folder is not on this machine: nothing to compare") from exc
        return pd.concat([pd.read_parquet(layout.judgments(suite)) for suite in layout.judged_suites()],
                         ignore_index=True)


def _answers(client, run, work: Path) -> pd.DataFrame | None:
    """(query_id, system, answer, question) of the run: its logged per-sample table, else its own run
    folder; None when neither is at hand (the moves then show scores and judge replies only)."""
    run_id = run.info.run_id
    try:
        path = client.download_artifacts(run_id, PER_SAMPLE_TABLE_ARTIFACT, str(work / run_id))
        table = json.loads(Path(path).read_text())
        return pd.DataFrame(table["data"], columns=table["columns"])
    except Exception:  # noqa: BLE001 - a run logged before the table existed, or a store that lost it
        layout = _own_run_folder(run)
        if layout is None or not layout.generations.exists():
            return None
        answers = pd.read_parquet(layout.generations, columns=["query_id", "system", "answer"])
        questions = pd.read_parquet(layout.queries, columns=["query_id", "text"])
        return answers.merge(questions.rename(columns={"text": "question"}), on="query_id", how="left")


def _stats(client, run, work: Path) -> dict | None:
    """The run's stats.json (logged artifact, else its own run folder); None when neither is at hand."""
    try:
        return json.loads(Path(client.download_artifacts(run.info.run_id, STATS_ARTIFACT,
                                                         str(work / run.info.run_id))).read_text())
    except Exception:  # noqa: BLE001 - MLflow raises many types for a missing artifact
        layout = _own_run_folder(run)
        if layout is None or not layout.stats_json.is_file():
            return None
        return json.loads(layout.stats_json.read_text())


def contributed_cells(table: pd.DataFrame, inputs: GateInputs) -> tuple[pd.DataFrame, list[str]]:
    """The gate's table with the cells the run extensions decide (each its cell kind, in registry order:
    pipelines/extensions/), and the notes of the cell kinds that decided one."""
    from pipelines.extensions import gate_cells

    kinds = gate_cells()
    for kind in kinds:
        table = kind.decide(table, inputs)
    decided = set(table["basis"]) if "basis" in table else set()
    return table, [kind.note for kind in kinds if kind.basis in decided and kind.note]


def _own_run_folder(run) -> RunLayout | None:
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


def scored(judgments: pd.DataFrame) -> pd.DataFrame:
    """One score per (question, system, metric): a run that judged each more than once gives the mean of each
    sample's scored repeats (stats/scores.py), so that runs with and without repeats pair up."""
    ok = judgments[(judgments["status"] != "failed") & judgments["score"].notna()]
    columns = ["query_id", "system", "metric", "score"] + ([REPEAT_COLUMN] if REPEAT_COLUMN in ok else [])
    return mean_over_repeats(ok[columns])


def failure_rate(judgments: pd.DataFrame) -> float:
    return float((judgments["status"] == "failed").mean()) if len(judgments) else 0.0


def paired_table(current: pd.DataFrame, baseline: pd.DataFrame, alpha: float, b: int,
                 seed: int) -> pd.DataFrame:
    joined = current.merge(baseline, on=["query_id", "system", "metric"], suffixes=("_run", "_base"))
    if joined.empty:
        raise RegressionError("the two runs share no (query, system, metric) judgments")
    rng = np.random.default_rng(seed)
    cells = joined.groupby(["system", "metric"], sort=True)
    rows = []
    for (system, metric), cell in cells:
        result = paired_randomization_test(cell["score_run"].to_numpy(), cell["score_base"].to_numpy(), b,
                                           rng)
        mdd = paired_minimum_detectable_difference(
            cell["score_run"].to_numpy() - cell["score_base"].to_numpy(), alpha / cells.ngroups, MDD_POWER)
        rows.append({"system": system, "metric": metric, "n": result.n, "mean_run": cell["score_run"].mean(),
                     "mean_baseline": cell["score_base"].mean(), "diff": result.mean_diff,
                     "p_value": result.p_value, "mdd": np.nan if mdd is None else mdd})
    table = pd.DataFrame(rows)
    table["adjusted_p"] = holm_adjust(table["p_value"].to_numpy())
    table["significant"] = table["adjusted_p"] < alpha
    table["verdict"] = np.where(table["significant"],
                                np.where(table["diff"] < 0, "regression", "improvement"), "same")
    return table[[c for c in table.columns if c != "mdd"] + ["mdd"]]


# --- what moved, question by question (pure: frames in, frames out) --------------------------------------

def unpaired_systems(run: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, list[str]]:
    """The systems of two runs' judgments (or scores) that only one of them holds: {"run_only": [...],
    "baseline_only": [...]}, each sorted; both empty when the runs hold the same systems."""
    ours, theirs = set(run["system"]), set(baseline["system"])
    return {"run_only": sorted(ours - theirs), "baseline_only": sorted(theirs - ours)}


def unpaired_line(unpaired: dict[str, list[str]]) -> str:
    """One line naming the systems left out of the comparison; "" when there are none."""
    labels = {"run_only": "only in this run", "baseline_only": "only in the baseline"}
    parts = [f"{label}: {', '.join(unpaired[key])}" for key, label in labels.items() if unpaired.get(key)]
    return f"Systems not compared ({'; '.join(parts)})." if parts else ""


def sample_view(judgments: pd.DataFrame, answers: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per scored (question, system, metric) of a run: `score` as the gate pairs it (`scored`: the
    mean of the scored repeats), `judge` what the judge said (each judgment's raw reply, or its status and
    reason; judged more than once, one line per repeat, `[r]` first) and, from `answers` (query_id, system,
    answer and perhaps question), the answer and the question ("" where not at hand)."""
    said = judgments.assign(judge=[_judge_said(row) for row in judgments.itertuples()])
    notes = said.groupby(list(SAMPLE_KEYS), sort=False)["judge"].agg("\n".join).reset_index()
    view = scored(judgments).merge(notes, on=list(SAMPLE_KEYS), how="left")
    if answers is None:
        answers = pd.DataFrame(columns=["query_id", "system", "answer", "question"])
    columns = [c for c in ("answer", "question") if c in answers.columns]
    view = view.merge(answers[["query_id", "system", *columns]].drop_duplicates(["query_id", "system"]),
                      on=["query_id", "system"], how="left")
    for column in ("answer", "question"):
        view[column] = view[column].fillna("").astype(str) if column in view else ""
    return view


def _judge_said(row) -> str:
    """One judgment's reply (cut at RAW_REPLY_MAX_CHARS), its status and reason where it is not ok."""
    repeat = getattr(row, REPEAT_COLUMN, None)
    label = "" if repeat is None or pd.isna(repeat) else f"[{int(repeat)}] "
    raw = getattr(row, "raw", None)
    raw = raw.strip()[:RAW_REPLY_MAX_CHARS] if isinstance(raw, str) else ""
    reason = getattr(row, "reason", None)
    status = "" if row.status == "ok" else f"({row.status}: {reason})" if reason else f"({row.status})"
    return label + " ".join(part for part in (raw, status) if part)


def question_moves(run: pd.DataFrame, baseline: pd.DataFrame, cells: list[tuple[str, str]] | None,
                   top: int) -> pd.DataFrame:
    """The `top` questions of each cell (system, metric) whose score moved most from `baseline` to `run`
    (two `sample_view` frames; questions scored in both, as the paired test pairs them): the largest
    |move| first, a drop before a rise of the same size, then by query id; a question whose score did not
    move is left out. `cells` None: every cell both runs hold. Columns MOVE_COLUMNS, cells in (system,
    metric) order, `rank` 1.. within a cell."""
    joined = baseline.merge(run, on=list(SAMPLE_KEYS), suffixes=("_baseline", "_run"))
    joined["move"] = joined["score_run"] - joined["score_baseline"]
    joined = joined[joined["move"].abs() > 1e-12]
    if cells is not None:
        joined = joined[_in_cells(joined, cells)]
    joined = joined.assign(size=joined["move"].abs()).sort_values(
        ["system", "metric", "size", "move", "query_id"], ascending=[True, True, False, True, True])
    joined = joined.groupby(["system", "metric"], sort=False).head(max(top, 0))
    joined["rank"] = joined.groupby(["system", "metric"], sort=False).cumcount() + 1
    tonight = joined["question_run"]
    joined["question"] = tonight.where(tonight != "", joined["question_baseline"])
    return joined[MOVE_COLUMNS].reset_index(drop=True)


def _in_cells(frame: pd.DataFrame, cells: list[tuple[str, str]]) -> np.ndarray:
    wanted = set(cells)
    return np.array([(system, metric) in wanted for system, metric in zip(frame["system"], frame["metric"])],
                    dtype=bool)


def moved_cells(table: pd.DataFrame, show_moves: int | None) -> tuple[list[tuple[str, str]] | None, int]:
    """(cells, top) whose movers the report lists: every regressed cell's MOVES_PER_CELL by default; every
    cell's N with --show-moves N."""
    if show_moves is not None:
        return None, show_moves
    regressed = table[table["verdict"] == "regression"]
    return list(zip(regressed["system"], regressed["metric"])), MOVES_PER_CELL


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


def alert_moves_text(moves: pd.DataFrame | None, regressed: list[tuple[str, str]]) -> str:
    """The ALERT_MOVES largest drops of the regressed cells, for the alert's text ("" when none)."""
    if moves is None or moves.empty or not regressed:
        return ""
    drops = moves[_in_cells(moves, regressed) & (moves["move"] < 0).to_numpy()]
    drops = drops.sort_values(["move", "query_id"]).head(ALERT_MOVES)
    items = [f'{row.system}/{row.metric} "{_one_line(row.question or row.query_id, 60)}" '
             f'{row.score_baseline:.2f} -> {row.score_run:.2f} (answer now "{_one_line(row.answer_run, 60)}")'
             for row in drops.itertuples()]
    return "Largest drops: " + "; ".join(items) + "." if items else ""


def _short(text: str) -> str:
    """A markdown table cell: one line, `|` escaped."""
    return _one_line(text, MARKDOWN_TEXT_CHARS).replace("|", "\\|")


def _one_line(text: str, limit: int) -> str:
    """`text` on one line, cut at `limit` characters; "(empty)" for no text."""
    flat = " ".join(str(text).split())
    if not flat:
        return "(empty)"
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def gate(tracking_uri: str, experiment: str, run: str = "latest", baseline: str = "previous",
         options: GateOptions = GateOptions()) -> RegressionReport:
    """Check `run` against its baseline and tag it with the outcome (`regression.status`, `.baseline`)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    runs = pipeline_runs(client, experiment)
    current = pick_run(runs, run)
    run_id = current.info.run_id
    base = pick_baseline(runs, current, baseline)
    others = other_series(runs, current)
    with tempfile.TemporaryDirectory() as tmp:
        judgments = _judgments(client, current, Path(tmp))
        rate = failure_rate(judgments)
        report = _judge_the_run(client, current, base, judgments, rate, options, Path(tmp), others)
    report = RegressionReport(**{**report.__dict__, "experiment": experiment, "series": series_label(current),
                                 "other_series": others})
    moves_logged = report.moves is not None and not report.moves.empty
    table = [] if report.table is None else report.table.to_dict(orient="records")
    summary = {"status": report.status, "baseline": report.baseline_id, "series": report.series,
               "other_series": list(report.other_series), "failure_rate": rate,
               "differing": report.differing, "systems_not_compared": report.unpaired, "cells": table,
               "moves": MOVES_ARTIFACT if moves_logged else None}
    attach(tracking_uri, run_id,
           tags={"regression.baseline": report.baseline_id or "none", "regression.status": report.status},
           texts={"regression/summary.md": report.markdown,
                  "regression/summary.json": json.dumps(summary, indent=2, default=str)},
           tables={MOVES_ARTIFACT: report.moves} if moves_logged else None)
    return report


def _common_reasons(judgments: pd.DataFrame, shown: int = 3) -> str:
    if "reason" not in judgments:
        return ""
    reasons = judgments.loc[judgments["status"] == "failed", "reason"].dropna().value_counts().head(shown)
    listed = "; ".join(f"{reason} ({count})" for reason, count in reasons.items())
    return f" Most common reasons: {listed}." if listed else ""


def _judge_the_run(client, current, base, judgments: pd.DataFrame, rate: float, options: GateOptions,
                   work: Path, others: tuple[str, ...] = ()) -> RegressionReport:
    run_id = current.info.run_id
    base_id = base.info.run_id if base is not None else None
    unscored = len(judgments) > 0 and judgments["score"].isna().all()  # e.g. every judgment failed
    if rate > options.max_failure_rate or unscored:
        limit = (f", above the limit {options.max_failure_rate:.1%} (--max-failure-rate)"
                 if rate > options.max_failure_rate else ", and none has a score")
        text = (f"Run {run_id}: {rate:.1%} of its {len(judgments)} judgments failed{limit}: its comparison "
                f"is not trusted.{_common_reasons(judgments)}")
        return RegressionReport("failure_rate", run_id, base_id, None, 0, text, rate)
    if base is None:
        return RegressionReport("baseline", run_id, None, None, 0,
                                baseline_line(run_id, series_label(current), others), rate)
    differing = differing_settings(current, base)
    note = ""
    if differing:
        named = "; ".join(f"{label}: baseline {old!r}, run {new!r}"
                          for label, (old, new) in differing.items())
        if not options.allow_judge_change:
            text = (f"Run {run_id} was judged otherwise than its baseline {base_id} ({named}): their scores "
                    "are not comparable. Judge a new baseline, or compare anyway with --allow-judge-change.")
            return RegressionReport("incomparable", run_id, base_id, None, 0, text, rate, differing)
        note = f"\n\nCompared despite different judge settings (--allow-judge-change): {named}."
    return _compare(client, current, base, judgments, rate, options, work, differing, note)


def _compare(client, current, base, judgments: pd.DataFrame, rate: float, options: GateOptions, work: Path,
             differing: dict, note: str) -> RegressionReport:
    """The paired test of the systems both runs hold, and the questions that moved most."""
    run_id, base_id = current.info.run_id, base.info.run_id
    base_judgments = _judgments(client, base, work)
    unpaired = unpaired_systems(judgments, base_judgments)
    if not set(judgments["system"]) & set(base_judgments["system"]):
        raise RegressionError(f"run {run_id} and its baseline {base_id} share no system (run: "
                              f"{', '.join(sorted(set(judgments['system'])))}; baseline: "
                              f"{', '.join(sorted(set(base_judgments['system'])))}): nothing to compare. An "
                              "outputs file without a `system` column names its system by its stem: add the "
                              "column or give --system NAME; another system's nights take their own --series")
    table = paired_table(scored(judgments), scored(base_judgments), options.alpha, options.b, options.seed)
    table, notes = contributed_cells(table, GateInputs(_stats(client, current, work),
                                                       cache(lambda: _stats(client, base, work)), base_id,
                                                       options.alpha))
    cells, top = moved_cells(table, options.show_moves)
    moves = question_moves(sample_view(judgments, _answers(client, current, work)),
                           sample_view(base_judgments, _answers(client, base, work)), cells, top)
    n_regressions = int((table["verdict"] == "regression").sum())
    systems = unpaired_line(unpaired)
    markdown = "\n\n".join(part for part in (
        f"Regression check of run {run_id} against {base_id} (series {_series_said(current, base)}; paired "
        f"sign-flip test, B={options.b}, Holm over {len(table)} cells, alpha={options.alpha}; failed "
        f"judgments {rate:.1%})", systems,
        table.to_markdown(index=False, floatfmt=".4f"),
        MDD_NOTE.format(power=MDD_POWER, alpha=options.alpha, cells=len(table)) + note,
        *notes,
        moves_markdown(moves, table, cells)) if part)
    status = "regression" if n_regressions else "pass"
    return RegressionReport(status, run_id, base_id, table, n_regressions, markdown, rate, differing,
                            moves=moves, unpaired=unpaired)


def _series_said(current, base) -> str:
    """The series of a comparison; a baseline logged before series tags is said to be found by config name."""
    if SERIES_TAG in base.data.tags or SERIES_TAG not in current.data.tags:
        return series_label(current)
    return (f"{series_label(current)}, its baseline logged before series tags and found by its config name "
            f"{base.data.tags.get('ccrs.config_name')}")


def compare_runs(tracking_uri: str, experiment: str, run: str, baseline: str, alpha: float, b: int,
                 seed: int) -> RegressionReport:
    """The gate with default limits (kept for callers of the first version)."""
    return gate(tracking_uri, experiment, run, baseline, GateOptions(alpha=alpha, b=b, seed=seed))


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


# --- alerts -----------------------------------------------------------------------------------------------

def alert_payload(report: RegressionReport) -> dict:
    """A Slack-compatible message (`text`) and the machine-readable outcome."""
    headline = {
        "regression": f"regression in {len(report.regressed_cells())} cell(s): "
                      + ", ".join(report.regressed_cells()),
        "failure_rate": f"{report.failure_rate:.1%} of the judgments failed",
        "incomparable": "judged otherwise than the baseline: "
                        + ", ".join(f"{k} {old} -> {new}" for k, (old, new) in report.differing.items()),
        "baseline": f"no baseline yet for series {report.series or 'unknown'}: this run is the baseline"
                    + (f" (this experiment also holds series {', '.join(report.other_series)})"
                       if report.other_series else ""),
        "crash": "the run crashed",
        "setup_error": "the run could not start",
        "pass": "no regression",
    }[report.status]
    table = [] if report.table is None else json.loads(report.table.to_json(orient="records"))
    regressed = report.regressed_pairs()
    extra = " ".join(part for part in (alert_moves_text(report.moves, regressed),
                                       unpaired_line(report.unpaired)) if part)
    moves = [] if report.moves is None else [
        {key: _one_line(value, ALERT_FIELD_CHARS) if isinstance(value, str) else value
         for key, value in row.items()}
        for row in json.loads(report.moves[_in_cells(report.moves, regressed)].to_json(orient="records"))]
    return {"text": f"ccrs nightly [{report.experiment}] {report.status.upper()} (exit {report.exit_code}): "
                    f"{headline}. {extra + ' ' if extra else ''}"
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


# --- the commands' ends (`ccrs compare`, `ccrs nightly`) --------------------------------------------------

def gate_options(args: argparse.Namespace) -> GateOptions:
    """The gate's limits from the options of pipelines.options.add_gate."""
    return GateOptions(alpha=args.alpha, b=args.b, seed=args.seed, max_failure_rate=args.max_failure_rate,
                       allow_judge_change=args.allow_judge_change, show_moves=args.show_moves)


def describe_gate(uri: str, report: RegressionReport, command: str) -> None:
    """The gate's outcome in the checked run's MLflow Description, beside the verdict's headline (a
    failure to write it is said in one line: the gate's outcome stands)."""
    from mlflow.tracking import MlflowClient

    from pipelines.reporting.tracking import GATE_PREFIX, run_url, set_gate_status

    cells = report.regressed_cells()
    shown = "; ".join(cells[:5]) + (f"; and {len(cells) - 5} more" if len(cells) > 5 else "")
    try:
        experiment_id = MlflowClient(uri).get_run(report.run_id).info.experiment_id
        line = (f"{GATE_PREFIX} **{report.status}**"
                + (f" against run {report.baseline_id}" if report.baseline_id else "")
                + (f": {shown}" if cells else "") + " ([regression/summary.md]("
                + run_url(uri, experiment_id, report.run_id, "regression/summary.md") + "))")
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


def notify_target(value: str | None) -> str | None:
    """--notify URL, or env:NAME for a URL kept in the environment / secrets file (never printed)."""
    if not value or not value.startswith("env:"):
        return value
    name = value.removeprefix("env:")
    if not os.environ.get(name):
        raise ValueError(f"--notify {value}: the variable {name} is not set (secrets file or environment)")
    return os.environ[name]
