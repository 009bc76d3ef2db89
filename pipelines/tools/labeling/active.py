"""`ccrs label --design active`: the questions the page serves and the decisions it shows, from the metric's
active design (design.py: drawn once and recorded, checked again on every start so that a restarted server
continues the same draw), or the uniform order (the default) where a metric was never labeled actively."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence

from pipelines.options import UsageError
from pipelines.tools.label_designs import ACTIVE, DEFAULT_MARGIN, DESIGNS, UNIFORM
from pipelines.tools.labeling.design import (
    ActiveDesign,
    check_design,
    default_budget,
    family_size,
    make_design,
    read_design,
    record_design,
)
from pipelines.tools.labeling.files import read_jsonl, write_json
from pipelines.tools.labeling.metric import LabelMetric, read_metrics_file
from pipelines.tools.labeling.stopline import StopLine
from pipelines.tools.labeling.uncertainty import run_uncertainty
from tasks.runtime.layout import RunLayout

DESIGN_KEY = "design"  # labels/metrics.json: a metric labeled by an active design says so (its record kept)


def check_design_options(design: str, budget: float | None, floor: float | None, margin: float | None,
                         n_questions: int) -> None:
    """One line before anything is written: the design's settings must be usable."""
    if design not in DESIGNS:
        raise UsageError(f"--design must be one of {', '.join(DESIGNS)}, got {design}")
    given = [flag for flag, value in (("--label-budget", budget), ("--label-floor", floor),
                                      ("--label-margin", margin)) if value is not None]
    if design == UNIFORM and given:
        raise UsageError(f"{given[0]} needs --design active")
    if budget is not None and not (math.isfinite(budget) and 1 <= budget <= n_questions):
        raise UsageError(f"--label-budget must lie between 1 and the run's {n_questions} questions, got "
                         f"{budget:g}")
    if floor is not None and not (math.isfinite(floor) and 0.0 < floor <= 1.0):
        raise UsageError(f"--label-floor must lie in (0, 1], got {floor:g}")
    if margin is not None and not (math.isfinite(margin) and margin > 0.0):
        raise UsageError(f"--label-margin must be a positive number, got {margin:g}")
    expected = default_budget(n_questions) if budget is None else budget
    if floor is not None and floor * n_questions > expected:
        raise UsageError(f"--label-floor {floor:g} x {n_questions} questions is over the budget of "
                         f"{expected:g} questions: lower the floor or raise --label-budget")


def served_questions(layout: RunLayout, metric: LabelMetric, order: Sequence[str], seed: int, design: str,
                     budget: float | None = None, floor: float | None = None,
                     margin: float | None = None) -> tuple[list[str], StopLine | None]:
    """(the questions the page serves, in order; the active design's decisions or None)."""
    check_design_options(design, budget, floor, margin, len(order))
    recorded = read_design(layout, metric.name)
    if design == UNIFORM:
        if recorded is not None or _marked_active(layout, metric.name):
            raise UsageError(f"{metric.name} is labeled by an active design (labels/design.json): give "
                             "--design active to go on with it")
        return list(order), None
    uncertainty = run_uncertainty(layout, metric.predicted_by)
    if recorded is None:
        if _has_labels(layout, metric.name):
            raise UsageError(f"{metric.name} already has labels drawn uniformly: an active design now would "
                             "mix two draws; go on with --design uniform, or label another metric")
        recorded = make_design(metric.name, uncertainty, order, seed, budget, floor,
                               DEFAULT_MARGIN if margin is None else margin)
        record_design(layout, recorded)
        _mark_active(layout, metric.name)
    else:
        _check_same_settings(recorded, budget, floor, margin)
        check_design(recorded, uncertainty, order)
    family = family_size(layout, len(uncertainty.systems))
    stop_line = StopLine(recorded, uncertainty.systems, uncertainty.judged_for(recorded.question_ids),
                         metric.scale, family)
    return recorded.drawn_order, stop_line


def _check_same_settings(design: ActiveDesign, budget, floor, margin) -> None:
    for flag, given, recorded in (("--label-budget", budget, design.rule["budget"]),
                                  ("--label-floor", floor, design.rule["floor"]),
                                  ("--label-margin", margin, design.margin)):
        if given is not None and not math.isclose(float(given), float(recorded)):
            raise UsageError(f"{design.metric}'s active design was drawn with {flag} {recorded:g} "
                             f"(labels/design.json), not {given:g}: a new draw would void the labels given")


def _has_labels(layout: RunLayout, metric: str) -> bool:
    records, _ = read_jsonl(layout.labels_file)
    skips, _ = read_jsonl(layout.labels_skips)
    return any(record.get("metric") == metric for record in records + skips)


def _marked_active(layout: RunLayout, metric: str) -> bool:
    return read_metrics_file(layout).get(metric, {}).get(DESIGN_KEY) == ACTIVE


def _mark_active(layout: RunLayout, metric: str) -> None:
    """labels/metrics.json says the metric's labels come from an active design: `ccrs stats` then refuses
    them without the design's record."""
    known = read_metrics_file(layout)
    known.setdefault(metric, {})[DESIGN_KEY] = ACTIVE
    write_json(layout.labels_metrics, known)


def active_metrics(layout: RunLayout) -> list[str]:
    """The metrics labels/metrics.json marks as labeled by an active design."""
    if not layout.labels_metrics.exists():
        return []
    known = json.loads(layout.labels_metrics.read_text())
    return [metric for metric, entry in known.items() if entry.get(DESIGN_KEY) == ACTIVE]
