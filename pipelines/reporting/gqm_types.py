"""The GQM report sliced by the thesis' question types (Table 5.1; section 6.5, Figure 6.4), for a run on a
dataset `ccrs gqm testset` wrote: its `question_type` is each query's qtype, so the report's per-qtype
slices (pipelines/reporting/gqm.py build_report, `by_qtype`) already hold the scores; this module picks
the thesis' types out of them as a per-type table and a systems x question types heatmap.

A run whose queries carry none of the six types (BioASQ's yesno / factoid / ...) gets no table and no plot.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from pipelines.reporting.plots import figure_file

# Table 5.1: each type and the RAG components it targets (`ccrs gqm testset` draws questions of these)
QUESTION_TYPES: dict[str, tuple[str, ...]] = {
    "simple": ("retriever", "generator", "router"),
    "complex": ("generator",),
    "distracting": ("generator", "retriever", "rewriter"),
    "situational": ("generator",),
    "double": ("retriever", "generator"),
    "conversational": ("rewriter",),
}
TABLE_FILE = "question_types.csv"
HEATMAP_FILE = "heatmap_question_types.png"


def question_type_table(report: dict) -> dict | None:
    """Per system and thesis question type: queries, the overall GQM score and each goal's score (None
    where not computable in that slice; no entry where the system has no score of that type); None when
    the run has none of the six types."""
    types = [t for t in QUESTION_TYPES if t in report.get("qtypes", [])]
    if not types or not report["systems_order"]:
        return None
    systems = {}
    for system in report["systems_order"]:
        slices = report["systems"][system]["by_qtype"]
        systems[system] = {t: _slice_scores(slices[t]) for t in types
                           if t in slices and slices[t]["n_queries"]}
    goals = [g["id"] for g in report["systems"][report["systems_order"][0]]["all"]["goals"]]
    other = [q for q in report["qtypes"] if q not in QUESTION_TYPES]
    return {"types": types, "goals": goals, "systems": systems, "queries_of_other_types": other}


def _slice_scores(entry: dict) -> dict:
    return {"n_queries": entry["n_queries"], "overall": entry["overall"]["score"],
            "goals": {g["id"]: g["score"] for g in entry["goals"]}}


def question_type_files(report: dict, out_dir: Path) -> list[Path]:
    """question_types.csv and heatmap_question_types.png in `out_dir` from report["question_types"]
    (question_type_table's); nothing when the run has none of the six types."""
    table = report.get("question_types")
    if not table or not table["systems"]:
        return []
    out_dir = Path(out_dir)
    return [write_table(table, out_dir / TABLE_FILE), heatmap(table, out_dir / HEATMAP_FILE)]


def write_table(table: dict, path: Path) -> Path:
    """One row per (system, question type): n_queries, overall and every goal (empty = not computable)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["system", "question_type", "n_queries", "overall", *table["goals"]])
        for system, by_type in table["systems"].items():
            for question_type, scores in by_type.items():
                goals = [_cell(scores["goals"].get(g)) for g in table["goals"]]
                writer.writerow([system, question_type, scores["n_queries"], _cell(scores["overall"]),
                                 *goals])
    return path


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def grid(table: dict, goal: str | None = None) -> np.ndarray:
    """Systems x question types of the overall score (or of one goal's), NaN where not computable."""
    systems, types = list(table["systems"]), table["types"]
    values = np.full((len(systems), len(types)), np.nan)
    for i, system in enumerate(systems):
        for j, question_type in enumerate(types):
            scores = table["systems"][system].get(question_type)
            value = None if scores is None else (scores["overall"] if goal is None else
                                                 scores["goals"].get(goal))
            if value is not None:
                values[i, j] = value
    return values


def heatmap(table: dict, path: Path) -> Path:
    """Panels: the overall GQM score, then each goal; in each, rows systems, columns question types
    (the thesis' Figure 6.4 sliced the same way; blank = not computable)."""
    systems, types = list(table["systems"]), table["types"]
    panels = [None, *table["goals"]]
    figsize = (1.2 + 0.75 * len(types) * len(panels), 1.2 + 0.4 * len(systems))
    with figure_file(path, dpi=110, tight_layout=False, bbox_inches="tight", nrows=1, ncols=len(panels),
                     figsize=figsize, squeeze=False) as (fig, axes):
        for k, (ax, goal) in enumerate(zip(axes[0], panels)):
            values = grid(table, goal)
            image = ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=1, cmap="viridis", aspect="auto")
            for (i, j), value in np.ndenumerate(values):
                ax.text(j, i, "n/a" if np.isnan(value) else f"{value:.2f}", ha="center", va="center",
                        fontsize=7, color="gray" if np.isnan(value) else "white")
            ax.set_xticks(range(len(types)), types, rotation=30, fontsize=7)
            ax.set_yticks(range(len(systems)), systems if k == 0 else [""] * len(systems), fontsize=7)
            ax.set_title(goal or "overall", fontsize=8)
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
        fig.suptitle("GQM scores by question type (Table 5.1)", fontsize=9, y=1.04)
    return path


def markdown(table: dict) -> str:
    """The overall score per system (rows) and question type (columns), n in brackets, for the console."""
    types = table["types"]
    lines = ["| system | " + " | ".join(types) + " |", "| --- |" + " --- |" * len(types)]
    for system, by_type in table["systems"].items():
        cells = []
        for question_type in types:
            scores = by_type.get(question_type)
            cells.append("-" if scores is None else
                         f"{'n/a' if scores['overall'] is None else format(scores['overall'], '.2f')} "
                         f"(n={scores['n_queries']})")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
