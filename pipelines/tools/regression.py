"""The nightly gate: a run checked against an accepted baseline run of the same experiment, on per-query
judgments stored in MLflow (`ccrs compare`, `ccrs nightly`; docs/nightly.md).

Which baseline: `previous` is the most recent earlier run of the same config (tag `ccrs.config_name`), not
ad hoc (`ccrs.adhoc`), that was accepted (`regression.status` pass, baseline or accepted), or the first
such run; `RUN_ID` and `tag:NAME` (the run tagged `ccrs.baseline=NAME`) name one. Comparable means the same
judge model, prompt versions, scoring mode and metric set (tags written by the pipeline). Every outcome is
a status with its exit code (STATUSES) and lands on the run as `regression.status`."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from stats.multiple import holm_adjust
from stats.paired import paired_randomization_test
from stats.power import paired_minimum_detectable_difference
from tasks.repeats import REPEAT_COLUMN, mean_over_repeats
from tasks.calibration import STOP_EXIT_CODE

MDD_POWER = 0.8

JUDGMENTS_ARTIFACT = "samples/judgments.parquet"


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

    @property
    def exit_code(self) -> int:
        return STATUSES[self.status]

    def regressed_cells(self) -> list[str]:
        if self.table is None:
            return []
        rows = self.table[self.table["verdict"] == "regression"]
        return [f"{r.system}/{r.metric} ({r.diff:+.3f}, adjusted p {r.adjusted_p:.4f})"
                for r in rows.itertuples()]


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
    tags = current.data.tags
    earlier = [r for r in runs if r.info.start_time < current.info.start_time
               and r.data.tags.get("ccrs.config_name") == tags.get("ccrs.config_name")
               and r.data.tags.get("ccrs.adhoc") != "true" and r.data.tags.get("ccrs.superseded") != "true"]
    accepted = [r for r in earlier if r.data.tags.get("regression.status") in ACCEPTED]
    return accepted[0] if accepted else (earlier[-1] if earlier else None)


def differing_settings(current, baseline) -> dict[str, tuple[str, str]]:
    """{setting: (baseline's, run's)} for the judge settings recorded on both runs that differ."""
    differing = {}
    for tag, label in COMPARABLE.items():
        ours, theirs = current.data.tags.get(tag), baseline.data.tags.get(tag)
        if ours is not None and theirs is not None and ours != theirs:
            differing[label] = (theirs, ours)
    return differing




def _judgments(client, run_id: str, work: Path) -> pd.DataFrame:
    """Every judgment of the run (failures included)."""
    path = client.download_artifacts(run_id, JUDGMENTS_ARTIFACT, str(work / run_id))
    return pd.read_parquet(path)


def scored(judgments: pd.DataFrame) -> pd.DataFrame:
    """One score per (question, system, metric): a run judged with judge.repeats gives the mean of each
    sample's scored repeats (tasks/repeats.py), so that runs with and without repeats pair up."""
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
    with tempfile.TemporaryDirectory() as tmp:
        judgments = _judgments(client, run_id, Path(tmp))
        rate = failure_rate(judgments)
        report = _judge_the_run(client, current, base, judgments, rate, options, Path(tmp))
    report = RegressionReport(**{**report.__dict__, "experiment": experiment})
    client.set_tag(run_id, "regression.baseline", report.baseline_id or "none")
    client.set_tag(run_id, "regression.status", report.status)
    client.log_text(run_id, report.markdown, "regression/summary.md")
    table = [] if report.table is None else report.table.to_dict(orient="records")
    client.log_text(run_id, json.dumps({"status": report.status, "baseline": report.baseline_id,
                                        "failure_rate": rate, "differing": report.differing,
                                        "cells": table}, indent=2, default=str), "regression/summary.json")
    return report


def _judge_the_run(client, current, base, judgments: pd.DataFrame, rate: float, options: GateOptions,
                   work: Path) -> RegressionReport:
    run_id = current.info.run_id
    base_id = base.info.run_id if base is not None else None
    if rate > options.max_failure_rate:
        text = (f"Run {run_id}: {rate:.1%} of its {len(judgments)} judgments failed, above the limit "
                f"{options.max_failure_rate:.1%} (--max-failure-rate): its comparison is not trusted.")
        return RegressionReport("failure_rate", run_id, base_id, None, 0, text, rate)
    if base is None:
        return RegressionReport("baseline", run_id, None, None, 0,
                                f"Run {run_id}: no baseline yet; this run is the baseline.", rate)
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
    table = paired_table(scored(judgments), scored(_judgments(client, base_id, work)), options.alpha,
                         options.b, options.seed)
    n_regressions = int((table["verdict"] == "regression").sum())
    markdown = (f"Regression check of run {run_id} against {base_id} "
                f"(paired sign-flip test, B={options.b}, Holm over {len(table)} cells, "
                f"alpha={options.alpha}; failed judgments {rate:.1%})\n\n"
                + table.to_markdown(index=False, floatfmt=".4f") + "\n\n" + MDD_NOTE.format(
                    power=MDD_POWER, alpha=options.alpha, cells=len(table)) + note)
    status = "regression" if n_regressions else "pass"
    return RegressionReport(status, run_id, base_id, table, n_regressions, markdown, rate, differing)


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
        "baseline": "no baseline yet: this run is the baseline",
        "crash": "the run crashed",
        "setup_error": "the run could not start",
        "pass": "no regression",
    }[report.status]
    table = [] if report.table is None else json.loads(report.table.to_json(orient="records"))
    return {"text": f"ccrs nightly [{report.experiment}] {report.status.upper()} (exit {report.exit_code}): "
                    f"{headline}. Run {report.run_id}, baseline {report.baseline_id or 'none'}.",
            "status": report.status, "exit_code": report.exit_code, "experiment": report.experiment,
            "run_id": report.run_id, "baseline_id": report.baseline_id, "failure_rate": report.failure_rate,
            "differing": {k: list(v) for k, v in report.differing.items()}, "cells": table,
            "detail": report.markdown[:3000]}


def notify(url: str, payload: dict, timeout_s: float = 15.0) -> str:
    """POST the payload as JSON; the outcome as one line (never the URL, which may hold a secret)."""
    import httpx

    try:
        response = httpx.post(url, json=payload, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"notification failed ({type(exc).__name__})"
    return f"notified (HTTP {response.status_code})"
