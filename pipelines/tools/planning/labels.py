"""`ccrs plan labels`: how many human labels per system PPI++ needs (stats/label_power.py), from a pilot's
judge scores and, where it has them, its human labels.

With labels (a --labels file, or a pilot run directory's RUN_DIR/labels): per (metric, system) the sd of
the labels and their correlation with the judge over the labeled pilot answers, per pair the same of the
per-question differences; each recommendation is checked by resampling those labeled answers and running
the PPI++ estimator. Without labels, or with fewer than MIN_LABELS for a system or pair of a metric: a
table over assumed correlations (ASSUMED_RHOS; 0 is labels only), labels assumed on the judge's scale
with its spread, checked on bivariate normal data sets."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from pipelines.tools.planning.power import MAX_REFINEMENTS, REFINE_STEP, REFINE_TOLERANCE, load_pilot
from stats.errors import StatsInputError
from stats.label_power import (
    ASSUMED_RHOS,
    LabelRequirement,
    PilotMoments,
    SimulationCheck,
    assumed_moments,
    gaussian_sampler,
    labels_for_difference,
    labels_for_width,
    pilot_moments,
    resampler,
    simulate_difference,
    simulate_width,
)
from stats.labels import LABEL_SCALE, LabelMatrices, LabelSet, label_matrices, validate_labels
from stats.ppi import MIN_LABELS
from stats.scores import ScoreCube, build_cube, rescale_scores
from tasks.runtime.labels import read_labels_file, read_run_labels

PLAN_FILE = "labels_plan.json"


def load_pilot_and_labels(pilot: Path, labels: Path | None, scale: tuple[float, float] | None,
                          label_scale: tuple[float, float] | None, predicted_by: dict[str, str]
                          ) -> tuple[pd.DataFrame, LabelSet | None]:
    """The pilot's scores on [0, 1] and its labels: --labels, else a pilot run directory's own, else None."""
    frame = load_pilot(pilot)
    if scale is not None:
        frame = rescale_scores(frame, *scale)
    if labels is not None:
        return frame, validate_labels(read_labels_file(labels), label_scale, predicted_by)
    if label_scale or predicted_by:
        raise StatsInputError("--label-scale and --predicted-by describe a --labels file")
    return frame, (read_run_labels(pilot) if Path(pilot).is_dir() else None)


def plan_labels(scores: pd.DataFrame, labels: LabelSet | None, metrics: list[str] | None, *,
                width: float | None = None, delta: float | None = None, power: float = 0.8,
                alpha: float = 0.05, n_questions: int | None = None, replicates: int = 500, seed: int = 0,
                metric_order: list[str] = ()) -> dict:
    """The plan: settings, `labels_per_system` {metric: n} where labels gave the figures,
    `labels_per_system_assumed` {metric: {rho: n}} where they did not, and per metric its rows."""
    if (width is None) == (delta is None):
        raise StatsInputError("plan for one target: --width W or --delta D")
    if replicates < 0:
        raise StatsInputError(f"--replicates must be >= 0, got {replicates}")
    cube = build_cube(scores, metric_order)
    chosen = list(metrics or cube.metrics)
    unknown = [m for m in chosen if m not in cube.metrics]
    if unknown:
        raise StatsInputError(f"metric(s) {unknown} not in the pilot; it has {list(cube.metrics)}")
    if delta is not None and len(cube.systems) < 2:
        raise StatsInputError(f"--delta plans a difference between systems: the pilot holds one "
                              f"({', '.join(cube.systems)})")
    matrices = label_matrices(labels, cube) if labels is not None else {}
    n_pairs = len(cube.systems) * (len(cube.systems) - 1) // 2
    settings = _Settings(width, delta, power, alpha, n_pairs, n_questions, replicates)
    per_metric = {}
    for index, metric in enumerate(chosen):
        rng = np.random.default_rng([seed, index])
        per_metric[metric] = _metric_plan(cube, metric, matrices.get(metric), labels is not None, settings,
                                          rng)
    plan = {"target": "width" if width is not None else "difference", "width": width, "delta": delta,
            "power": power if delta is not None else None, "alpha": alpha, "n_questions": n_questions,
            "replicates": replicates, "seed": seed, "systems": list(cube.systems), "min_labels": MIN_LABELS}
    if delta is not None:
        plan.update(n_pairs=n_pairs, alpha_per_pair=alpha / n_pairs)
    plan["labels_per_system"] = {m: e["labels_per_system"] for m, e in per_metric.items()
                                 if e["source"] == "labels"}
    plan["labels_per_system_assumed"] = {m: e["labels_per_system"] for m, e in per_metric.items()
                                         if e["source"] == "assumed"}
    plan["per_metric"] = per_metric
    return plan


@dataclass(frozen=True)
class _Settings:
    width: float | None
    delta: float | None
    power: float
    alpha: float
    n_pairs: int
    n_total: int | None
    replicates: int

    def reached(self, check: SimulationCheck) -> bool:
        if self.delta is None:
            return check.median_half_width <= self.width * (1.0 + REFINE_TOLERANCE)
        return check.power >= self.power - REFINE_TOLERANCE

    @property
    def level(self) -> float:  # the per-pair level of a difference (Bonferroni, Holm's first step)
        return self.alpha / self.n_pairs if self.delta is not None else self.alpha

    def requirement(self, moments: PilotMoments) -> LabelRequirement:
        if self.delta is None:
            return labels_for_width(moments, self.width, self.alpha, self.n_total)
        return labels_for_difference(moments, self.delta, self.power, self.alpha, self.n_pairs, self.n_total)


class _Checked(NamedTuple):
    n_labels: int | None        # the labels recommended: the parametric n, grown where simulation fell short
    check: SimulationCheck | None
    reached: bool | None        # the simulation at n_labels met the target (None: not simulated)


def _metric_plan(cube: ScoreCube, metric: str, matrices: LabelMatrices | None, labeled: bool,
                 settings: _Settings, rng: np.random.Generator) -> dict:
    units = _units(cube.systems, settings)
    if matrices is not None:
        short = _too_few(matrices, units)
        if not short:
            rows = [_labeled_row(matrices, unit, settings, rng) for unit in units]
            return {"source": "labels", "human_metric": matrices.human_metric, "rows": rows,
                    "labels_per_system": _largest([row["n_labels"] for row in rows]),
                    "notes": _row_notes(rows, settings)}
        note = (f"{short[0]} has {short[1]} labeled pilot answer(s), fewer than {MIN_LABELS}: the "
                f"judge-human correlation is not estimated; assumed correlations instead")
    else:
        note = "no labels of this metric: assumed correlations" if labeled else None
    judged = cube.metric_matrix(metric)
    judged = judged[np.isfinite(judged).all(axis=1)]
    rows = [row for unit in units for row in _assumed_rows(judged, cube.systems, unit, settings, rng)]
    per_rho = {f"{rho:g}": _largest([r["n_labels"] for r in rows if r["rho"] == rho]) for rho in ASSUMED_RHOS}
    return {"source": "assumed", "rows": rows, "labels_per_system": per_rho,
            "notes": ([note] if note else []) + _row_notes(rows, settings)}


def _row_notes(rows: list[dict], settings: _Settings) -> list[str]:
    """Where a figure is a bound, not an estimate (rows of assumed correlations: counted, not listed)."""
    if rows and "n_pilot_labels" not in rows[0]:
        short = sum(row["target_reached"] is False for row in rows)
        return [f"{short} cell(s) stay short of the target in simulation at the largest n tried: lower "
                f"bounds"] if short else []
    notes = []
    for row in rows:
        name = _unit_name(row)
        if row["target_reached"] is False:
            notes.append(f"{name}: the simulation stays short of the target at the largest n tried "
                         f"({row['n_labels']}): a lower bound")
        if not row["reachable"]:
            reached = row["half_width"] if settings.delta is None else row["power"]
            what = "half-width" if settings.delta is None else "power"
            notes.append(f"{name}: even labeling all {settings.n_total} questions misses the target ({what} "
                         f"{reached:.4f} there)")
        if row["sigma_human"] == 0.0:
            constant = "its pilot labels never vary" if "system" in row else "its pilot labels never differ"
            notes.append(f"{name}: {constant} (sd 0): {MIN_LABELS} labels is the floor, not an estimate; "
                         f"label more pilot answers")
    return notes


def _units(systems: tuple[str, ...], settings: _Settings) -> list[tuple[int, ...]]:
    if settings.delta is None:
        return [(s,) for s in range(len(systems))]
    return list(combinations(range(len(systems)), 2))


def _too_few(matrices: LabelMatrices, units: list[tuple[int, ...]]) -> tuple[str, int] | None:
    labeled = np.isfinite(matrices.labels)
    for unit in units:
        count = int(labeled[:, list(unit)].all(axis=1).sum())
        if count < MIN_LABELS:
            return " and ".join(matrices.systems[s] for s in unit) + (" (labeled together)" if len(unit) > 1
                                                                      else ""), count
    return None


def _labeled_row(matrices: LabelMatrices, unit: tuple[int, ...], settings: _Settings,
                 rng: np.random.Generator) -> dict:
    rows = np.isfinite(matrices.labels[:, list(unit)]).all(axis=1)
    y, f = matrices.labels[rows][:, list(unit)], matrices.judged[rows][:, list(unit)]
    if len(unit) == 1:
        moments = pilot_moments(y[:, 0], f[:, 0])
        requirement = settings.requirement(moments)
        checked = _check(requirement, settings, lambda n: simulate_width(
            resampler(y[:, 0], f[:, 0]), float(y[:, 0].mean()), n, settings.n_total, settings.alpha,
            settings.replicates, rng, LABEL_SCALE))
    else:
        moments = pilot_moments(y[:, 0] - y[:, 1], f[:, 0] - f[:, 1])
        requirement = settings.requirement(moments)
        shift = settings.delta - float((y[:, 0] - y[:, 1]).mean())
        scale = (min(LABEL_SCALE[0], LABEL_SCALE[0] + shift), max(LABEL_SCALE[1], LABEL_SCALE[1] + shift))
        checked = _check(requirement, settings, lambda n: simulate_difference(
            resampler(y[:, 0] + shift, y[:, 1], f[:, 0], f[:, 1]), settings.delta, n, settings.n_total,
            settings.level, settings.replicates, rng, scale))
    return {**_names(matrices.systems, unit), "n_pilot_labels": int(rows.sum()),
            **_row(moments, requirement, checked, settings)}


def _assumed_rows(judged: np.ndarray, systems: tuple[str, ...], unit: tuple[int, ...], settings: _Settings,
                  rng: np.random.Generator) -> list[dict]:
    scores = judged[:, unit[0]] - (judged[:, unit[1]] if len(unit) > 1 else 0.0)
    rows = []
    for rho in ASSUMED_RHOS:
        moments = assumed_moments(scores, rho)
        requirement = settings.requirement(moments)
        if len(unit) == 1:
            checked = _check(requirement, settings, lambda n: simulate_width(
                gaussian_sampler(moments), 0.0, n, settings.n_total, settings.alpha, settings.replicates,
                rng))
        else:
            checked = _check(requirement, settings, lambda n: simulate_difference(
                _difference_sampler(moments, settings.delta), settings.delta, n, settings.n_total,
                settings.level, settings.replicates, rng))
        rows.append({**_names(systems, unit), "rho": rho, **_row(moments, requirement, checked, settings)})
    return rows


def _difference_sampler(moments: PilotMoments, delta: float):
    """Per-question differences (labels, judge) as system a's, system b's at 0: ppi_paired_difference of
    these is the PPI++ mean of the differences."""
    differences = gaussian_sampler(moments, shift=delta)

    def sample(rng: np.random.Generator, size: int):
        labels, judged = differences(rng, size)
        zeros = np.zeros(size)
        return labels, zeros, judged, zeros

    return sample


def _check(requirement: LabelRequirement, settings: _Settings, simulate) -> _Checked:
    """The parametric n simulated; where the simulation falls short of the target, n grows by REFINE_STEP
    (at most MAX_REFINEMENTS times, never past the run's questions), as `ccrs plan power` does."""
    n = requirement.n_labels
    if settings.replicates == 0 or n is None:
        return _Checked(n, None, None)
    for attempt in range(MAX_REFINEMENTS + 1):
        check = simulate(n)
        reached = settings.reached(check)
        grown = int(np.ceil(n * REFINE_STEP))
        past_the_run = settings.n_total is not None and grown > settings.n_total
        if reached or attempt == MAX_REFINEMENTS or past_the_run:
            return _Checked(n, check, reached)
        n = grown


def _names(systems: tuple[str, ...], unit: tuple[int, ...]) -> dict:
    return {"system": systems[unit[0]]} if len(unit) == 1 else {"a": systems[unit[0]], "b": systems[unit[1]]}


def _row(moments: PilotMoments, requirement: LabelRequirement, checked: _Checked,
         settings: _Settings) -> dict:
    check = checked.check
    row = {"sigma_human": moments.sigma_y, "sigma_judge": moments.sigma_f, "rho": moments.rho,
           "n_labels": checked.n_labels, "parametric_n": requirement.n_labels,
           "labels_only": requirement.labels_only, "reachable": requirement.reachable,
           "target_reached": checked.reached, "lam": requirement.lam, "se": requirement.se}
    if settings.delta is None:
        row["half_width"] = requirement.achieved
    else:
        row["power"] = requirement.achieved
        row["simulated_power"] = check.power if check else None
    row["simulated_median_half_width"] = check.median_half_width if check else None
    row["simulated_coverage"] = check.coverage if check else None
    return row


def _largest(values: list[int | None]) -> int | None:
    """The labels every system needs: the largest row's; None where one row cannot reach the target."""
    return None if any(value is None for value in values) else max(values)


def render(plan: dict) -> str:
    """The console table(s) and notes."""
    lines = [_headline(plan), ""]
    estimated = {m: e for m, e in plan["per_metric"].items() if e["source"] == "labels"}
    assumed = {m: e for m, e in plan["per_metric"].items() if e["source"] == "assumed"}
    if estimated:
        lines += _estimated_table(plan, estimated) + [""]
    if assumed:
        lines += _assumed_table(plan, assumed) + [""]
    for metric, n in plan["labels_per_system"].items():
        lines.append(f"{metric}: {_count(n, plan)} labels per system (from the pilot's labels; labels alone: "
                     f"{_count(_largest([r['labels_only'] for r in estimated[metric]['rows']]), plan)})")
    for metric, entry in plan["per_metric"].items():
        lines += [f"note: {metric}: {note}" for note in entry["notes"]]
    return "\n".join(lines).rstrip()


def _headline(plan: dict) -> str:
    level = f"{1 - plan['alpha']:.0%}"
    if plan["target"] == "width":
        target = f"PPI++ {level} CI half-width <= {plan['width']:g} of each system's mean"
    else:
        target = (f"paired difference {plan['delta']:g} found with power {plan['power']:g} at alpha "
                  f"{plan['alpha']:g} / {plan['n_pairs']} pairs = {plan['alpha_per_pair']:.4g} (Bonferroni, "
                  f"Holm's first step: a lower bound on the power under Holm); labels per system = questions "
                  f"labeled for both systems")
    run = (f"a run of {plan['n_questions']} questions" if plan["n_questions"] is not None
           else "unlabeled answers >> labels (--questions N for a run's size)")
    sim = (f"{plan['replicates']} simulated data sets per row (seed {plan['seed']})" if plan["replicates"]
           else "no simulation (--replicates 0)")
    return f"Labels plan: {target}; {run}; power-tuned lam; checked on {sim}"


def _estimated_table(plan: dict, estimated: dict) -> list[str]:
    width = plan["target"] == "width"
    header = ["metric", "labels of", "system" if width else "pair", "pilot labels", "sd human", "sd judge",
              "rho", "parametric n", "labels needed", "labels only",
              "half-width at parametric n" if width else "power at parametric n",
              *(["simulated median half-width", "coverage"] if width else ["simulated power"])]
    lines = _table_head(header)
    for metric, entry in estimated.items():
        for row in entry["rows"]:
            achieved = row["half_width"] if width else row["power"]
            simulated = ([_fmt(row["simulated_median_half_width"]), _fmt(row["simulated_coverage"], 3)]
                         if width else [_fmt(row["simulated_power"], 3)])
            lines.append(_table_row([
                metric, entry["human_metric"], _unit_name(row), str(row["n_pilot_labels"]),
                _fmt(row["sigma_human"]), _fmt(row["sigma_judge"]), _fmt(row["rho"], 3),
                _count(row["parametric_n"], plan), _count(row["n_labels"], plan),
                _count(row["labels_only"], plan), _fmt(achieved), *simulated]))
    return lines


def _assumed_table(plan: dict, assumed: dict) -> list[str]:
    width = plan["target"] == "width"
    key = "simulated_median_half_width" if width else "simulated_power"
    lines = [f"Assumed judge-human correlations (no pilot labels to estimate them: labels assumed on the "
             f"judge's scale with its sd; rho = 0 is labels only). Cells: labels needed "
             f"({key.replace('_', ' ')})", ""]
    lines += _table_head(["metric", "system" if width else "pair", "sd judge",
                          *(f"rho = {rho:g}" for rho in ASSUMED_RHOS)])
    for metric, entry in assumed.items():
        by_unit: dict[str, list[dict]] = {}
        for row in entry["rows"]:
            by_unit.setdefault(_unit_name(row), []).append(row)
        for name, rows in by_unit.items():
            cells = [f"{_count(r['n_labels'], plan)} ({_fmt(r[key], 3)})" for r in rows]
            lines.append(_table_row([metric, name, _fmt(rows[0]["sigma_judge"]), *cells]))
        lines.append(_table_row([metric, "labels per system", "",
                                 *(_count(n, plan) for n in entry["labels_per_system"].values())]))
    return lines


def _table_head(header: list[str]) -> list[str]:
    return [_table_row(header), _table_row(["---"] * len(header))]


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _unit_name(row: dict) -> str:
    return row["system"] if "system" in row else f"{row['a']} - {row['b']}"


def _count(n: int | None, plan: dict) -> str:
    return f"> {plan['n_questions']}" if n is None else str(n)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"
