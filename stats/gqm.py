"""GQM hierarchical weighted aggregation (gqm-thesis chapter 4.2), pure numpy.

A goal tree is goals -> questions -> metrics, each with a weight. Metric values (already on [0, 1]) are
merged into question scores by a weighted mean, question scores into goal scores, goal scores into one
overall score. Every score keeps its trace: the contribution of each metric to its question, its goal and
the overall score, so that the contributions of a node sum exactly to its score.

Missing metrics (absent or non-finite value) are never treated as 0 and never yield NaN:
- renormalize=False: a question with any missing metric is *not computable* (score None, with the reason);
  a goal with any non-computable question is not computable; the overall score likewise.
- renormalize=True: weights are renormalized over the available metrics (questions, goals) only; a node is
  not computable only when none of its children is available. `coverage` reports the share of configured
  weight that was available (1.0 = nothing missing).

The tree here is plain frozen dataclasses; YAML loading and validation live in pipelines/reporting/gqm.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ROLE_WEIGHT_RANGES: dict[str, tuple[float, float]] = {
    "primary": (0.8, 1.0),
    "secondary": (0.4, 0.8),
    "supporting": (0.1, 0.4),
}
COMPONENTS = ("retriever", "generator", "system")


@dataclass(frozen=True)
class MetricNode:
    """A metric under a question: its column name, its role (a key of ROLE_WEIGHT_RANGES) and weight."""

    name: str
    role: str
    weight: float


@dataclass(frozen=True)
class QuestionNode:
    """A question: the weighted mean of its metrics; `component` (COMPONENTS) is the part of the system it
    asks about."""

    id: str
    component: str
    weight: float
    metrics: tuple[MetricNode, ...]


@dataclass(frozen=True)
class GoalNode:
    """A goal: the weighted mean of its questions' scores."""

    id: str
    weight: float
    questions: tuple[QuestionNode, ...]


@dataclass(frozen=True)
class GoalTree:
    """The goals, whose weighted mean is the overall score; `renormalize`: see the module docstring."""

    goals: tuple[GoalNode, ...]
    renormalize: bool = False

    def metric_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for goal in self.goals:
            for question in goal.questions:
                for metric in question.metrics:
                    seen.setdefault(metric.name, None)
        return list(seen)


@dataclass(frozen=True)
class Contribution:
    """How much one metric value moved its question, goal and the overall score (score units)."""

    goal: str
    question: str
    metric: str
    role: str
    value: float
    weight: float  # configured weight
    to_question: float
    to_goal: float
    to_overall: float | None


@dataclass(frozen=True)
class NodeScore:
    id: str
    score: float | None
    reason: str | None  # why not computable, None when computable
    coverage: float  # available configured weight / configured weight
    missing: tuple[str, ...]


@dataclass(frozen=True)
class QuestionScore(NodeScore):
    goal: str = ""
    component: str = ""


@dataclass(frozen=True)
class GQMResult:
    overall: NodeScore
    goals: tuple[NodeScore, ...]
    questions: tuple[QuestionScore, ...]
    components: dict[str, NodeScore]
    contributions: tuple[Contribution, ...]


def _weighted(values: np.ndarray, weights: np.ndarray, renormalize: bool) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray]:
    """Row-wise weighted means of (s, k) values with NaN = missing. Returns (score, computable, share)
    where share[s, k] is the normalized weight each child gets (0 for missing ones)."""
    available = np.isfinite(values)
    w = np.broadcast_to(weights, values.shape) * available
    total = w.sum(axis=1)
    if renormalize:
        computable = total > 0
    else:
        computable = available.all(axis=1) & (values.shape[1] > 0)
    share = np.divide(w, total[:, None], out=np.zeros_like(w), where=computable[:, None])
    score = np.where(computable, (share * np.where(available, values, 0.0)).sum(axis=1), np.nan)
    return score, computable, share


def aggregate_matrix(tree: GoalTree, metric_names: Sequence[str], values: np.ndarray) -> list[GQMResult]:
    """Aggregate s slices at once: values is (s, len(metric_names)) with NaN where a metric is missing.
    Metrics of the tree that are not in metric_names count as missing."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if values.shape[1] != len(metric_names):
        raise ValueError(f"values has {values.shape[1]} columns but {len(metric_names)} metric names")
    column = {name: i for i, name in enumerate(metric_names)}
    s = values.shape[0]
    nan_col = np.full(s, np.nan)
    renorm = tree.renormalize

    q_scores, q_ok, q_share, q_cov = {}, {}, {}, {}
    for goal in tree.goals:
        for q in goal.questions:
            mv = np.column_stack(
                [values[:, column[m.name]] if m.name in column else nan_col for m in q.metrics]
            )
            mw = np.array([m.weight for m in q.metrics])
            score, ok, share = _weighted(mv, mw, renorm)
            q_scores[goal.id, q.id], q_ok[goal.id, q.id], q_share[goal.id, q.id] = score, ok, (share, mv)
            q_cov[goal.id, q.id] = (np.isfinite(mv) * mw).sum(axis=1) / mw.sum()
    g_score, g_ok, g_share, g_cov = {}, {}, {}, {}
    for goal in tree.goals:
        qv = np.column_stack([q_scores[goal.id, q.id] for q in goal.questions])
        qw = np.array([q.weight for q in goal.questions])
        g_score[goal.id], g_ok[goal.id], g_share[goal.id] = _weighted(qv, qw, renorm)
        g_cov[goal.id] = (
            (np.column_stack([q_cov[goal.id, q.id] for q in goal.questions]) * qw).sum(axis=1) / qw.sum()
        )
    gv = np.column_stack([g_score[g.id] for g in tree.goals])
    gw = np.array([g.weight for g in tree.goals])
    o_score, o_ok, o_share = _weighted(gv, gw, renorm)
    o_cov = (np.column_stack([g_cov[g.id] for g in tree.goals]) * gw).sum(axis=1) / gw.sum()

    results = []
    for i in range(s):
        questions, goals, contributions = [], [], []
        goal_index = {g.id: j for j, g in enumerate(tree.goals)}
        for goal in tree.goals:
            q_missing_all = []
            for k, q in enumerate(goal.questions):
                share, mv = q_share[goal.id, q.id]
                missing = tuple(m.name for j, m in enumerate(q.metrics) if not np.isfinite(mv[i, j]))
                q_missing_all += [f"{q.id}:{name}" for name in missing]
                ok = bool(q_ok[goal.id, q.id][i])
                reason = None if ok else _reason("question", missing, renorm)
                questions.append(QuestionScore(q.id, finite_or_none(q_scores[goal.id, q.id][i]), reason,
                                               float(q_cov[goal.id, q.id][i]), missing, goal.id, q.component))
                for j, m in enumerate(q.metrics):
                    if not np.isfinite(mv[i, j]):
                        continue
                    to_q = float(share[i, j] * mv[i, j]) if ok else 0.0
                    to_g = to_q * float(g_share[goal.id][i, k]) if g_ok[goal.id][i] else 0.0
                    to_o = to_g * float(o_share[i, goal_index[goal.id]]) if o_ok[i] else None
                    contributions.append(Contribution(goal.id, q.id, m.name, m.role, float(mv[i, j]),
                                                      m.weight, to_q, to_g, to_o))
            ok = bool(g_ok[goal.id][i])
            not_ok_q = tuple(q.id for q in goal.questions if not q_ok[goal.id, q.id][i])
            reason = None if ok else _reason("goal", not_ok_q, renorm, q_missing_all)
            goals.append(NodeScore(goal.id, finite_or_none(g_score[goal.id][i]), reason,
                                   float(g_cov[goal.id][i]), tuple(q_missing_all)))
        not_ok_g = tuple(g.id for g in tree.goals if not g_ok[g.id][i])
        overall = NodeScore("overall", finite_or_none(o_score[i]),
                            None if o_ok[i] else _reason("overall", not_ok_g, renorm),
                            float(o_cov[i]), not_ok_g)
        components = _components(tree, questions)
        results.append(GQMResult(overall, tuple(goals), tuple(questions), components, tuple(contributions)))
    return results


def aggregate(tree: GoalTree, metric_values: Mapping[str, float]) -> GQMResult:
    """One slice: metric name -> value on [0, 1]; absent or non-finite = missing."""
    names = list(metric_values)
    return aggregate_matrix(tree, names, np.array([[float(metric_values[n]) for n in names]]))[0]


def _components(tree: GoalTree, questions: list[QuestionScore]) -> dict[str, NodeScore]:
    """Component score: question-weighted mean of the computable questions of that component (the thesis'
    component view, Figure 6.3); not computable when none of its questions is."""
    weights = {(g.id, q.id): q.weight for g in tree.goals for q in g.questions}
    out = {}
    for component in COMPONENTS:
        mine = [q for q in questions if q.component == component]
        if not mine:
            continue
        ok = [q for q in mine if q.score is not None]
        if not ok:
            out[component] = NodeScore(component, None, "no computable question for this component", 0.0,
                                       tuple(q.id for q in mine))
            continue
        w = np.array([weights[q.goal, q.id] for q in ok])
        v = np.array([q.score for q in ok])
        total_w = sum(weights[q.goal, q.id] for q in mine)
        out[component] = NodeScore(component, float(w @ v / w.sum()), None, float(w.sum() / total_w),
                                   tuple(q.id for q in mine if q.score is None))
    return out


def _reason(level: str, missing: Sequence[str], renormalize: bool, detail: Sequence[str] = ()) -> str:
    if level == "question":
        if renormalize:
            return f"none of its metrics is available (missing: {', '.join(missing)})"
        return f"missing metrics: {', '.join(missing)} (renormalize is off)"
    child = "questions" if level == "goal" else "goals"
    text = f"not computable {child}: {', '.join(missing)}"
    if detail:
        text += f" (missing metrics: {', '.join(detail)})"
    return text if renormalize is False else f"no computable {child} ({', '.join(missing)})"


def finite_or_none(value: float) -> float | None:
    """A score as JSON holds it: None where not finite (never a NaN)."""
    return float(value) if np.isfinite(value) else None


@dataclass(frozen=True)
class CategoryMeans:
    """Per metric category (the thesis' retrieval / generation / system metrics, section 5.4), per slice:
    the plain mean of its metrics that are present (the averages of its Table 6.3 and Figure 6.3), NaN
    where none is; `present` counts them."""

    scores: np.ndarray  # (slices,)
    present: np.ndarray  # (slices,) int
    metrics: tuple[str, ...]


def category_means(metric_names: Sequence[str], values: np.ndarray,
                   categories: Mapping[str, Sequence[str]]) -> dict[str, CategoryMeans]:
    """`values`: (slices, len(metric_names)) with NaN = missing; a category's metrics not among
    metric_names count as missing."""
    values = np.asarray(values, dtype=float)
    index = {name: j for j, name in enumerate(metric_names)}
    out = {}
    for category, members in categories.items():
        columns = [index[m] for m in members if m in index]
        block = values[:, columns] if columns else np.full((values.shape[0], 0), np.nan)
        present = np.isfinite(block).sum(axis=1)
        totals = np.where(np.isfinite(block), block, 0.0).sum(axis=1)
        scores = np.divide(totals, present, out=np.full(len(present), np.nan), where=present > 0)
        out[category] = CategoryMeans(scores, present.astype(int), tuple(members))
    return out
