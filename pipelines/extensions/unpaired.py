"""Unpaired comparisons (docs/stats.md "Unpaired comparisons (traces)"): where a run's systems answered
different questions (production traces of two variants, nights that share no question), the core statistics
find no question every system answered for a metric and pair nothing. This extension compares those
systems as independent groups: per system its mean and a 95% betting interval, and a randomized Tukey HSD
for independent groups over every pair (stats/unpaired_hsd.py: the pooled scores permuted across the
systems), with compact letters. Where at least MIN_SHARED questions are shared, the paired tests of the core
stand and a metric gets no unpaired block. Declared on the registry's hooks: a statistics contributor
(stats.json["unpaired"]), its verdict section, its MLflow metrics. No config block: any run may need it."""
from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd

from pipelines.extensions.registry import GateCells, RunExtension, register_extension
from pipelines.reporting.tracking import MetricsContribution
from pipelines.reporting.verdict import VerdictInputs, VerdictSection
from tasks.runtime.contributions import StatisticsContext, StatisticsContributor

KEY = "unpaired"
MIN_SHARED = 2  # the core's paired HSD needs two questions every system answered
MIN_SCORES = 2  # an independent group needs two scores (a spread; stats/unpaired.py's smallest size)
TEST = "randomized Tukey HSD for independent groups (pooled scores permuted across systems)"
INTERVAL_ALPHA = 0.05


# --- the statistics

def block(context: StatisticsContext) -> dict | None:
    """stats.json["unpaired"]: {b, seed, alpha, test, per_metric: {M: ...}} for the metrics whose systems
    share fewer than MIN_SHARED questions; None where every metric is paired (or no scores)."""
    scores, settings = context.scores, context.settings
    if scores is None or scores.empty or not settings:
        return None
    per_metric = {}
    for metric, rows in scores.groupby("metric", sort=False):
        entry = metric_block(str(metric), rows, settings)
        if entry is not None:
            per_metric[str(metric)] = entry
    if not per_metric:
        return None
    return {"b": settings["b"], "seed": settings["seed"], "alpha": settings["alpha"], "test": TEST,
            "per_metric": per_metric}


def metric_block(metric: str, rows: pd.DataFrame, settings: dict[str, Any]) -> dict | None:
    """One metric's unpaired comparison, None where its systems share MIN_SHARED questions or fewer than two
    systems have scores. A score per (question, system): repeats averaged, failed judgments (no score) out."""
    scored = rows.dropna(subset=["score"])
    by_system = {str(system): group.groupby("query_id")["score"].mean().to_numpy(dtype=float)
                 for system, group in scored.groupby("system", sort=True)}
    questions = [set(group["query_id"]) for _, group in scored.groupby("system", sort=True)]
    if len(by_system) < 2:
        return None
    shared = len(set.intersection(*questions))
    if shared >= MIN_SHARED:
        return None
    too_few = sorted(system for system, values in by_system.items() if values.size < MIN_SCORES)
    compared = {system: values for system, values in by_system.items() if system not in too_few}
    entry: dict[str, Any] = {"shared_questions": shared, "too_few_scores": too_few,
                             "why": f"the systems share {shared} question(s) of this metric; a paired test "
                                    f"needs {MIN_SHARED}"}
    entry.update(_describe(compared))
    if len(compared) >= 2:
        entry.update(_compare(metric, compared, settings))
    return entry


def _describe(groups: dict[str, np.ndarray]) -> dict[str, Any]:
    """n, mean and a 95% interval of each system's mean: the betting confidence interval of scores on
    [0, 1] (stats/sequential.py, Waudby-Smith & Ramdas), valid at every n however the scores are
    distributed, where a t interval is not (two equal 0/1 marks give it zero width)."""
    from stats.sequential import confidence_sequence

    described: dict[str, Any] = {"n": {}, "means": {}, "ci95": {}}
    for system, values in groups.items():
        # the betting process bounds values in [-1, 1]: scores on [0, 1] are mapped there and back
        low, high = confidence_sequence(2.0 * values[:, None] - 1.0, None, INTERVAL_ALPHA,
                                        times=[values.size])
        described["n"][system], described["means"][system] = int(values.size), float(values.mean())
        described["ci95"][system] = [float((low[0, 0] + 1.0) / 2.0), float((high[0, 0] + 1.0) / 2.0)]
    return described


def _compare(metric: str, groups: dict[str, np.ndarray], settings: dict[str, Any]) -> dict[str, Any]:
    from stats.letters import compact_letter_display
    from stats.unpaired_hsd import unpaired_tukey_hsd

    systems = list(groups)
    rng = np.random.default_rng([int(settings["seed"]), zlib.crc32(metric.encode())])
    result = unpaired_tukey_hsd([groups[system] for system in systems], int(settings["b"]), rng)
    alpha = float(settings["alpha"])
    pairs = [{"a": systems[i], "b": systems[j], "diff": float(result.diffs[i, j]),
              "p_value": float(result.p_values[i, j]), "significant": bool(result.p_values[i, j] <= alpha)}
             for i in range(len(systems)) for j in range(i + 1, len(systems))]
    means = {system: float(mean) for system, mean in zip(systems, result.means)}
    letters = compact_letter_display(means, [(p["a"], p["b"]) for p in pairs if p["significant"]])
    return {"pairwise": pairs, "groups": letters}


# --- the gate

GATE_NOTE = ("unpaired cells (basis `unpaired`): the two nights share fewer than {shared} questions of the "
             "cell, so its test is a two-sample randomization test of the difference in means (the pooled "
             "scores permuted between the nights), Holm over every cell of the table; `n` counts both "
             "nights' "
             "scores and `mdd` is the Welch t approximation's (docs/stats.md).").format(shared=MIN_SHARED)


def gate(table: pd.DataFrame, inputs) -> pd.DataFrame:
    """The gate's table with a row for every (system, metric) both nights scored on too few shared
    questions for a pair (and at least MIN_SCORES scores each), decided unpaired, and Holm taken again over
    the whole table."""
    from pipelines.tools.gate.decide import cell_verdicts
    from stats.multiple import holm_adjust

    rows = unpaired_cells(table, inputs)
    if not rows:
        return table
    cells = pd.DataFrame(rows)
    combined = pd.concat([table.assign(basis=table["basis"] if "basis" in table else "judge"), cells],
                         ignore_index=True) if len(table) else cells.assign(verdict="same")
    combined["adjusted_p"] = holm_adjust(combined["p_value"].to_numpy())
    combined["significant"] = combined["adjusted_p"] < inputs.alpha
    tested = combined["basis"].isin(("judge", KEY))  # other kinds' cells keep the verdicts they decided
    combined["verdict"] = np.where(tested, cell_verdicts(combined["diff"], combined["significant"]),
                                   combined["verdict"].fillna("same"))
    return combined


def unpaired_cells(table: pd.DataFrame, inputs) -> list[dict]:
    from stats.unpaired import unpaired_minimum_detectable_difference, unpaired_randomization_test

    run, base = inputs.run_scores, inputs.base_scores
    if run is None or base is None:
        return []
    paired = set(zip(table["system"], table["metric"])) if len(table) else set()
    groups = {cell: rows["score"].to_numpy(dtype=float) for cell, rows in base.groupby(["system", "metric"])}
    found = [(cell, rows["score"].to_numpy(dtype=float), groups[cell]) for cell, rows in
             run.groupby(["system", "metric"]) if cell not in paired and cell in groups]
    found = [(cell, a, b) for cell, a, b in found if a.size >= MIN_SCORES and b.size >= MIN_SCORES]
    family = len(paired) + len(found)
    rng = np.random.default_rng(inputs.seed)
    rows = []
    for (system, metric), ours, theirs in found:
        test = unpaired_randomization_test(ours, theirs, inputs.b, rng)
        mdd = unpaired_minimum_detectable_difference(ours.size, theirs.size, float(ours.std(ddof=1)),
                                                     float(theirs.std(ddof=1)), inputs.alpha / family, 0.8)
        rows.append({"system": system, "metric": metric, "n": ours.size + theirs.size,
                     "mean_run": float(ours.mean()), "mean_baseline": float(theirs.mean()),
                     "diff": test.mean_diff, "p_value": test.p_value, "mdd": mdd, "basis": KEY})
    return rows


# --- the verdict, MLflow

SECTION_TITLE = "## Unpaired comparison (the systems answered different questions)"


def section(inputs: VerdictInputs) -> str:
    """The unpaired block as tables, one per metric; "" where the run has none."""
    unpaired = inputs.stats.get(KEY)
    if not unpaired:
        return ""
    parts = [SECTION_TITLE, (
        f"For these metrics the systems share too few questions for the paired tests above, so each system's "
        f"scores are an independent group: its mean with a 95% betting interval (valid at every n), and a "
        f"{unpaired['test']} "
        f"over every pair ({unpaired['b']:,} permutations, seed {unpaired['seed']}, family-wise alpha "
        f"{unpaired['alpha']:g}); systems sharing a letter are not found different. Differences of means of "
        "different questions mix the systems with the questions each was asked (docs/stats.md).")]
    for metric, entry in unpaired["per_metric"].items():
        parts.append(_metric_table(metric, entry))
    return "\n\n".join(parts)


def _metric_table(metric: str, entry: dict) -> str:
    lines = [f"**{metric}** ({entry['why']})", "", "| system | n | mean | 95% CI | group |",
             "| --- | ---: | ---: | --- | --- |"]
    for system, mean in sorted(entry["means"].items(), key=lambda item: -item[1]):
        low, high = entry["ci95"][system]
        lines.append(f"| {system} | {entry['n'][system]} | {mean:.3f} | [{low:.3f}, {high:.3f}] | "
                     f"{entry.get('groups', {}).get(system, '')} |")
    different = [f"{p['a']} - {p['b']} = {p['diff']:+.3f} (p = {p['p_value']:.3g})"
                 for p in entry.get("pairwise", []) if p["significant"]]
    lines += ["", f"Different: {'; '.join(different)}" if different else "No pair found different."]
    if entry["too_few_scores"]:
        lines.append(f"Left out, fewer than {MIN_SCORES} scores: {', '.join(entry['too_few_scores'])}.")
    return "\n".join(lines)


def run_metrics(stats: dict) -> dict[str, float]:
    """Per unpaired metric: the pairs found different."""
    unpaired = stats.get(KEY) or {}
    return {f"{metric}_unpaired_pairs_different":
            float(sum(p["significant"] for p in entry.get("pairwise", [])))
            for metric, entry in (unpaired.get("per_metric") or {}).items()}


register_extension(RunExtension(
    name=KEY,
    description="unpaired comparisons: systems that answered different questions compared as independent "
                "groups (traces)",
    key=KEY,
    on=lambda block: False,  # no config block: the statistics decide per metric
    statistics=StatisticsContributor(KEY, key=KEY, block=block, code=(__name__, "stats.unpaired_hsd")),
    verdict=(VerdictSection("means", section),),
    metrics=MetricsContribution(run_metrics=run_metrics),
    gate=GateCells(gate, KEY, GATE_NOTE),
    names=(r"extensions\.unpaired\b", r"unpaired_tukey_hsd"),
    rank=60,
))
