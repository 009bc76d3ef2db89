"""`ccrs plan power`: how many questions a run needs, from a pilot's per-question scores (stats/power.py).

The pilot is a run directory (every judge suite's scores.parquet, found through RunLayout) or one
long-format scores file (query_id, system, metric, score). Per metric: the residual variance of the
systems x questions design, the questions needed for `delta` (best vs worst, and any pair), the minimum
detectable difference at the pilot's size, and the power that the randomized HSD reaches on simulated
pilot-shaped data at the recommended size.

A pilot with a `repeat` column (judge.repeats >= 2) adds, per such metric, a decision study
(stats/decision_study.py): how many questions and how many judge repeats per answer reach the target
power, the cheapest in judge calls within a budget and the questions available, checked by simulation
on pilot-shaped data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stats.decision_study import DecisionStudy, decision_study, design_power, simulated_design_power
from stats.errors import StatsInputError
from stats.judge_noise import COMPONENTS, VarianceComponents, variance_components
from stats.power import (
    VarianceEstimate,
    hsd_power,
    minimum_detectable_difference,
    questions_needed,
    residual_variance,
    simulated_power,
)
from stats.scores import build_cube, validate_scores
from tasks.runtime.layout import RunLayout
from tasks.reduce import concat_scores, read_scores_file

REQUIREMENTS = ("best_worst", "any_pair")
# Where the randomized HSD on pilot-shaped data falls short of the target at the parametric n (skewed,
# bounded, unequal-variance scores), n grows by REFINE_STEP until the simulated power is within
# REFINE_TOLERANCE of the target (at most MAX_REFINEMENTS steps): the HSD is what the user will run.
REFINE_STEP = 1.05
REFINE_TOLERANCE = 0.02
MAX_REFINEMENTS = 12
_DECISION_STREAM = 1  # the decision study's simulation: rng seeded (seed, metric index, _DECISION_STREAM)
_SEQUENTIAL_STREAM = 2  # the sequential simulation: rng seeded (seed, _SEQUENTIAL_STREAM)


def load_pilot(path: Path) -> pd.DataFrame:
    """Validated long-format scores of a run directory (all judged suites) or of one scores file."""
    path = Path(path)
    if path.is_dir():
        layout = RunLayout(path)
        suites = layout.judged_suites()
        if not suites:
            raise StatsInputError(f"{path} holds no judge stage output (judge_<suite>/scores.parquet)")
        frame = concat_scores([read_scores_file(layout.scores(suite)) for suite in suites])
    else:
        frame = read_scores_file(path)
    return validate_scores(frame)


def plan_power(scores: pd.DataFrame, metrics: list[str] | None, delta: float, power: float, alpha: float,
               b: int, replicates: int, seed: int, metric_order: list[str] = (), *, max_repeats: int = 5,
               budget: int | None = None, max_questions: int | None = None) -> dict:
    """Per metric: the questions needed (on repeat-averaged scores where the pilot repeats judgments) and,
    for a metric with repeats, the decision study (top-level `decision_study`: one row per design)."""
    cube = build_cube(scores, metric_order)
    chosen = list(metrics or cube.metrics)
    unknown = [m for m in chosen if m not in cube.metrics]
    if unknown:
        raise StatsInputError(f"metric(s) {unknown} not in the pilot; it has {list(cube.metrics)}")
    if len(cube.systems) < 2:  # a valid run (issue 33), but no difference between systems to plan for
        raise StatsInputError("power planning compares systems: the pilot holds one "
                              f"({', '.join(cube.systems)})")
    per_metric = {}
    for index, metric in enumerate(chosen):
        matrix = cube.metric_matrix(metric)
        complete = matrix[np.isfinite(matrix).all(axis=1)]
        rng = np.random.default_rng([seed, index])
        per_metric[metric] = metric_plan(complete, cube.systems, delta, power, alpha, b, replicates, rng)
        per_metric[metric]["n_dropped"] = int(len(matrix) - len(complete))
    plan = {"delta": delta, "power": power, "alpha": alpha, "b": b, "replicates": replicates, "seed": seed,
            "systems": list(cube.systems),
            "n_questions": {m: entry["n_questions"] for m, entry in per_metric.items()},
            "per_metric": per_metric}
    repeated = [(index, m) for index, m in enumerate(chosen) if cube.n_repeats(m) >= 2]
    if repeated:
        limits = {"max_repeats": max_repeats, "budget": budget, "max_questions": max_questions}
        plan["decision_study_limits"] = limits
        plan["decision_study"] = []
        for index, metric in repeated:
            scores_of = cube.metric_repeats(metric)
            rng = np.random.default_rng([seed, index, _DECISION_STREAM])
            decision = decision_plan(scores_of[np.isfinite(scores_of).all(axis=(1, 2))], cube.systems, delta,
                                     power, alpha, b, replicates, rng, **limits)
            per_metric[metric]["decision"] = decision
            plan["decision_study"] += [{"metric": metric, **row} for row in decision.get("designs", [])]
    return plan


def sequential_plan(scores: pd.DataFrame, plan: dict, margin: float, look_every: int | None,
                    replicates: int, metric_order: list[str] = ()) -> dict:
    """A sequential run of the fixed plan's questions (the most any metric needs), simulated from the pilot
    (stats.sequential.simulated_stops): where it is expected to stop and the judge calls it would send."""
    from stats.sequential import simulated_stops

    cube = build_cube(scores, metric_order)
    metrics = list(plan["per_metric"])
    needed = [n for n in plan["n_questions"].values() if n is not None]
    if not needed:
        raise StatsInputError("--sequential-margin: the fixed plan found no question count to simulate")
    n_questions = max(needed)
    every = look_every or max(1, n_questions // 20)
    complete = np.isfinite(np.stack([cube.metric_matrix(m) for m in metrics])).all(axis=(0, 2))
    matrices = {metric: cube.metric_matrix(metric)[complete] for metric in metrics}
    rng = np.random.default_rng([plan["seed"], _SEQUENTIAL_STREAM])
    stops = simulated_stops(matrices, cube.systems, n_questions, look_every=every, margin=margin,
                            alpha=plan["alpha"], replicates=replicates, rng=rng)
    per_question = len(cube.systems) * len(metrics)
    return {"margin": margin, "look_every": every, "replicates": replicates, "n_questions": n_questions,
            "mean_stop": stops.mean_stop, "min_stop": min(stops.stops), "max_stop": max(stops.stops),
            "settled_share": stops.settled, "judge_calls_fixed": n_questions * per_question,
            "judge_calls_expected": stops.mean_stop * per_question}


def decision_plan(scores: np.ndarray, systems: tuple[str, ...], delta: float, power: float, alpha: float,
                  b: int, replicates: int, rng: np.random.Generator, max_repeats: int, budget: int | None,
                  max_questions: int | None) -> dict:
    """The decision study of one metric from its complete (n_questions, n_systems, n_repeats) pilot."""
    if len(scores) < 2:
        return {"n_pilot": len(scores), "designs": [], "recommended": None,
                "note": "fewer than 2 pilot questions have every repeat from every system: no decision study"}
    components = variance_components(scores)
    study = decision_study(components, len(systems), delta, power, alpha, max_repeats, budget, max_questions)
    order = np.argsort(scores.mean(axis=(0, 2)), kind="stable")
    pair = (int(order[-1]), int(order[0]))
    recommended = _checked_recommendation(scores, study, components, delta, power, alpha, b, replicates, rng,
                                          pair, budget, max_questions, systems)
    entry = {
        "n_pilot": components.n_questions,
        "n_repeats_pilot": components.n_repeats,
        "components": dict(zip(COMPONENTS, components.variances.tolist())),
        "reliability": components.reliability(),
        "reliability_one_judgment": components.reliability(1),
        "designs": [{**design.as_dict, "meets_target": design.power >= power,
                     "recommended": design == study.recommended} for design in study.designs],
        "recommended": recommended,
    }
    if study.recommended is None:
        entry["note"] = "no design of at least 2 questions fits the budget"
    elif not study.target_reached:
        entry["note"] = ("no design within the limits reaches the target power: the recommendation is the "
                         "most powerful one within them")
    return entry


def _checked_recommendation(scores: np.ndarray, study: DecisionStudy, components: VarianceComponents,
                            delta: float, power: float,
                            alpha: float, b: int, replicates: int, rng: np.random.Generator,
                            pair: tuple[int, int], budget: int | None, max_questions: int | None,
                            systems: tuple[str, ...]) -> dict | None:
    """The recommended design, simulated; where the randomized HSD on pilot-shaped data falls short of the
    target, n_questions grows by REFINE_STEP (within the limits) as in the questions-only plan."""
    design = study.recommended
    if design is None:
        return None
    k, n_repeats = len(systems), design.n_repeats
    ceiling = min(max_questions or np.inf, (budget // (k * n_repeats)) if budget else np.inf)
    n, simulated, reached = design.n_questions, None, None
    for attempt in range(MAX_REFINEMENTS + 1 if replicates > 0 else 0):
        simulated = simulated_design_power(scores, n, n_repeats, delta, alpha, b, replicates, rng, pair)
        reached = simulated >= power - REFINE_TOLERANCE
        grown = int(np.ceil(n * REFINE_STEP))
        if reached or attempt == MAX_REFINEMENTS or not study.target_reached or grown > ceiling:
            break
        n = grown
    return {"n_questions": n, "n_repeats": n_repeats, "judge_calls": n * k * n_repeats,
            "parametric_n_questions": design.n_questions,
            "parametric_power": design_power(components, n, n_repeats, delta, k, alpha),
            "simulated_power": simulated, "target_reached": reached if study.target_reached else False,
            "simulated_pair": [systems[pair[0]], systems[pair[1]]]}


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
    return "\n".join(lines + [f"note: {note}" for note in notes] + decision_markdown(plan)
                     + sequential_markdown(plan.get("sequential")))


def sequential_markdown(sequential: dict | None) -> list[str]:
    if not sequential:
        return []
    saved = 1 - sequential["judge_calls_expected"] / sequential["judge_calls_fixed"]
    return ["", f"Sequential (judge.sequential: margin {sequential['margin']:g}, a look every "
                f"{sequential['look_every']} questions, {sequential['replicates']} runs simulated from the "
                f"pilot): expected stop {sequential['mean_stop']:.0f} of {sequential['n_questions']} "
                f"questions (range {sequential['min_stop']}-{sequential['max_stop']}), judge calls "
                f"{sequential['judge_calls_expected']:,.0f} of {sequential['judge_calls_fixed']:,} "
                f"({saved:.0%} saved); every comparison settled in {sequential['settled_share']:.0%} of them"]


def decision_markdown(plan: dict) -> list[str]:
    """The decision study's lines (none for a pilot without repeats)."""
    decided = {metric: entry["decision"] for metric, entry in plan["per_metric"].items()
               if "decision" in entry}
    if not decided:
        return []
    limits = plan["decision_study_limits"]
    shown = ", ".join(f"{name}={value}" for name, value in limits.items() if value is not None)
    lines = ["", f"Decision study (questions x judge repeats; best vs worst system; {shown}): judge calls = "
             f"questions x {len(plan['systems'])} systems x repeats, per metric",
             "",
             "| metric | reliability (pilot repeats / one judgment) | repeats | questions | judge calls "
             "| parametric power | |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for metric, entry in decided.items():
        reliability = (f"{entry['reliability']:.3f} ({entry['n_repeats_pilot']}) / "
                       f"{entry['reliability_one_judgment']:.3f}" if "reliability" in entry else "n/a")
        for row in entry["designs"]:
            mark = "meets target" if row["meets_target"] else ""
            mark = "**recommended**" if row["recommended"] else mark
            lines.append(f"| {metric} | {reliability} | {row['n_repeats']} | {row['n_questions']} | "
                         f"{row['judge_calls']} | {row['power']:.3f} | {mark} |")
    for metric, entry in decided.items():
        r = entry["recommended"]
        if r is not None:
            simulated = "n/a" if r["simulated_power"] is None else f"{r['simulated_power']:.3f}"
            lines.append(f"{metric}: {r['n_questions']} questions x {r['n_repeats']} repeats "
                         f"({r['judge_calls']} judge calls), simulated power {simulated} "
                         f"({' vs '.join(r['simulated_pair'])})")
        if "note" in entry:
            lines.append(f"note: {metric}: {entry['note']}")
    return lines
