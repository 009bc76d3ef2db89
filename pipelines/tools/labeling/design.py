"""The active labeling design of a metric (`ccrs label --design active`, docs/human-labels.md): each question
is drawn for labeling with a probability proportional to the judge's uncertainty on it
(stats.active.sampling_probabilities: floored so that every question can be drawn, summing to the budget),
once, in the seeded question order of labels/order.json; every answer of a drawn question is labeled. The
design (rule, floor, budget, seed, each question's uncertainty, probability and draw, the scores it was
drawn from) is recorded once in labels/design.json, so that the labels can be weighted back and checked
later: a restarted server serves the same draw, and `ccrs stats` refuses labels the record does not
explain."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.tools.label_designs import ACTIVE, DEFAULT_MARGIN
from pipelines.tools.labeling.files import write_json
from pipelines.tools.labeling.uncertainty import JudgeUncertainty
from stats.active import MIN_ACTIVE_LABELS, draw_labeled, sampling_probabilities
from stats.errors import StatsInputError
from tasks.runtime.layout import RunLayout

# The default floor: half the uniform rate budget / N, for `ccrs label` and `ccrs plan labels`. A quarter
# saves more with the benchmark's judge, but its fixed-n coverage fell to 0.923-0.930 with the reading
# judge, where half covered as well or better in every fixed-n cell (docs/human-labels.md, "The default
# floor").
FLOOR_SHARE = 0.5
BUDGET_SHARE = 0.3  # the default budget: this share of the questions, at least MIN_ACTIVE_LABELS
DEFAULT_ALPHA = 0.05
# stats.active's betting sequences settle later (benchmark, correlation 0.6: 527 labels active against 298)
ANYTIME_METHOD = "asymptotic"
DRAW_STREAM = 49  # the draw's random stream, beside the order's (issue 49)
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ActiveDesign:
    """One metric's design, in the order the page serves questions (labels/order.json's)."""

    metric: str
    predicted_by: str
    seed: int
    rule: dict                  # stats.active.SamplingRule.to_json()
    source: str                 # where the uncertainty came from (uncertainty.SOURCES)
    scores_digest: str          # the judge scores it was drawn from (JudgeUncertainty.digest)
    margin: float
    alpha: float
    method: str
    question_ids: tuple[str, ...]
    uncertainty: tuple[float, ...]
    probabilities: tuple[float, ...]
    drawn: tuple[bool, ...]

    @property
    def drawn_order(self) -> list[str]:
        return [q for q, drawn in zip(self.question_ids, self.drawn) if drawn]

    def probability_of(self) -> dict[str, float]:
        return dict(zip(self.question_ids, self.probabilities))

    def record(self) -> dict:
        return {"design": ACTIVE, "predicted_by": self.predicted_by, "seed": self.seed, "rule": self.rule,
                "uncertainty_source": self.source, "scores_digest": self.scores_digest, "margin": self.margin,
                "alpha": self.alpha, "method": self.method,
                "questions": [{"question_id": q, "uncertainty": u, "probability": p, "drawn": d}
                              for q, u, p, d in zip(self.question_ids, self.uncertainty, self.probabilities,
                                                    self.drawn)]}

    @classmethod
    def from_record(cls, metric: str, data: dict) -> ActiveDesign:
        try:
            questions = data["questions"]
            return cls(metric, str(data["predicted_by"]), int(data["seed"]), dict(data["rule"]),
                       str(data["uncertainty_source"]), str(data["scores_digest"]), float(data["margin"]),
                       float(data["alpha"]), str(data["method"]),
                       tuple(str(q["question_id"]) for q in questions),
                       tuple(float(q["uncertainty"]) for q in questions),
                       tuple(float(q["probability"]) for q in questions),
                       tuple(bool(q["drawn"]) for q in questions))
        except (KeyError, TypeError, ValueError) as error:
            raise StatsInputError(f"labels/design.json: the design of {metric} is incomplete ({error!r})") \
                from None


def default_budget(n_questions: int) -> int:
    return min(n_questions, max(MIN_ACTIVE_LABELS, math.ceil(BUDGET_SHARE * n_questions)))


def make_design(metric: str, uncertainty: JudgeUncertainty, order: Sequence[str], seed: int,
                budget: float | None = None, floor: float | None = None, margin: float = DEFAULT_MARGIN,
                alpha: float = DEFAULT_ALPHA) -> ActiveDesign:
    """The design of `metric` (labels predicted by uncertainty.metric) over the questions of `order`."""
    n = len(order)
    budget = float(default_budget(n) if budget is None else budget)
    floor = FLOOR_SHARE * budget / n if floor is None else float(floor)
    if not (math.isfinite(margin) and margin > 0.0):
        raise StatsInputError(f"--label-margin must be a positive number, got {margin}")
    u = uncertainty.for_questions(order)
    design = sampling_probabilities(u, budget, floor)
    drawn = draw_labeled(design.probabilities, np.random.default_rng([seed, DRAW_STREAM]))
    return ActiveDesign(metric, uncertainty.metric, seed, design.rule.to_json(), uncertainty.source,
                        uncertainty.digest(), float(margin), float(alpha), ANYTIME_METHOD, tuple(order),
                        tuple(float(x) for x in u), tuple(float(p) for p in design.probabilities),
                        tuple(bool(d) for d in drawn))


# a folder reused by another run (a nightly series' folder holds each night in turn)
RUN_CHANGED_HINT = (" (labels/ belongs to an earlier run in this folder, e.g. last night's: to label this "
                    "run, move labels/ aside; that run's labels stay logged with its MLflow run)")


def check_design(design: ActiveDesign, uncertainty: JudgeUncertainty, order: Sequence[str] | None) -> None:
    """The record explains itself and this run: the same questions (in labels/order.json's order), the
    same judge scores, and probabilities and draws that its rule, uncertainties and seed give again (a
    design edited by hand does not); else one line (StatsInputError)."""
    where = f"labels/design.json ({design.metric})"
    if order is not None and list(design.question_ids) != list(order):
        raise StatsInputError(f"{where} lists other questions, or another order, than labels/order.json: the "
                              f"run changed since the design was drawn{RUN_CHANGED_HINT}")
    if uncertainty.digest() != design.scores_digest or uncertainty.source != design.source:
        raise StatsInputError(f"{where} was drawn from other judge scores of {design.predicted_by} than the "
                              f"run holds now: the run changed since the design was drawn{RUN_CHANGED_HINT}")
    if not np.allclose(uncertainty.for_questions(design.question_ids), design.uncertainty, rtol=0.0,
                       atol=_TOLERANCE):
        raise StatsInputError(f"{where}: its uncertainties are not the ones the run's scores give (edited "
                              "by hand?)")
    rule = design.rule
    again = sampling_probabilities(np.array(design.uncertainty), rule["budget"], rule["floor"])
    if not np.allclose(again.probabilities, design.probabilities, rtol=0.0, atol=_TOLERANCE):
        raise StatsInputError(f"{where}: its probabilities do not match its rule and recorded scores (edited "
                              "by hand?)")
    drawn = draw_labeled(again.probabilities, np.random.default_rng([design.seed, DRAW_STREAM]))
    if tuple(bool(d) for d in drawn) != design.drawn:
        raise StatsInputError(f"{where}: its draws are not the ones its seed gives (edited by hand?)")


def read_designs(layout: RunLayout) -> dict[str, dict]:
    if not layout.labels_design.exists():
        return {}
    try:
        return json.loads(layout.labels_design.read_text())
    except ValueError as error:
        raise StatsInputError(f"cannot read {layout.labels_design}: {error}") from None


def read_design(layout: RunLayout, metric: str) -> ActiveDesign | None:
    data = read_designs(layout).get(metric)
    return None if data is None else ActiveDesign.from_record(metric, data)


def record_design(layout: RunLayout, design: ActiveDesign) -> None:
    """labels/design.json with this metric's design merged in (written once: a reopened page reads it)."""
    known = read_designs(layout)
    known[design.metric] = design.record()
    write_json(layout.labels_design, known)


def family_size(layout: RunLayout, n_systems: int) -> int:
    """Pairs x metrics of the run's active designs (Bonferroni, as sequential judging controls them)."""
    metrics = max(len(read_designs(layout)), 1)
    return max(n_systems * (n_systems - 1) // 2, 1) * metrics
