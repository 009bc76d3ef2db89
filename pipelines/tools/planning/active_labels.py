"""`ccrs plan labels --design active`: the labels an active design (`ccrs label --design active`) needs for
the uniform plan's target, from the pilot's judge uncertainty per question (the spread of its expected-mark
distribution, its repeats, or the systems' disagreement: pipelines/tools/labeling/uncertainty.py).

The forecast. An active design labels question i with probability pi_i (stats.active.sampling_probabilities,
floor at half the uniform rate, as `ccrs label` draws it); its inverse-probability-weighted estimate has the
design variance sum(r_i^2 (1 - pi_i) / pi_i) / N^2, r_i the question's residual label - prediction,
against sum(r_i^2) (N / n - 1) / N^2 for n labels drawn uniformly. Assuming the residual's sd is
proportional to the judge's uncertainty u_i (what the issue's simulated judge does: its spread tracks its
error), the forecast is the smallest budget whose design variance is at most uniform's at the uniform
plan's n, found by bisection on the pilot's questions and scaled to the run's. It is optimistic for a judge
whose uncertainty tracks its error less well; checked by simulation in tests/pipelines/tools/planning/
test_active_labels.py."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.tools.label_designs import ACTIVE, UNIFORM
from pipelines.tools.labeling.design import FLOOR_SHARE
from pipelines.tools.labeling.uncertainty import mark_spreads, uncertainty_of
from pipelines.tools.planning import labels as uniform_plan
from stats.active import sampling_probabilities
from tasks.runtime.layout import RunLayout

_BISECTIONS = 60
ASSUMPTION = ("the judge's error sd taken proportional to its uncertainty per question (optimistic where it "
              "tracks the error less well); floor at half the uniform rate")


def plan_labels(scores: pd.DataFrame, labels, metrics, *, design: str = UNIFORM, pilot: Path | None = None,
                **settings) -> dict:
    """`ccrs plan labels`' plan (planning/labels.py's plan_labels with `settings`), and for
    `design="active"` the active design's part, plan["active"], from the pilot's uncertainty."""
    plan = uniform_plan.plan_labels(scores, labels, metrics, **settings)
    if design == ACTIVE:
        plan[ACTIVE] = active_plan(plan, scores, pilot)
    return plan


def render(plan: dict) -> str:
    """The plan's console text (planning/labels.py's render), the active design's part after it."""
    text = uniform_plan.render(plan)
    return f"{text}\n\n{render_active(plan[ACTIVE])}" if ACTIVE in plan else text


def active_labels(uniform_n: int | None, uncertainty: np.ndarray | None,
                  n_questions: int | None) -> int | None:
    """The labels (questions) an active design needs for the design variance of `uniform_n` uniform ones;
    None where uniform cannot reach the target either; uniform's where no uncertainty is given."""
    if uniform_n is None or uncertainty is None:
        return uniform_n
    u = np.asarray(uncertainty, dtype=np.float64)
    n_pilot = u.size
    total = n_questions or n_pilot
    rate = uniform_n / total
    if rate >= 1.0 or np.ptp(u) == 0.0 or not (u > 0).any():
        return uniform_n
    target = float((u**2).sum() * (1.0 / rate - 1.0))
    low, high = min(1.0, rate * n_pilot), float(n_pilot)  # from one expected label to every question
    if design_variance(u, low) <= target:
        return math.ceil(low / n_pilot * total)
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        low, high = (low, middle) if design_variance(u, middle) <= target else (middle, high)
    return min(uniform_n, math.ceil(high / n_pilot * total))


def design_variance(u: np.ndarray, budget: float) -> float:
    """sum(u^2 (1 / pi - 1)) of the active design of `budget` expected labels (floor: FLOOR_SHARE of its
    uniform rate)."""
    pi = sampling_probabilities(u, budget, FLOOR_SHARE * budget / u.size).probabilities
    return float((u**2 * (1.0 / pi - 1.0)).sum())


def active_plan(plan: dict, scores: pd.DataFrame, pilot: Path) -> dict:
    """plan["active"]: per metric, the uncertainty used and, for each uniform figure of the plan (per
    system, or per assumed correlation), the active design's labels and their ratio to uniform's."""
    result = {"assumption": ASSUMPTION, "per_metric": {}}
    for metric, entry in plan["per_metric"].items():
        spreads = mark_spreads(RunLayout(pilot), metric) if Path(pilot).is_dir() else None
        uncertainty = uncertainty_of(scores, metric, spreads)
        uniform = entry["labels_per_system"]
        figures = uniform if isinstance(uniform, dict) else {"labels": uniform}
        forecast = {key: _forecast(n, uncertainty.per_question if key != "0" else None, plan["n_questions"])
                    for key, n in figures.items()}  # rho = 0: the judge tells nothing, nothing to save
        result["per_metric"][metric] = {"uncertainty": uncertainty.source, "source": entry["source"],
                                        "labels": forecast}
    return result


def _forecast(uniform_n: int | None, uncertainty: np.ndarray | None, n_questions: int | None) -> dict:
    active = active_labels(uniform_n, uncertainty, n_questions)
    ratio = None if active is None or not uniform_n else active / uniform_n
    return {"uniform": uniform_n, "active": active, "ratio": ratio}


def render_active(active: dict) -> str:
    lines = [f"Active design (`ccrs label --design active`): {active['assumption']}"]
    for metric, entry in active["per_metric"].items():
        cells = []
        for key, figure in entry["labels"].items():
            where = "" if key == "labels" else f"rho = {key}: "
            shown = ("n/a" if figure["active"] is None else
                     f"{figure['active']} (uniform {figure['uniform']}, ratio {figure['ratio']:.2f})")
            cells.append(f"{where}{shown}")
        lines.append(f"{metric}: labeled questions by the {entry['uncertainty']}: {'; '.join(cells)}")
    return "\n".join(lines)
