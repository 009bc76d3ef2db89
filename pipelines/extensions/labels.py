"""Human labels (docs/human-labels.md): marks of a run's answers that `ccrs label` writes into RUN_DIR/labels/
(or a labels file given to `ccrs stats --labels`) calibrate the judge's statistics: PPI++ means, intervals
and pairs on the human scale (stats/labels.py, stats/ppi.py), stats.json per_metric[M].human_calibrated.
Declared here on the registry's hooks: its statistics contributor (the labels it reads, the reduce stage's
key over them), its verdict section, its MLflow metrics and the labels logged beside them, its gate cells
(both nights labeled: decided on the human scale) and its `ccrs stats` options. No config block: a run
has labels when its folder holds them. The labeling page itself is `ccrs label` (pipelines/label_cmd.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.extensions.registry import (
    CommandOptions,
    ExtensionOption,
    GateCells,
    GateInputs,
    GateStatus,
    RunExtension,
    register_extension,
)
from pipelines.option_schema import ANY_COMMAND, Option
from pipelines.reporting.tracking import MetricsContribution
from pipelines.reporting.verdict import VerdictInputs, VerdictSection
from pipelines.tools.label_designs import DEFAULT_MARGIN, DESIGNS, UNIFORM
from stats.multiple import holm_adjust
from tasks.runtime.contributions import StatisticsContext, StatisticsContributor
from tasks.runtime.layout import LABELS_DIR, RunLayout

NAME = "labels"
HUMAN_NOTE = ("human-calibrated cells (basis `human`): both nights have human labels of the cell, so its "
              "test is the difference of the two nights' PPI++ means (human scale, Welch t test on the two "
              "nights' standard errors with a continuity correction, conservative for paired nights); "
              "`diff`, `p_value` and the verdict are that test's, the judge-only paired test is in "
              "`judge_diff`, `judge_p`.")
LABEL_OPTIONS_IN_A_RUN = ("--label-scale and --predicted-by describe a --labels file; a run directory's "
                          "labels carry their scales (labels/metrics.json)")
LABEL_OPTIONS_ALONE = "--label-scale and --predicted-by need --labels LABELS"
UNCONFIRMED = "unconfirmed"  # a cell failed on the judge scale, held until both nights' labels decide it
AWAITING = GateStatus(
    UNCONFIRMED, "awaiting_labels", 7,
    lambda cells: (f"{len(cells)} cell(s) fail on the judge scale and await a human-scale decision "
                   f"(--require-human): {', '.join(cells)}"),
    "unconfirmed cells (--require-human): the judge-only test fails them, and the gate holds the verdict "
    "until people decide it: a human-scale decision needs human labels of the cell on both nights, and "
    "`needs_labels` names the night(s) whose logged statistics have no human-calibrated mean of it. Label "
    "that night's run folder (`ccrs label RUN_DIR --metric M`; `--design active` asks only for the answers "
    "where the judge is unsure), then run the night again with --require-human: its finished stages are "
    "reused, its reduce stage reads the labels, and the new run is checked against the same baseline "
    "(docs/human-labels.md, \"The nightly gate\"). Exit 7; such a night is not a baseline.")


# --- the statistics

def inputs(context: StatisticsContext) -> dict[str, Any]:
    """{"labels": LabelSet} for compute_all: a `--labels` file (`ccrs stats`), else the run folder's own
    labels/; {} without any. A run folder's labels drawn by an active design are checked against its
    record, and the statistics (`ccrs stats RUN_DIR` and a run's reduce stage) get with them `amend`, which
    rewrites their metrics' human_calibrated blocks with the weighted estimates, `design` and `decisions`
    before stats.json is written."""
    labels = _labels(context.run_dir, context.options.get(NAME) or {})
    if labels is None:
        return {}
    if context.run_dir is None or (context.options.get(NAME) or {}).get("labels"):
        return {"labels": labels}
    return {"labels": labels, **_designed(context.run_dir, labels)}


def _designed(run_dir: Path, labels) -> dict[str, Any]:
    """{"amend": ...} for labels an active design drew, their record checked; {} for uniform ones."""
    layout = RunLayout(run_dir)
    if not (layout.labels_design.exists() or '"design"' in _text(layout.labels_metrics)):
        return {}
    from pipelines.tools.labeling.weighted import active_amend

    return {"amend": active_amend(layout, labels)}


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def _labels(run_dir: Path | None, given: dict[str, Any]):
    from pipelines.options import parse_predicted_by, parse_scale
    from stats.errors import StatsInputError
    from stats.labels import validate_labels
    from tasks.runtime.labels import read_labels_file, read_run_labels

    if given.get("labels") is None:
        if given.get("label_scale") or given.get("predicted_by"):
            raise StatsInputError(LABEL_OPTIONS_IN_A_RUN if run_dir is not None else LABEL_OPTIONS_ALONE)
        return read_run_labels(run_dir) if run_dir is not None else None
    scale = parse_scale(given.get("label_scale"), "--label-scale")
    predicted_by = parse_predicted_by(given.get("predicted_by") or [])
    return validate_labels(read_labels_file(given["labels"]), scale, predicted_by)


def fingerprint(context: StatisticsContext) -> list[str]:
    from tasks.runtime.labels import labels_fingerprint

    return labels_fingerprint(context.run_dir) if context.run_dir is not None else []


# --- the verdict, MLflow

def section(inputs: VerdictInputs) -> str:
    """The human-calibrated section, and the active designs' (labels spent, decisions) where there are."""
    from pipelines.reporting.human_calibrated import human_calibrated_section

    text = human_calibrated_section(inputs.stats)
    if not any((entry.get("human_calibrated") or {}).get("design")
               for entry in inputs.stats.get("per_metric", {}).values()):
        return text
    from pipelines.tools.labeling.weighted import design_section

    return "\n\n".join(part for part in (text, design_section(inputs.stats)) if part)


def run_metrics(stats: dict) -> dict[str, float]:
    """Per metric with labels: the labels, the pairs that differ on the human scale and the decisions that
    changed from the judge alone."""
    metrics = {}
    for metric, block in stats["per_metric"].items():
        if block.get("human_calibrated"):
            pairs = block["human_calibrated"]["pairwise"]
            metrics[f"{metric}_human_labels"] = sum(block["human_calibrated"]["n_labels"].values())
            metrics[f"{metric}_human_pairs_different"] = sum(pair["significant"] for pair in pairs)
            metrics[f"{metric}_human_decisions_changed"] = sum(pair["decision_changed"] for pair in pairs)
    return metrics


def human_calibrated_metrics(stats: dict, system: str) -> dict[str, float]:
    """A system's human-calibrated figures as MLflow metrics: `<M>_human` (the PPI++ mean) with its CI,
    `<M>_human_labels` and `<M>_judge_bias` (human - judge), for each metric with labels."""
    metrics = {}
    for metric, block in stats["per_metric"].items():
        human = block.get("human_calibrated")
        if not human or system not in human["n_labels"]:
            continue
        metrics[f"{metric}_human_labels"] = float(human["n_labels"][system])
        if system in human["means"]:
            metrics[f"{metric}_human"] = human["means"][system]
            metrics[f"{metric}_human_ci_low"], metrics[f"{metric}_human_ci_high"] = human["ci95"][system]
        if system in human["judge_bias"]:
            metrics[f"{metric}_judge_bias"] = human["judge_bias"][system]
    return metrics


def artifacts(run_dir: Path) -> list[tuple[Path, str]]:
    """The human labels behind the human-calibrated figures, under labels/."""
    return [(RunLayout(run_dir).labels_dir, LABELS_DIR)]


# --- the gate

def has_human_calibrated(run_stats: dict | None) -> bool:
    """Whether tonight has a human-calibrated block (only then is the baseline's stats.json fetched)."""
    blocks = ((run_stats or {}).get("per_metric") or {}).values()
    return any(block.get("human_calibrated") for block in blocks)


def human_calibrated_cells(run_stats: dict | None, base_stats: dict | None) -> pd.DataFrame:
    """(system, metric, human_diff, human_p) for each cell both nights estimated on the human scale (PPI++
    means, stats.json human_calibrated): run - baseline, a Welch t test on the two nights' standard errors
    (read from their 95% intervals' widths as if normal: never smaller than the t or score interval's own)
    with Welch-Satterthwaite degrees of freedom from their label counts, and a continuity correction of half
    a label step per night (a mean of n labels moves in steps of label_step / n). Without the correction
    and the t reference the test rejected in up to 9.0% of simulated equal nights at 10 labels; with them,
    at most 4.25% at 10-60 labels (benchmarks/bench_gate_human_scale.py; docs/human-labels.md)."""
    from scipy import stats

    z_95 = float(stats.norm.ppf(0.975))
    rows = []
    for metric, block in ((run_stats or {}).get("per_metric") or {}).items():
        tonight = block.get("human_calibrated")
        before = (((base_stats or {}).get("per_metric") or {}).get(metric) or {}).get("human_calibrated")
        if not tonight or not before:
            continue
        for system in sorted(set(tonight["means"]) & set(before["means"])):
            nights = (tonight, before)
            se = [float(np.subtract(*reversed(entry["ci95"][system]))) / (2 * z_95) for entry in nights]
            n = [max(int((entry.get("n_labels") or {}).get(system, 2)), 2) for entry in nights]
            step = sum(float((entry.get("label_step") or {}).get(system, 0.0)) / (2 * count)
                       for entry, count in zip(nights, n))
            diff = tonight["means"][system] - before["means"][system]
            rows.append({"system": system, "metric": metric, "human_diff": diff,
                         "human_p": welch_p_value(diff, se, n, step)})
    return pd.DataFrame(rows, columns=["system", "metric", "human_diff", "human_p"])


def welch_p_value(diff: float, se: list[float], n: list[int], correction: float) -> float:
    """Two-sided p of a difference of two independent means with standard errors `se` from `n` labels each,
    |diff| less `correction` (continuity), against Welch's t (stats.unpaired.welch_standard_error, given
    each night's sd as se * sqrt(n))."""
    from scipy import stats

    from stats.unpaired import welch_standard_error

    shrunk = max(abs(diff) - correction, 0.0)
    total, df = welch_standard_error(n[0], n[1], se[0] * np.sqrt(n[0]), se[1] * np.sqrt(n[1]))
    if total <= 0.0:
        return float(shrunk == 0.0)
    return float(2 * stats.t.sf(shrunk / total, df))


def with_human_calibrated(table: pd.DataFrame, human: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The gate's table with every human-calibrated cell decided by its human-scale test (Holm again over
    all cells); `basis` says which test decided a cell."""
    if human.empty:
        return table
    merged = table.merge(human, on=["system", "metric"], how="left")
    on_human = merged["human_p"].notna()
    merged["basis"] = np.where(on_human, "human", "judge")
    merged["judge_diff"], merged["judge_p"] = merged["diff"], merged["p_value"]
    merged.loc[on_human, "diff"] = merged.loc[on_human, "human_diff"]
    merged.loc[on_human, "p_value"] = merged.loc[on_human, "human_p"]
    merged["adjusted_p"] = holm_adjust(merged["p_value"].to_numpy())
    merged["significant"] = merged["adjusted_p"] < alpha
    merged["verdict"] = np.where(merged["significant"],
                                 np.where(merged["diff"] < 0, "regression", "improvement"), "same")
    return merged.drop(columns=["human_diff", "human_p"])


def gate(table: pd.DataFrame, inputs: GateInputs) -> pd.DataFrame:
    if not has_human_calibrated(inputs.run_stats):
        return table
    return with_human_calibrated(table, human_calibrated_cells(inputs.run_stats, inputs.base_stats()),
                                 inputs.alpha)


def require_human(table: pd.DataFrame, inputs: GateInputs) -> pd.DataFrame:
    """With --require-human, every cell the night fails that no human-scale test decided is held
    (`unconfirmed`), `needs_labels` naming the night(s) without a human-calibrated mean of it."""
    if not (inputs.options.get(NAME) or {}).get("require_human"):
        return table
    basis = table["basis"] if "basis" in table else pd.Series("judge", index=table.index)
    held = (table["verdict"] == "regression") & (basis != "human")
    if not held.any():
        return table
    nights = {"tonight": human_cells(inputs.run_stats), "baseline": human_cells(inputs.base_stats())}
    table = table.assign(needs_labels="")
    cells = zip(table.loc[held, "system"], table.loc[held, "metric"])
    table.loc[held, "needs_labels"] = [", ".join(night for night, has in nights.items() if cell not in has)
                                       for cell in cells]
    table.loc[held, "verdict"] = UNCONFIRMED
    return table


def human_cells(stats: dict | None) -> set[tuple[str, str]]:
    """The (system, metric) cells a night's stats.json has a human-calibrated mean of."""
    return {(system, metric) for metric, block in ((stats or {}).get("per_metric") or {}).items()
            for system in ((block.get("human_calibrated") or {}).get("means") or {})}


# --- `ccrs stats`

def metric_lines(entry: dict) -> list[str]:
    """The console line under a metric's in `ccrs stats`."""
    block = entry.get("human_calibrated")
    if not block:
        return []
    pairs = block["pairwise"]
    lines = [f"    human-calibrated ({block['human_metric']}): {sum(block['n_labels'].values())} labels, "
             f"{sum(pair['significant'] for pair in pairs)} of {len(pairs)} pairs differ, "
             f"{sum(pair['decision_changed'] for pair in pairs)} decisions changed from the judge alone, "
             f"{len(block['too_few_labels'])} systems with too few labels"]
    if block.get("design"):
        from pipelines.tools.labeling.weighted import design_line

        lines.append(design_line(block))
    return lines


OPTIONS = (
    ExtensionOption(Option(
        "--labels", "human labels (JSONL, CSV or Parquet: question_id or query_id, system, metric, label[, "
        "annotator]): `stats` adds the human-calibrated (PPI++) statistics, `plan labels` plans from the "
        "pilot's (docs/human-labels.md)", {"type": Path, "metavar": "LABELS"},
        {ANY_COMMAND: (None, "the run folder's labels/, where it has them")}), ("stats", "plan labels")),
    ExtensionOption(Option(
        "--label-scale", "the labels' mark scale, mapped onto [0, 1] as --scale maps scores: MIN MAX or "
        "MIN-MAX", {"nargs": "+", "metavar": "MIN MAX"},
        {ANY_COMMAND: (None, "marks on [0, 1]"), "label": (None, "a judge metric's declared scale")},
        aliases=()), ("stats", "plan labels", "label")),
    ExtensionOption(Option(
        "--predicted-by", "HUMAN=JUDGE: the labels of a human metric of their own (e.g. acceptable=CC) and "
        "the judge metric whose scores predict them (repeatable)",
        {"action": "append", "metavar": "HUMAN=JUDGE"},
        {ANY_COMMAND: ([], None)}), ("stats", "plan labels", "label")),
    ExtensionOption(Option(
        "--design", "how the questions to label are drawn: uniform (a seeded random order of all of them) or "
        "active (each drawn once with a probability that grows with the judge's uncertainty, the labels "
        "weighted back; docs/human-labels.md)", {"choices": DESIGNS},
        {ANY_COMMAND: (UNIFORM, UNIFORM)}), ("label", "plan labels")),
    ExtensionOption(Option(
        "--label-budget", "with --design active: the questions expected to be drawn for labeling",
        {"type": float, "metavar": "N"}, {ANY_COMMAND: (None, "30%% of the questions, at least 50")}),
        ("label",)),
    ExtensionOption(Option(
        "--label-floor", "with --design active: the lowest probability a question is drawn with (every one "
        "can be)", {"type": float, "metavar": "P"}, {ANY_COMMAND: (None, "half the uniform rate")}),
        ("label",)),
    ExtensionOption(Option(
        "--label-margin", "with --design active: pairs whose anytime interval of the mean human difference "
        "lies in [-M, M] (labels on [0, 1]) are settled equivalent", {"type": float, "metavar": "M"},
        {ANY_COMMAND: (None, f"{DEFAULT_MARGIN:g}")}), ("label",)),
    ExtensionOption(Option(
        "--require-human", "a cell the judge-only test fails is a regression only once decided on the human "
        "scale (both nights' human labels of it); until then the night is awaiting_labels (exit 7) and "
        "names the night(s) to label", {"action": "store_true"},
        {ANY_COMMAND: (False, "off: the judge-only test decides cells without labels")}),
        ("nightly", "compare")),
)


register_extension(RunExtension(
    name=NAME,
    description="human labels: the judge's statistics calibrated on the human scale (PPI++)",
    key="labels",
    on=lambda block: False,  # no config block: the statistics read a run's labels/ where it has them
    statistics=StatisticsContributor(NAME, inputs=inputs, unusable="human labels not used",
                                     fingerprint=fingerprint, code=(__name__,)),
    verdict=(VerdictSection("hypotheses", section),),
    metrics=MetricsContribution(run_metrics, human_calibrated_metrics, artifacts),
    gate=GateCells(gate, "human", HUMAN_NOTE, last=require_human, status=AWAITING),
    options=CommandOptions(OPTIONS, metric_lines=metric_lines),
    files=(f"{LABELS_DIR}/",),
    names=(r"human_calibrated", r"\bLABELS_DIR\b", r"\bread_run_labels\b", r"\bread_labels_file\b",
           r"\blabels_fingerprint\b", r"\bANSWER_DIGEST\b", r"tasks\.runtime\.labels"),
    own=("pipelines/label_cmd.py",),
    rank=45,
))
