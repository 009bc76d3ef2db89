"""`ccrs stats RUN_DIR` on labels an active design drew (docs/human-labels.md): the design record checked
against the run and its labels (a missing or inconsistent record refuses the labels, in one line), then
(active_amend, before stats.json is written) each actively labeled metric's `human_calibrated` block
rewritten with estimates valid under the design: stats.active's inverse-probability-weighted PPI++ means,
pairwise differences (Holm over the pairs) and judge's bias with their fixed-n intervals, plus `design`
(the rule, floor, labels spent, the probabilities' summary) and `decisions` (per pair, settled different /
equivalent / open by the anytime intervals, as the page showed them, and whether labeling can stop)."""
from __future__ import annotations

import json
from collections.abc import Callable
from itertools import combinations

import numpy as np
import pandas as pd

from pipelines.tools.labeling.active import active_metrics
from pipelines.tools.labeling.design import ActiveDesign, check_design, family_size, read_design, read_designs
from pipelines.tools.labeling.stopline import EXHAUSTED, PLAN_COMMAND, SETTLED, decisions_of, label_grid
from pipelines.tools.labeling.uncertainty import run_uncertainty
from stats.active import MIN_ACTIVE_LABELS, active_ppi_difference, active_ppi_mean
from stats.errors import StatsInputError
from stats.labels import LabelMatrices, LabelSet, label_matrices
from stats.multiple import holm_adjust
from stats.scores import build_cube
from tasks.runtime.layout import RunLayout

INTERVAL = "active t"  # the fixed-n interval's kind: estimate +- t se, Kish's effective labels - 1 as df
_STOP_CLAUSES = {SETTLED: ": labeling can stop",  # the console line's end, by decisions["stop"]
                 EXHAUSTED: f": every drawn question labeled or skipped (`{PLAN_COMMAND}` for more)"}
_BISECTIONS = 60


def designed_metrics(layout: RunLayout) -> list[str]:
    """The label metrics of the run labeled by an active design (labels/metrics.json or design.json)."""
    return list(dict.fromkeys([*active_metrics(layout), *read_designs(layout)]))


def check_active_labels(layout: RunLayout, labels: LabelSet) -> dict[str, ActiveDesign]:
    """{label metric: its design}, each checked: a record that exists, explains this run (design.py's
    check_design) and drew every labeled question; else one line (StatsInputError)."""
    order = (json.loads(layout.labels_order.read_text())["question_ids"] if layout.labels_order.exists()
             else None)
    designs = {}
    for metric in designed_metrics(layout):
        design = read_design(layout, metric)
        if design is None:
            raise StatsInputError(f"the labels of {metric} come from an active design whose record is "
                                  f"missing from {layout.labels_design}: they cannot be weighted")
        check_design(design, run_uncertainty(layout, design.predicted_by), order)
        rows = labels.frame[labels.frame["metric"] == metric]
        drawn = {q for q, is_drawn in zip(design.question_ids, design.drawn) if is_drawn}
        undrawn = sorted(set(rows["query_id"]) - drawn)
        if undrawn:
            raise StatsInputError(f"{len(undrawn)} question(s) of {metric} are labeled that its active "
                                  f"design did not draw (e.g. {undrawn[0]}): labels/design.json does not "
                                  "explain them")
        designs[metric] = design
    return designs


def with_active_estimates(stats: dict, scores: pd.DataFrame, layout: RunLayout, labels: LabelSet,
                          designs: dict[str, ActiveDesign]) -> dict:
    """stats.json with each designed metric's human_calibrated block rewritten (module docstring)."""
    cube = build_cube(scores, stats["metrics"])
    matrices = label_matrices(labels, cube)
    for judge_metric, matrix in matrices.items():
        design = designs.get(matrix.human_metric)
        block = stats["per_metric"].get(judge_metric, {}).get("human_calibrated")
        if design is None or block is None:
            continue
        skipped = labels.skips.loc[labels.skips["metric"] == matrix.human_metric, "query_id"]
        family = family_size(layout, len(matrix.systems))
        stats["per_metric"][judge_metric]["human_calibrated"] = {
            **block, **weighted_entry(matrix, design, block, stats["alpha"]),
            "design": design_summary(design, matrix),
            "decisions": _decisions(design, matrix, labels, set(skipped), family, layout)}
    return stats


def weighted_entry(matrix: LabelMatrices, design: ActiveDesign, block: dict, alpha: float) -> dict:
    """The block's estimates under the design: per system and per pair, on the questions judged for every
    system (in the design's order)."""
    probability = design.probability_of()
    pi = np.array([probability[q] for q in matrix.query_ids])
    y, f, systems = matrix.labels, matrix.judged, matrix.systems
    own = matrix.human_metric == matrix.metric
    means, too_few, biases = {}, [], {}
    for s, system in enumerate(systems):
        try:
            means[system] = active_ppi_mean(y[:, s], f[:, s], pi, alpha)
        except StatsInputError:
            too_few.append(system)
            continue
        if own:
            bias = np.where(np.isfinite(y[:, s]), y[:, s] - f[:, s], np.nan)
            biases[system] = active_ppi_mean(bias, np.zeros(len(pi)), pi, alpha, lam=0.0, offset=0.0)
    pairs, pairs_too_few = _pairs(y, f, pi, systems, alpha, block)
    return {
        "means": {system: m.estimate for system, m in means.items()},
        "ci95": {system: list(m.ci) for system, m in means.items()},
        "lam": {system: m.lam for system, m in means.items()},
        "se": {system: m.se for system, m in means.items()},
        "interval": {system: INTERVAL for system in means},
        "judge_bias": {system: b.estimate for system, b in biases.items()},
        "judge_bias_ci95": {system: list(b.ci) for system, b in biases.items()},
        "pairwise": pairs, "too_few_labels": too_few, "pairs_too_few_labels": pairs_too_few,
        "min_labels": MIN_ACTIVE_LABELS, "constant_labels": [], "constant_pairs": [],
        "notes": [*block.get("notes", []), "labels drawn by an active design: every estimate weights each "
                  "label by the inverse of its question's probability (inverse-probability-weighted PPI++, "
                  f"stats/active.py); no interval below {MIN_ACTIVE_LABELS} labels"],
    }


def _pairs(y, f, pi, systems, alpha: float, block: dict) -> tuple[list[dict], list[list[str]]]:
    judge_only = {(pair["a"], pair["b"]): pair.get("judge_only_significant") for pair in block["pairwise"]}
    estimated, too_few = [], []
    for a, b in combinations(range(len(systems)), 2):
        both = np.isfinite(y[:, a]) & np.isfinite(y[:, b])
        la, lb = np.where(both, y[:, a], np.nan), np.where(both, y[:, b], np.nan)
        try:
            difference = active_ppi_difference(la, lb, f[:, a], f[:, b], pi, alpha)
        except StatsInputError:
            too_few.append([systems[a], systems[b]])
            continue
        p_value = _p_value(lambda level: active_ppi_difference(la, lb, f[:, a], f[:, b], pi, level).ci)
        estimated.append((systems[a], systems[b], difference, p_value))
    adjusted = holm_adjust(np.array([p for *_, p in estimated])) if estimated else []
    pairs = []
    for (a, b, difference, raw_p), p_value in zip(estimated, adjusted):
        significant = bool(p_value < alpha)
        before = judge_only.get((a, b))
        pairs.append({"a": a, "b": b, "diff": difference.estimate, "ci95": list(difference.ci),
                      "p_value": float(p_value), "raw_p": raw_p, "significant": significant,
                      "n_labels": difference.n_labeled, "judge_only_significant": before,
                      "decision_changed": before is not None and before != significant, "interval": INTERVAL,
                      "constant": False})
    return pairs, too_few


def _p_value(interval_at) -> float:
    """The smallest level at which the fixed-n interval excludes 0 (the intervals are nested in the level)."""
    def excludes_zero(level: float) -> bool:
        low, high = interval_at(level)
        return low > 0.0 or high < 0.0

    low, high = 1e-12, 1.0 - 1e-12
    if excludes_zero(low):
        return low
    if not excludes_zero(high):
        return 1.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        low, high = (low, middle) if excludes_zero(middle) else (middle, high)
    return high


def design_summary(design: ActiveDesign, matrix: LabelMatrices) -> dict:
    """stats.json's `design`: the rule, the floor, the labels spent and the probabilities' summary."""
    probabilities = np.array(design.probabilities)
    labeled = np.isfinite(matrix.labels)
    return {"rule": design.rule["kind"], "uncertainty": design.source, "floor": design.rule["floor"],
            "lowest": design.rule["lowest"], "budget": design.rule["budget"], "seed": design.seed,
            "questions": len(design.question_ids), "drawn": int(sum(design.drawn)),
            "labels_spent": {"questions": int(labeled.any(axis=1).sum()), "answers": int(labeled.sum())},
            "probabilities": {"min": float(probabilities.min()), "median": float(np.median(probabilities)),
                              "mean": float(probabilities.mean()), "max": float(probabilities.max())},
            "method": design.method, "margin": design.margin, "alpha": design.alpha}


def _decisions(design: ActiveDesign, matrix: LabelMatrices, labels: LabelSet, skipped: set[str],
               family: int, layout: RunLayout) -> dict:
    """The anytime decisions, as the page computes them (stopline.py) on every label of the metric."""
    rows = labels.frame[labels.frame["metric"] == matrix.human_metric].rename(
        columns={"query_id": "question_id"})
    grid = label_grid(rows.to_dict("records"), design.question_ids, matrix.systems, (0.0, 1.0))
    uncertainty = run_uncertainty(layout, design.predicted_by)
    judged = _judged_in(uncertainty, design, matrix.systems)
    return decisions_of(design, matrix.systems, judged, grid, skipped, family)


def _judged_in(uncertainty, design: ActiveDesign, systems) -> np.ndarray:
    """The judge's scores in the design's order, columns as `systems`."""
    judged = uncertainty.judged_for(design.question_ids)
    index = {system: j for j, system in enumerate(uncertainty.systems)}
    return np.stack([judged[:, index[s]] if s in index else np.full(len(judged), np.nan) for s in systems],
                    axis=1)


def active_amend(layout: RunLayout, labels: LabelSet) -> Callable[[dict, pd.DataFrame], dict]:
    """For `ccrs stats RUN_DIR` (its statistics' `amend`): the design records checked now (a missing or
    inconsistent one: StatsInputError, one line), then a function that rewrites the actively labeled
    metrics' human_calibrated blocks of the result (with_active_estimates) before it is written."""
    designs = check_active_labels(layout, labels)

    def amend(stats: dict, scores: pd.DataFrame) -> dict:
        return with_active_estimates(stats, scores, layout, labels, designs)

    return amend


def design_section(stats: dict) -> str:
    """The verdict's part on the active designs: the labels spent and the anytime decisions per metric."""
    parts = []
    for metric, entry in stats["per_metric"].items():
        block = entry.get("human_calibrated") or {}
        if not block.get("design"):
            continue
        design, decisions = block["design"], block["decisions"]
        spent = design["labels_spent"]
        probabilities = design["probabilities"]
        lines = [f"### Active labeling: {block['human_metric']} (predicted by {metric})",
                 f"Questions drawn with probabilities proportional to the {design['uncertainty']} "
                 f"({design['rule']}; floor {design['floor']:.3g}, budget {design['budget']:g}: "
                 f"{design['drawn']} of {design['questions']} drawn; probabilities "
                 f"{probabilities['min']:.3g} to {probabilities['max']:.3g}, median "
                 f"{probabilities['median']:.3g}; seed {design['seed']}). "
                 f"**Labels spent:** {spent['questions']} questions ({spent['answers']} answers).",
                 f"**Decisions** (anytime-valid intervals, {decisions['method']} confidence sequences, alpha "
                 f"{decisions['alpha']:g} / {decisions['family_size']} comparisons, equivalent within "
                 f"±{decisions['margin']:g}; over the first {decisions['questions_covered']} questions of "
                 f"the design's order): " + "; ".join(
                     f"{pair['a']} vs {pair['b']}: {pair['decision']} [{pair['ci'][0]:.2f}, "
                     f"{pair['ci'][1]:.2f}]" for pair in decisions["pairs"]) + ".",
                 _stop_text(decisions)]
        parts.append("\n\n".join(lines))
    return "\n\n".join(parts)


def design_line(block: dict) -> str:
    """`ccrs stats`' console line of an active design: labels spent and decisions."""
    design, decisions = block["design"], block["decisions"]
    counts = {name: sum(pair["decision"] == name for pair in decisions["pairs"])
              for name in ("different", "equivalent", "open")}
    return (f"    active design: {design['labels_spent']['questions']} questions labeled "
            f"({design['labels_spent']['answers']} answers) of {design['drawn']} drawn; decisions: "
            f"{counts['different']} different, {counts['equivalent']} equivalent, {counts['open']} open"
            f"{_STOP_CLAUSES.get(decisions['stop'], '')}")


def _stop_text(decisions: dict) -> str:
    if decisions["stop"] == SETTLED:
        return "**You can stop:** every comparison is settled."
    if decisions["stop"] == EXHAUSTED:
        return (f"**Open:** {decisions['open']} of {len(decisions['pairs'])} comparisons, and every question "
                f"the design drew is labeled or skipped: it has nothing more to serve. `{PLAN_COMMAND}` "
                "forecasts the labels a settled verdict needs.")
    return (f"**Open:** {decisions['open']} of {len(decisions['pairs'])} comparisons; labeling the next "
            f"questions of the design may settle them.")
