"""`ccrs plan power`: how many questions a run needs, from a pilot's per-question scores (stats/power.py).

The pilot is a run directory (every judge suite's scores.parquet, found through RunLayout) or one
long-format scores file (query_id, system, metric, score). Per metric: the residual variance of the
systems x questions design, the questions needed for `delta` (best vs worst, and any pair), the minimum
detectable difference at the pilot's size, and the power that the randomized HSD reaches on simulated
pilot-shaped data at the recommended size."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stats.errors import StatsInputError
from stats.power import (
    VarianceEstimate,
    hsd_power,
    minimum_detectable_difference,
    questions_needed,
    residual_variance,
    simulated_power,
)
from stats.scores import build_cube, validate_scores
from tasks.layout import RunLayout
from tasks.report import read_scores_file

REQUIREMENTS = ("best_worst", "any_pair")
# Where the randomized HSD on pilot-shaped data falls short of the target at the parametric n (skewed,
# bounded, unequal-variance scores), n grows by REFINE_STEP until the simulated power is within
# REFINE_TOLERANCE of the target (at most MAX_REFINEMENTS steps): the HSD is what the user will run.
REFINE_STEP = 1.05
REFINE_TOLERANCE = 0.02
MAX_REFINEMENTS = 12


def load_pilot(path: Path) -> pd.DataFrame:
    """Validated long-format scores of a run directory (all judged suites) or of one scores file."""
    path = Path(path)
    if path.is_dir():
        layout = RunLayout(path)
        suites = layout.judged_suites()
        if not suites:
            raise StatsInputError(f"{path} holds no judge stage output (judge_<suite>/scores.parquet)")
        frame = pd.concat([read_scores_file(layout.scores(suite)) for suite in suites], ignore_index=True)
    else:
        frame = read_scores_file(path)
    return validate_scores(frame)


def plan_power(scores: pd.DataFrame, metrics: list[str] | None, delta: float, power: float, alpha: float,
               b: int, replicates: int, seed: int, metric_order: list[str] = ()) -> dict:
    cube = build_cube(scores, metric_order)
    chosen = list(metrics or cube.metrics)
    unknown = [m for m in chosen if m not in cube.metrics]
    if unknown:
        raise StatsInputError(f"metric(s) {unknown} not in the pilot; it has {list(cube.metrics)}")
    per_metric = {}
    for index, metric in enumerate(chosen):
        matrix = cube.metric_matrix(metric)
        complete = matrix[np.isfinite(matrix).all(axis=1)]
        rng = np.random.default_rng([seed, index])
        per_metric[metric] = metric_plan(complete, cube.systems, delta, power, alpha, b, replicates, rng)
        per_metric[metric]["n_dropped"] = int(len(matrix) - len(complete))
    return {"delta": delta, "power": power, "alpha": alpha, "b": b, "replicates": replicates, "seed": seed,
            "systems": list(cube.systems),
            "n_questions": {m: entry["n_questions"] for m, entry in per_metric.items()},
            "per_metric": per_metric}


def metric_plan(matrix: np.ndarray, systems: tuple[str, ...], delta: float, power: float, alpha: float,
                b: int, replicates: int, rng: np.random.Generator) -> dict:
    estimate = residual_variance(matrix)
    if estimate.pair_variances.max() == 0.0:
        return {"n_pilot": estimate.n_questions, "residual_variance": 0.0, "residual_sd": 0.0,
                "df": estimate.df, "n_questions": None, "requirements": {},
                "note": "no system differs from another within any question (every score ties): the pilot "
                        "shows no noise to plan from; pilot with a judge whose scores vary"}
    order = np.argsort(matrix.mean(axis=0), kind="stable")  # two distinct systems even when all means tie
    pairs = {"best_worst": (int(order[-1]), int(order[0])), "any_pair": estimate.worst_pair()}
    requirements = {name: requirement_plan(matrix, estimate, name, pairs[name], delta, power, alpha, b,
                                           replicates, rng, systems) for name in REQUIREMENTS}
    plan = {"n_pilot": estimate.n_questions, "residual_variance": estimate.residual_variance,
            "residual_sd": float(np.sqrt(estimate.residual_variance)), "df": estimate.df,
            "n_questions": max(r["n_questions"] for r in requirements.values()),
            "requirements": requirements}
    missed = [name for name, r in requirements.items() if r["target_reached"] is False]
    if missed:
        plan["note"] = (f"the simulated HSD stays below the target power at the largest n tried "
                        f"({', '.join(missed)}): n_questions is a lower bound")
    return plan


def requirement_plan(matrix: np.ndarray, estimate: VarianceEstimate, requirement: str, pair: tuple[int, int],
                     delta: float, power: float, alpha: float, b: int, replicates: int,
                     rng: np.random.Generator, systems: tuple[str, ...]) -> dict:
    variance = estimate.difference_variance(requirement)
    pooled = estimate.difference_variance("best_worst")
    k = estimate.n_systems
    parametric_n = questions_needed(delta, variance, k, alpha, power, pooled)
    n, simulated, reached = parametric_n, None, None
    for attempt in range(MAX_REFINEMENTS + 1 if replicates > 0 else 0):
        simulated = float(simulated_power(matrix, n, delta, alpha, b, replicates, rng, pair).power)
        reached = simulated >= power - REFINE_TOLERANCE
        if reached or attempt == MAX_REFINEMENTS:
            break  # the reported n is always the one last simulated
        n = int(np.ceil(n * REFINE_STEP))
    grid = np.unique(np.linspace(2, max(2 * n, estimate.n_questions, 10), 40).astype(int))
    return {
        "n_questions": n,
        "parametric_n": parametric_n,
        "difference_sd": float(np.sqrt(variance)),
        "parametric_power": hsd_power(delta, n, variance, k, alpha, pooled),
        "simulated_power": simulated,
        "target_reached": reached,
        "simulated_pair": [systems[pair[0]], systems[pair[1]]],
        "mdd_at_pilot_n": minimum_detectable_difference(estimate.n_questions, variance, k, alpha, power,
                                                        pooled),
        "pilot_power": hsd_power(delta, estimate.n_questions, variance, k, alpha, pooled),
        "curve": {"n": grid.tolist(),
                  "power": [hsd_power(delta, int(m), variance, k, alpha, pooled) for m in grid]},
    }


def markdown(plan: dict) -> str:
    lines = [f"Power plan: delta={plan['delta']}, target power={plan['power']}, alpha={plan['alpha']}, "
             f"{len(plan['systems'])} systems; simulation: randomized HSD with B={plan['b']}, "
             f"{plan['replicates']} replicates",
             "",
             "| metric | pilot n | residual sd | requirement | parametric n | n needed | parametric power "
             "| simulated power | MDD at pilot n | power at pilot n |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for metric, entry in plan["per_metric"].items():
        if entry["n_questions"] is None:
            lines.append(f"| {metric} | {entry['n_pilot']} | 0 | - | n/a | n/a | | | | |")
        for name, r in entry["requirements"].items():
            simulated = "n/a" if r["simulated_power"] is None else f"{r['simulated_power']:.3f}"
            lines.append(f"| {metric} | {entry['n_pilot']} | {entry['residual_sd']:.4f} | {name} | "
                         f"{r['parametric_n']} | {r['n_questions']} | {r['parametric_power']:.3f} | "
                         f"{simulated} | "
                         f"{r['mdd_at_pilot_n']:.4f} | {r['pilot_power']:.3f} |")
    notes = [f"{metric}: {entry['note']}" for metric, entry in plan["per_metric"].items() if "note" in entry]
    return "\n".join(lines + [f"note: {note}" for note in notes])
