"""Every statistic of a run: validated scores (and typed hypotheses) in, the stats.json dict out.

Reading scores and writing stats.json is tasks/reduce.py's job; tables and plots are
pipelines/reporting/report.py's."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from stats.bootstrap import bootstrap_mean_ci
from stats.comparison import discriminative_power_comparison
from stats.descriptive import (
    CORRELATION_METHODS,
    bound_counts,
    correlation_matrix,
    fisher_z_mean,
    population_stats,
    tie_rate,
)
from stats.errors import StatsInputError
from stats.hsd import HSDResult, randomized_tukey_hsd
from stats.labels import (
    LabelMatrices,
    LabelSet,
    check_labels_against,
    human_calibrated_entry,
    label_matrices,
)
from stats.hypotheses import HypothesisResult, HypothesisSet, check_hypotheses_against, evaluate_hypotheses
from stats.judge_noise import (
    COMPONENTS,
    SINGLE_SYSTEM_COMPONENTS,
    single_system_noise,
    two_level_bootstrap,
    variance_components,
    verdict_stability,
)
from stats.multiple import is_significant
from stats.scores import ScoreCube, build_cube, validate_scores

CI_LEVEL = 0.95
# Random streams are seeded by (seed, purpose, metric index) through numpy's SeedSequence.
_HSD_STREAM = 1
_BOOTSTRAP_STREAM = 2
_JUDGE_NOISE_STREAM = 3  # the two-level bootstrap of a metric with repeated judgments
_REPEAT_HSD_STREAM = 4  # the HSD of each repeat alone


def compute_all(
    scores: pd.DataFrame,
    hypotheses: HypothesisSet | None = None,
    b: int = 10000,
    seed: int = 0,
    alpha: float = 0.05,
    *,
    on_metric: Callable[[str], None] | None = None,
    metric_order: Sequence[str] = (),
    metric_suites: Mapping[str, Sequence[str]] | None = None,
    labels: LabelSet | None = None,
    map_tests: Callable = map,
) -> dict:
    """Every statistic of the stats.json contract, JSON-serializable, null (with a note) where undefined.

    on_metric, if given, is called with each metric's name once its tests are done (progress reporting).
    map_tests runs the metrics' HSDs, which are independent (each has its own random stream): `map` one
    after another, or a thread pool's map side by side (numpy releases the GIL in their loops); the
    results are the same.
    metric_order: the metrics to report first, in that order (the rest follow sorted by name).
    metric_suites: {suite: [metric, ...]}, which suite judged which metric (plain data: the caller reads
    its registry); it groups the discriminative power comparison. Metrics of no suite form a last group.

    With a `repeat` column, a metric judged two or more times per (query, system) is analysed on its
    repeat-averaged scores (a query enters only if every system has every repeat), its CIs come from the
    two-level bootstrap and its entry gains `judge_noise` (stats/judge_noise.py).

    With `labels` (human marks, stats.labels.validate_labels), each metric they calibrate gains
    `human_calibrated`: PPI++ means, intervals and pairwise differences anchored in the labels, and the
    judge's bias per system (stats/labels.py, docs/human-labels.md).

    One system is a valid input: means, CIs, descriptive statistics and judge noise as for several; the
    pairwise tables are empty and discriminative power is null (a note says why); hypotheses, which
    compare systems, are an error.
    """
    _check_options(b, seed, alpha)
    cube = build_cube(validate_scores(scores), metric_order)
    if hypotheses is not None:
        check_hypotheses_against(hypotheses, cube.systems, cube.metrics)
    if labels is not None:  # before any test: labels the scores cannot carry are one line, not minutes
        check_labels_against(labels, cube)
    complete = {metric: np.isfinite(cube.metric_matrix(metric)).all(axis=1) for metric in cube.metrics}
    repeated = [metric for metric in cube.metrics if cube.n_repeats(metric) >= 2]
    groups = _groups_with_same_queries(cube, complete, skip=repeated)
    intervals = _bootstrap_intervals(cube, groups, complete, b, seed)
    hsd_by_metric = _hsd_by_metric(cube, complete, b, seed, on_metric, map_tests)
    notes: list[str] = _single_system_notes(cube)
    judge_noise = {metric: _judge_noise(cube, metric, complete[metric], hsd_by_metric[metric], b, seed, alpha,
                                        intervals, notes) for metric in repeated}
    per_metric = {
        metric: _metric_entry(
            cube, cube.metric_matrix(metric)[complete[metric]], hsd, intervals[metric], alpha
        )
        if complete[metric].any()
        else _empty_metric_entry(cube, metric, notes)
        for metric, hsd in hsd_by_metric.items()
    }
    for metric, entry in judge_noise.items():
        per_metric[metric]["judge_noise"] = entry
    if labels is not None:
        _add_human_calibrated(per_metric, label_matrices(labels, cube), labels, alpha, notes)
    result = {
        "n_queries": len(cube.query_ids),
        "systems": list(cube.systems),
        "metrics": list(cube.metrics),
        "b": b,
        "seed": seed,
        "alpha": alpha,
        "ci_level": CI_LEVEL,
        "per_metric": per_metric,
        "discriminative_power_comparison": discriminative_power_comparison(per_metric, metric_suites or {}),
        "correlations": _correlations(cube),
        "hypotheses": _hypotheses_entry(hypotheses, hsd_by_metric, cube.systems, alpha),
    }
    return _json_ready(result, notes)


def _add_human_calibrated(per_metric: dict, matrices: Mapping[str, LabelMatrices], labels: LabelSet,
                          alpha: float, notes: list[str]) -> None:
    for metric, matrix in matrices.items():
        entry = human_calibrated_entry(matrix, per_metric[metric]["pairwise"], alpha)
        per_metric[metric]["human_calibrated"] = entry
        if entry["unjudged_labels"]:
            notes.append(f"per_metric.{metric}.human_calibrated: {entry['unjudged_labels']} labeled "
                         f"answer(s) of questions not judged for every system are left out (the estimates "
                         f"pair each label with the judge's score on a complete question)")
    if labels.stale:
        notes.append(f"labels: {labels.stale} mark(s) of answers that changed after they were labeled (a "
                     f"later run in the same folder) left out")
    if labels.superseded:
        notes.append(f"labels: {labels.superseded} mark(s) replaced by a later mark of the same annotator on "
                     f"the same answer (the later one counts)")


def unscored_result(b: int, seed: int, alpha: float, reason: str) -> dict:
    """The stats.json dict of a run in which no judgment has a score (every one failed): the layout of
    `compute_all`'s, with no system, metric or test in it, and the reason as its note."""
    _check_options(b, seed, alpha)
    return {
        "n_queries": 0, "systems": [], "metrics": [], "b": b, "seed": seed, "alpha": alpha,
        "ci_level": CI_LEVEL,
        "per_metric": {}, "discriminative_power_comparison": [],
        "correlations": {method: {"per_system": {}, "fisher_z_mean": []} for method in CORRELATION_METHODS},
        "hypotheses": {}, "notes": [reason],
    }


def _check_options(b: int, seed: int, alpha: float) -> None:
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
        raise StatsInputError(f"b (iterations and resamples) must be a positive integer, got {b!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise StatsInputError(f"seed must be a non-negative integer, got {seed!r}")
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
        raise StatsInputError(f"alpha must lie in (0, 1), got {alpha!r}")


def _groups_with_same_queries(cube: ScoreCube, complete: dict[str, np.ndarray],
                              skip: Sequence[str] = ()) -> list[list[int]]:
    """Indices of metrics grouped by their set of complete queries (metrics without any, and the `skip`
    metrics, whose CIs come from the two-level bootstrap, are left out).

    The metrics of a group share one set of bootstrap resamples (one matrix product for all of them),
    seeded by (seed, purpose, first metric of the group): the output is a function of scores and seed.
    """
    groups: dict[bytes, list[int]] = {}
    for metric_index, metric in enumerate(cube.metrics):
        if complete[metric].any() and metric not in skip:
            groups.setdefault(np.packbits(complete[metric]).tobytes(), []).append(metric_index)
    return list(groups.values())


def _hsd_by_metric(
    cube: ScoreCube,
    complete: dict[str, np.ndarray],
    b: int,
    seed: int,
    on_metric: Callable[[str], None] | None,
    map_tests: Callable = map,
) -> dict[str, HSDResult | None]:
    """Randomized Tukey HSD of every metric (None for a metric without complete queries, and for every
    metric of one system: the HSD compares systems).

    Each metric runs alone with its own stream: sharing permutations across metrics would save random
    numbers but makes the gathered rows too wide for the cache and is slower.
    """

    def test(metric_index: int) -> HSDResult | None:
        metric = cube.metrics[metric_index]
        used = cube.metric_matrix(metric)[complete[metric]]
        if not (len(used) and len(cube.systems) >= 2):
            return None
        return randomized_tukey_hsd(used, b, np.random.default_rng([seed, _HSD_STREAM, metric_index]))

    hsd_by_metric: dict[str, HSDResult | None] = {}
    for metric, hsd in zip(cube.metrics, map_tests(test, range(len(cube.metrics)))):
        hsd_by_metric[metric] = hsd
        if on_metric is not None:
            on_metric(metric)
    return hsd_by_metric


def _bootstrap_intervals(
    cube: ScoreCube, groups: list[list[int]], complete: dict[str, np.ndarray], b: int, seed: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Percentile CI bounds of every system's mean, per metric."""
    intervals = {}
    k = len(cube.systems)
    for group in groups:
        rows = complete[cube.metrics[group[0]]]
        columns = cube.values[rows][:, :, group].transpose(0, 2, 1).reshape(int(rows.sum()), -1)
        rng = np.random.default_rng([seed, _BOOTSTRAP_STREAM, group[0]])
        ci = bootstrap_mean_ci(columns, b, rng, CI_LEVEL)
        for position, metric_index in enumerate(group):
            block = slice(position * k, (position + 1) * k)
            intervals[cube.metrics[metric_index]] = (ci.low[block], ci.high[block])
    return intervals


def _judge_noise(cube: ScoreCube, metric: str, complete: np.ndarray, hsd: HSDResult | None, b: int, seed: int,
                 alpha: float, intervals: dict, notes: list[str]) -> dict[str, Any] | None:
    """The judge_noise entry of a metric with repeats; its two-level bootstrap CIs go into `intervals`."""
    index = cube.metrics.index(metric)
    scores = cube.metric_repeats(metric)
    judged = np.isfinite(scores)
    used = scores[complete]
    if len(used) < 2:
        notes.append(f"per_metric.{metric}.judge_noise: fewer than 2 queries have every repeat from every "
                     "system; no variance components")
        if len(used):  # one complete query: its CI is the one-level bootstrap's (a point)
            rng = np.random.default_rng([seed, _BOOTSTRAP_STREAM, index])
            ci = bootstrap_mean_ci(used.mean(axis=2), b, rng, CI_LEVEL)
            intervals[metric] = (ci.low, ci.high)
        return None
    if len(cube.systems) == 1:
        return _single_system_judge_noise(cube, metric, used[:, 0, :], judged, b, seed, intervals, notes)
    components = variance_components(used)
    rng = np.random.default_rng([seed, _JUDGE_NOISE_STREAM, index])
    boot = two_level_bootstrap(used, b, rng, CI_LEVEL)
    intervals[metric] = (boot.means_low, boot.means_high)
    rng = np.random.default_rng([seed, _REPEAT_HSD_STREAM, index])
    stability = verdict_stability(used, hsd.p_values, b, rng, alpha)
    pairs = list(combinations(range(len(cube.systems)), 2))
    systems = cube.systems
    return {
        "n_repeats": components.n_repeats,
        "repeats": list(cube.repeat_labels[index]),
        "n_queries": components.n_questions,
        "n_incomplete_cells": int((judged.any(axis=2) & ~judged.all(axis=2)).sum()),
        "components": dict(zip(COMPONENTS, components.variances)),
        "components_ci95": {name: [low, high] for name, low, high in
                            zip(COMPONENTS, boot.components_low, boot.components_high)},
        "truncated": list(components.truncated),
        "mean_squares": dict(zip(COMPONENTS, components.mean_squares)),
        "df": dict(zip(COMPONENTS, components.df)),
        "residual_share": components.residual_share,
        "reliability": components.reliability(),
        "reliability_ci95": [boot.reliability_low, boot.reliability_high],
        "reliability_one_judgment": components.reliability(1),
        "stable_share": stability.stable_share,
        "flaky_pairs": [[systems[i], systems[j]] for i, j in pairs if stability.flaky[i, j]],
        "pair_verdicts": [
            {"a": systems[i], "b": systems[j], "significant": stability.significant[i, j],
             "per_repeat": stability.per_repeat_significant[:, i, j].tolist(),
             "per_repeat_p": stability.per_repeat_p_values[:, i, j].tolist()}
            for i, j in pairs
        ],
    }


def _single_system_judge_noise(cube: ScoreCube, metric: str, used: np.ndarray, judged: np.ndarray, b: int,
                               seed: int, intervals: dict, notes: list[str]) -> dict[str, Any]:
    """The judge_noise entry of one system's (n_questions, n_repeats) scores, in the layout of several
    systems': the components and pair verdicts that need two systems are null or empty."""
    index = cube.metrics.index(metric)
    rng = np.random.default_rng([seed, _JUDGE_NOISE_STREAM, index])
    noise = single_system_noise(used, b, rng, CI_LEVEL)
    intervals[metric] = (np.array([noise.mean_low]), np.array([noise.mean_high]))
    notes.append(f"per_metric.{metric}.judge_noise: one system: the system and system_x_question components "
                 "and the pair verdicts need two or more systems (null, empty); reliability is that of the "
                 "question scores, question / (question + residual / repeats)")

    def by_component(values, missing=None) -> dict[str, Any]:  # COMPONENTS order, null where two are needed
        known = dict(zip(SINGLE_SYSTEM_COMPONENTS, values))
        return {name: known.get(name, missing) for name in COMPONENTS}

    return {
        "n_repeats": noise.n_repeats,
        "repeats": list(cube.repeat_labels[index]),
        "n_queries": noise.n_questions,
        "n_incomplete_cells": int((judged.any(axis=2) & ~judged.all(axis=2)).sum()),
        "components": by_component(noise.variances),
        "components_ci95": by_component(([low, high] for low, high in
                                         zip(noise.components_low, noise.components_high)), [None, None]),
        "truncated": list(noise.truncated),
        "mean_squares": by_component(noise.mean_squares),
        "df": by_component(noise.df, 0),
        "residual_share": noise.residual_share,
        "reliability": noise.reliability(),
        "reliability_ci95": [noise.reliability_low, noise.reliability_high],
        "reliability_one_judgment": noise.reliability(1),
        "stable_share": None,
        "flaky_pairs": [],
        "pair_verdicts": [],
    }


def _single_system_notes(cube: ScoreCube) -> list[str]:
    if len(cube.systems) != 1:
        return []
    return [f"one system ({cube.systems[0]}): the HSD, discriminative power and hypotheses compare systems "
            "and need two or more; every pairwise table is empty and discriminative_power null"]


def _metric_entry(
    cube: ScoreCube,
    used: np.ndarray,
    hsd: HSDResult | None,
    interval: tuple[np.ndarray, np.ndarray],
    alpha: float,
) -> dict[str, Any]:
    """A metric's entry; `hsd` None for one system (no pairs, discriminative power null)."""
    systems = cube.systems
    means = hsd.means if hsd is not None else used.mean(axis=0)
    pairwise = [
        {
            "a": systems[i],
            "b": systems[j],
            "diff": float(hsd.diffs[i, j]),
            "p_value": float(hsd.p_values[i, j]),
            "significant": is_significant(hsd.p_values[i, j], alpha),
        }
        for i, j in combinations(range(len(systems)), 2)
    ]
    low, high = interval
    columns = {system: used[:, s] for s, system in enumerate(systems)}
    return {
        "n_used": len(used),
        "n_dropped": int(len(cube.query_ids) - len(used)),
        "means": {system: float(means[s]) for s, system in enumerate(systems)},
        "ci95": {system: [float(low[s]), float(high[s])] for s, system in enumerate(systems)},
        "pairwise": pairwise,
        "discriminative_power": sum(pair["significant"] for pair in pairwise) / len(pairwise) if pairwise
        else None,
        "tie_rate": {system: tie_rate(values) for system, values in columns.items()},
        "bounds": {system: dict(zip(("at_0", "at_1"), bound_counts(v))) for system, v in columns.items()},
        "population": {system: population_stats(values).as_dict() for system, values in columns.items()},
    }


def _empty_metric_entry(cube: ScoreCube, metric: str, notes: list[str]) -> dict[str, Any]:
    notes.append(f"per_metric.{metric}: no query has a score from every system; its statistics are null")
    nothing = {key: None for key in population_stats(np.array([])).as_dict()}
    return {
        "n_used": 0,
        "n_dropped": len(cube.query_ids),
        "means": {system: None for system in cube.systems},
        "ci95": {system: [None, None] for system in cube.systems},
        "pairwise": [
            {"a": a, "b": b, "diff": None, "p_value": None, "significant": False}
            for a, b in combinations(cube.systems, 2)
        ],
        "discriminative_power": None,
        "tie_rate": {system: None for system in cube.systems},
        "bounds": {system: {"at_0": 0, "at_1": 0} for system in cube.systems},
        "population": {system: dict(nothing) for system in cube.systems},
    }


def _correlations(cube: ScoreCube) -> dict[str, Any]:
    """Per system metric x metric correlations (pairwise-complete queries), averaged via Fisher's z."""
    result = {}
    for method in CORRELATION_METHODS:
        per_system = {
            system: correlation_matrix(cube.values[:, s, :], method) for s, system in enumerate(cube.systems)
        }
        result[method] = {
            "per_system": {system: matrix.tolist() for system, matrix in per_system.items()},
            "fisher_z_mean": fisher_z_mean(np.stack(list(per_system.values()))).tolist(),
        }
    return result


def _hypotheses_entry(
    hypotheses: HypothesisSet | None,
    hsd_by_metric: dict[str, HSDResult | None],
    systems: Sequence[str],
    alpha: float,
) -> dict[str, Any]:
    if hypotheses is None:
        return {}
    evaluated = evaluate_hypotheses(hypotheses, hsd_by_metric, systems, alpha)
    stated = {h.name: h for h in hypotheses.hypotheses}
    return {name: _hypothesis_dict(result, stated[name]) for name, result in evaluated.items()}


def _hypothesis_dict(result: HypothesisResult, hypothesis) -> dict[str, Any]:
    return {
        "raw_p": result.raw_p,
        "adjusted_p": result.adjusted_p,
        "significant": result.significant,
        "direction": hypothesis.direction,
        "combine": hypothesis.combine,
        "tests": [
            {"a": t.a, "b": t.b, "metric": t.metric, "diff": t.diff, "p_value": t.p_value}
            for t in result.tests
        ],
    }


_NULL_REASONS = {
    "skewness": "skewness is undefined for constant scores or fewer than 2 queries",
    "kurtosis": "kurtosis is undefined for constant scores or fewer than 2 queries",
    "variance": "the sample variance needs at least 2 queries",
    "tie_rate": "the tie rate needs at least 2 queries",
    "correlations": "a correlation is undefined when a metric is constant for a system "
    "or fewer than 2 queries have both scores",
    "diff": "the metric has no complete query",
}


def _json_ready(value: Any, notes: list[str]) -> dict:
    """Plain Python types, NaN replaced by null; each null is explained in the "notes" list."""
    nulls: dict[str, list[str]] = {}
    cleaned = _clean(value, "", nulls)
    for reason, paths in nulls.items():
        shown = ", ".join(paths[:6]) + (f" and {len(paths) - 6} more" if len(paths) > 6 else "")
        notes.append(f"null at {shown}: {reason}")
    cleaned["notes"] = notes
    return cleaned


def _clean(value: Any, path: str, nulls: dict[str, list[str]]) -> Any:
    if isinstance(value, dict):
        return {
            str(key): _clean(item, f"{path}.{key}" if path else str(key), nulls)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_clean(item, f"{path}[{i}]", nulls) for i, item in enumerate(value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value):
            return float(value)
        nulls.setdefault(_null_reason(path), []).append(path)
        return None
    return value


def _null_reason(path: str) -> str:
    for key, reason in _NULL_REASONS.items():
        if key in path:
            return reason
    return "undefined for the available data"
