"""Run-to-run regression check on per-query judgments stored in MLflow (see pipelines/compare_cmd.py)."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stats.multiple import holm_adjust
from stats.paired import paired_randomization_test
from stats.power import paired_minimum_detectable_difference

MDD_POWER = 0.8

JUDGMENTS_ARTIFACT = "samples/judgments.parquet"


MDD_NOTE = ("mdd: the minimum detectable difference of each cell, the smallest drop that its n questions "
            "find with power {power:.0%} (paired t approximation at the Holm first-step level "
            "{alpha}/{cells}); a 'same' verdict rules out only drops larger than its mdd.")


class RegressionError(RuntimeError):
    pass


@dataclass(frozen=True)
class RegressionReport:
    run_id: str
    baseline_id: str
    table: pd.DataFrame
    n_regressions: int
    markdown: str


def _pipeline_runs(client, experiment_name: str) -> list:
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        raise RegressionError(f"no MLflow experiment named {experiment_name!r}")
    return client.search_runs(
        [experiment.experiment_id], "tags.`ccrs.kind` = 'pipeline' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=200,
    )


def _pick_runs(runs: list, run: str, baseline: str) -> tuple[str, str]:
    ids = [r.info.run_id for r in runs]
    current = ids[0] if run == "latest" and ids else run
    if current not in ids:
        raise RegressionError(f"run {run!r} is not a finished pipeline run of this experiment")
    if baseline == "previous":
        older = ids[ids.index(current) + 1:]
        if not older:
            raise RegressionError(f"run {current} has no earlier finished run to compare with")
        return current, older[0]
    if baseline not in ids:
        raise RegressionError(f"baseline {baseline!r} is not a finished pipeline run of this experiment")
    return current, baseline


def _judgments(client, run_id: str, work: Path) -> pd.DataFrame:
    path = client.download_artifacts(run_id, JUDGMENTS_ARTIFACT, str(work / run_id))
    frame = pd.read_parquet(path)
    return frame[frame["status"] != "failed"][["query_id", "system", "metric", "score"]]


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


def compare_runs(tracking_uri: str, experiment: str, run: str, baseline: str, alpha: float, b: int,
                 seed: int) -> RegressionReport:
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    client = MlflowClient(tracking_uri)
    run_id, baseline_id = _pick_runs(_pipeline_runs(client, experiment), run, baseline)
    with tempfile.TemporaryDirectory() as tmp:
        table = paired_table(_judgments(client, run_id, Path(tmp)),
                             _judgments(client, baseline_id, Path(tmp)), alpha, b, seed)
    n_regressions = int((table["verdict"] == "regression").sum())
    markdown = (f"Regression check of run {run_id} against {baseline_id} "
                f"(paired sign-flip test, B={b}, Holm over {len(table)} cells, alpha={alpha})\n\n"
                + table.to_markdown(index=False, floatfmt=".4f") + "\n\n" + MDD_NOTE.format(
                    power=MDD_POWER, alpha=alpha, cells=len(table)))
    client.set_tag(run_id, "regression.baseline", baseline_id)
    client.set_tag(run_id, "regression.status", "regression" if n_regressions else "pass")
    client.log_text(run_id, markdown, "regression/summary.md")
    client.log_text(run_id, json.dumps(table.to_dict(orient="records"), indent=2), "regression/summary.json")
    return RegressionReport(run_id, baseline_id, table, n_regressions, markdown)
