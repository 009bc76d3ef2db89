"""GQM report of a run directory: goal tree config (YAML, pydantic), metric table, aggregation, plots, MLflow.
The track stage (pipelines/reporting/track.py) runs it with the run config's `gqm_goals`; `ccrs report`
(pipelines/tools/gqm_report.py) with the goal tree named (`thesis`, `hybrid`: the default) or a file.

Inputs read from RUN_DIR through tasks/runtime/layout.py (all optional except that at least one metric source
must exist):
- judge_<suite>/scores.parquet   long format (query_id, system, metric, score), every judge suite the run
                                 judged (CCRS, GroUSE, VERA, RAGChecker-style, GQM thesis judges); with
                                 judge.repeats, the mean of each sample's scored repeats
- vera/scores.parquet            `ccrs vera` output (the cross-encoder aggregate); metrics a judge stage
                                 already gave are taken from the judge stage
- retrieval_metrics/retrieval_metrics.parquet (or retrieve/...): (query_id, retriever, measure, value);
  mapped onto systems through generate/generations.parquet (system -> retriever)
- retrieve/queries.parquet       query_id -> qtype (BioASQ yesno / factoid / list / summary)

Output (OUT, default RUN_DIR/gqm; the track stage's is track/gqm): gqm_report.json, radar.png,
heatmap_goals.png, heatmap_metrics.png, and components.png where the tree names metric categories.
The aggregation math is stats/gqm.py.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stats.gqm import (
    ROLE_WEIGHT_RANGES,
    GoalNode,
    GoalTree,
    GQMResult,
    MetricNode,
    QuestionNode,
    aggregate_matrix,
    category_means,
    finite_or_none,
)
from tasks.runtime.layout import SCORES_FILE, RunLayout
from pipelines.reporting.gqm_types import question_type_files, question_type_table
from pipelines.reporting.plots import figure_file
from pipelines.reporting.tracking import attach
from stats.scores import REPEAT_COLUMN, mean_over_repeats
from tasks.runtime.stage import read_manifest

QTYPES = ("yesno", "factoid", "list", "summary")
K_PATTERN = re.compile(r"^(?P<base>.+)@k$")


# --- config -------------------------------------------------------------------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricCfg(_Strict):
    """One metric of a question: `name` its column in the run's scores; `label` what it is; `proxy_for` the
    thesis metric it stands in for when it measures it another way (`note` then says how); `computed: false`
    a metric of the tree that this project does not compute (`reason` says why): it keeps its weight, so the
    coverage of its question and goal shows the share measured, and it never resolves to a column."""

    name: str = Field(min_length=1)
    role: Literal["primary", "secondary", "supporting"]
    weight: float
    label: str = ""
    proxy_for: str | None = None
    note: str = ""
    computed: bool = True
    reason: str = ""

    @model_validator(mode="after")
    def _weight_in_role_range(self) -> MetricCfg:
        low, high = ROLE_WEIGHT_RANGES[self.role]
        if not low <= self.weight <= high:
            raise ValueError(f"metric {self.name!r}: weight {self.weight} outside the thesis range "
                             f"{low}-{high} for role {self.role!r}")
        return self

    @model_validator(mode="after")
    def _explained(self) -> MetricCfg:
        if not self.computed and not self.reason:
            raise ValueError(f"metric {self.name!r}: computed: false needs the reason")
        if self.computed and self.reason:
            raise ValueError(f"metric {self.name!r}: `reason` is for computed: false (a deviation: `note`)")
        if self.proxy_for and not self.note:
            raise ValueError(f"metric {self.name!r}: proxy_for needs a note saying how it differs")
        return self

    def display(self) -> str:
        """The metric as the report prints it: its label (or name), and its proxy mark."""
        text = self.label or self.name
        return f"{text} [proxy for {self.proxy_for}]" if self.proxy_for else text


class NoCounterpartCfg(_Strict):
    metric: str
    role: Literal["primary", "secondary", "supporting"]
    reason: str


class QuestionCfg(_Strict):
    id: str = Field(min_length=1)
    text: str = ""
    component: Literal["retriever", "generator", "system"]
    weight: float = Field(default=1.0, gt=0)
    metrics: list[MetricCfg]
    no_counterpart: list[NoCounterpartCfg] = []

    @field_validator("metrics")
    @classmethod
    def _non_empty(cls, value: list[MetricCfg]) -> list[MetricCfg]:
        if not value:
            raise ValueError("a question needs at least one metric")
        names = [m.name for m in value]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate metric in question: {names}")
        return value


class GoalCfg(_Strict):
    id: str = Field(min_length=1)
    text: str = ""
    weight: float = Field(default=1.0, gt=0)
    questions: list[QuestionCfg]

    @field_validator("questions")
    @classmethod
    def _non_empty(cls, value: list[QuestionCfg]) -> list[QuestionCfg]:
        if not value:
            raise ValueError("empty goal: a goal needs at least one question")
        return value


class GQMConfig(_Strict):
    name: str = "gqm"
    renormalize: bool = False
    goals: list[GoalCfg]
    metric_categories: dict[str, list[str]] = Field(
        default_factory=dict, description="category -> metrics of the tree: the thesis' component view "
        "(retrieval / generation / system metrics, Table 6.3, Figure 6.3), each its metrics' plain mean")

    @model_validator(mode="after")
    def _categories_name_tree_metrics(self) -> GQMConfig:
        known = {m.name for g in self.goals for q in g.questions for m in q.metrics if m.computed}
        unknown = sorted({m for members in self.metric_categories.values() for m in members} - known)
        if unknown:
            raise ValueError(f"metric_categories name metrics the goal tree does not have: {unknown}")
        return self

    @model_validator(mode="after")
    def _computed_or_not(self) -> GQMConfig:
        metrics = [m for g in self.goals for q in g.questions for m in q.metrics]
        both = sorted({m.name for m in metrics if m.computed} & {m.name for m in metrics if not m.computed})
        if both:
            raise ValueError(f"metrics marked both computed and computed: false: {both}")
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> GQMConfig:
        if not self.goals:
            raise ValueError("the goal tree has no goals")
        ids = [g.id for g in self.goals] + [q.id for g in self.goals for q in g.questions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate goal/question ids: {duplicates}")
        return self

    def not_computed(self) -> set[str]:
        """Names of the tree's metrics marked computed: false (never looked up in a run)."""
        return {m.name for g in self.goals for q in g.questions for m in q.metrics if not m.computed}

    def tree(self) -> GoalTree:
        return GoalTree(tuple(
            GoalNode(g.id, g.weight, tuple(
                QuestionNode(q.id, q.component, q.weight,
                             tuple(MetricNode(m.name, m.role, m.weight) for m in q.metrics))
                for q in g.questions))
            for g in self.goals), self.renormalize)


class GQMConfigError(ValueError):
    pass


def load_goals(path: str | Path) -> GQMConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise GQMConfigError(f"cannot read goal tree {path}: {exc}") from exc
    try:
        return GQMConfig.model_validate(data)
    except ValidationError as exc:
        raise GQMConfigError(f"invalid goal tree {path}:\n{exc}") from exc


# --- metric table -------------------------------------------------------------------------------------

def _first(run_dir: Path, *candidates: str) -> Path | None:
    for candidate in candidates:
        if (run_dir / candidate).exists():
            return run_dir / candidate
    return None


def not_applicable(run_dir: str | Path) -> list[dict]:
    """GroUSE's citation metrics for each built-in system whose reader prompt asks for no citations and no
    refusal sentence (the generate stage's systems table names each system's prompt version): one entry
    per system with the metrics and why. Systems of `ccrs evaluate` and endpoint systems are judged as
    they come (no entry)."""
    from judges.grouse import CITATION_METRICS
    from judges.readers import PROMPT_VERSIONS

    manifest = read_manifest(RunLayout(run_dir).generations.parent) or {}
    systems = (manifest.get("summary") or {}).get("systems") or {}
    citing = PROMPT_VERSIONS["citing"]
    return [{"system": system, "metrics": list(CITATION_METRICS),
             "reason": f"reader prompt {info['prompt']} asks for no [i] citations and no refusal sentence, "
                       f"which GroUSE's {', '.join(CITATION_METRICS)} read (`prompt: citing` or auto)"}
            for system, info in sorted(systems.items()) if info.get("prompt") not in (None, citing)]


def load_metric_table(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """Long table (query_id, system, metric, score, qtype) from every source in the run directory, and
    metric -> source file. Rows with a non-finite score are dropped (= missing, never 0), and so are the
    GroUSE metrics `not_applicable` to a system's answers (the goal tree then weights what applies)."""
    run_dir = Path(run_dir)
    layout = RunLayout(run_dir)
    frames, sources = [], {}
    paths = [layout.scores(suite) for suite in layout.judged_suites()] + [layout.vera_dir / SCORES_FILE]
    for path in (p for p in paths if p.exists()):
        frame = mean_over_repeats(pd.read_parquet(path, columns=_score_columns(path)))
        frame = frame[~frame["metric"].isin(sources)]  # a metric is taken from its first source only
        if path == layout.scores("grouse"):
            frame = _without_not_applicable(frame, not_applicable(run_dir))
        frames.append(frame)
        sources.update({m: str(path.relative_to(run_dir)) for m in frame["metric"].unique()})
    retrieval = _first(run_dir, "retrieval_metrics/retrieval_metrics.parquet",
                       "retrieve/retrieval_metrics.parquet")
    if retrieval is not None:
        per_query = pd.read_parquet(retrieval)
        generations = _first(run_dir, "generate/generations.parquet")
        if generations is not None:
            pairs = pd.read_parquet(generations, columns=["system", "retriever"]).drop_duplicates()
        else:
            systems = {s for f in frames for s in f["system"].unique()}
            pairs = pd.DataFrame({"system": sorted(systems) or sorted(per_query["retriever"].unique()),
                                  "retriever": None})
            if not systems:
                pairs["retriever"] = pairs["system"]
        merged = per_query.merge(pairs, on="retriever")
        frame = merged.rename(columns={"measure": "metric", "value": "score"})[
            ["query_id", "system", "metric", "score"]]
        frames.append(frame)
        sources.update({m: str(retrieval.relative_to(run_dir)) for m in frame["metric"].unique()})
    if not frames:
        raise FileNotFoundError(f"{run_dir}: no judge_<suite>/scores.parquet, vera/scores.parquet or "
                                "retrieval metrics")
    table = pd.concat(frames, ignore_index=True)
    table["query_id"] = table["query_id"].astype(str)
    table["score"] = pd.to_numeric(table["score"], errors="coerce")
    table = table[np.isfinite(table["score"].to_numpy(dtype=float))]
    queries = _first(run_dir, "retrieve/queries.parquet")
    if queries is not None:
        qtypes = pd.read_parquet(queries, columns=["query_id", "qtype"])
        qtypes["query_id"] = qtypes["query_id"].astype(str)
        table = table.merge(qtypes.drop_duplicates("query_id"), on="query_id", how="left")
    else:
        table["qtype"] = None
    table["qtype"] = table["qtype"].fillna("unknown").astype(str)
    return table.reset_index(drop=True), sources


def _score_columns(path: Path) -> list[str]:
    """A scores file's long-format columns, and `repeat` where judge.repeats asked each judgment more than
    once (the table then holds the mean of each sample's scored repeats: stats/scores.py)."""
    columns = ["query_id", "system", "metric", "score"]
    return columns + ([REPEAT_COLUMN] if REPEAT_COLUMN in pq.read_schema(path).names else [])


def _without_not_applicable(frame: pd.DataFrame, entries: list[dict]) -> pd.DataFrame:
    drop = np.zeros(len(frame), dtype=bool)
    for entry in entries:
        drop |= ((frame["system"] == entry["system"]) & frame["metric"].isin(entry["metrics"])).to_numpy()
    return frame[~drop]


def resolve_names(config_names: list[str], available: list[str]) -> dict[str, str]:
    """Config metric name -> column name; 'R@k' matches the run's single 'R@<number>' \
(largest k if several)."""
    out = {}
    for name in config_names:
        match = K_PATTERN.match(name)
        if match:
            pattern = re.compile(rf"^{re.escape(match.group('base'))}@(\d+)$")
            hits = sorted((int(m.group(1)), a) for a in available if (m := pattern.match(a)))
            if hits:
                out[name] = hits[-1][1]
        elif name in available:
            out[name] = name
    return out


# --- report -------------------------------------------------------------------------------------------

def build_report(config: GQMConfig, table: pd.DataFrame, sources: dict[str, str] | None = None) -> dict:
    tree = config.tree()
    names = tree.metric_names()
    not_computed = config.not_computed()
    resolved = resolve_names([n for n in names if n not in not_computed], sorted(table["metric"].unique()))
    means = table.groupby(["system", "qtype", "metric"])["score"].agg(["mean", "count"])
    overall_means = table.groupby(["system", "metric"])["score"].agg(["mean", "count"])
    n_queries = table.groupby(["system", "qtype"])["query_id"].nunique()
    n_all = table.groupby("system")["query_id"].nunique()
    systems = sorted(table["system"].unique())
    qtypes = [q for q in QTYPES if q in set(table["qtype"])] + sorted(set(table["qtype"]) - set(QTYPES))

    slices = [(s, None) for s in systems] + [(s, q) for s in systems for q in qtypes]
    values = np.full((len(slices), len(names)), np.nan)
    counts = np.zeros((len(slices), len(names)), dtype=int)
    for i, (system, qtype) in enumerate(slices):
        for j, name in enumerate(names):
            column = resolved.get(name)
            key = (system, column) if qtype is None else (system, qtype, column)
            frame = overall_means if qtype is None else means
            if column is not None and key in frame.index:
                values[i, j], counts[i, j] = frame.loc[key, "mean"], frame.loc[key, "count"]
    results = aggregate_matrix(tree, names, values)
    categories = category_means(names, values, config.metric_categories)

    report_systems: dict[str, dict] = {}
    for i, ((system, qtype), result) in enumerate(zip(slices, results)):
        n = int(n_all[system]) if qtype is None else int(n_queries.get((system, qtype), 0))
        entry = _slice_entry(config, result, dict(zip(names, counts[i])), resolved, n)
        entry["metric_categories"] = {
            name: {"score": finite_or_none(found.scores[i]), "metrics_present": int(found.present[i]),
                   "metrics": list(found.metrics)} for name, found in categories.items()}
        target = report_systems.setdefault(system, {"all": None, "by_qtype": {}})
        if qtype is None:
            target["all"] = entry
        else:
            target["by_qtype"][qtype] = entry
    return {
        "config": config.name,
        "renormalize": config.renormalize,
        "renormalize_note": ("weights renormalized over available metrics/questions/goals; coverage < 1 "
                             "marks a partial score" if config.renormalize else
                             "no renormalization: any missing metric makes its question, goal and overall "
                             "not computable"),
        "systems_order": systems,
        "qtypes": qtypes,
        "metric_columns": {name: resolved.get(name) for name in names},
        "metric_sources": {name: (sources or {}).get(resolved[name]) for name in names if name in resolved},
        "missing_metrics": [name for name in names if name not in resolved and name not in not_computed],
        "not_computed": [
            {"goal": g.id, "question": q.id, "name": m.name, "label": m.label, "role": m.role,
             "weight": m.weight, "reason": m.reason}
            for g in config.goals for q in g.questions for m in q.metrics if not m.computed],
        "proxies": [{"metric": name, "proxy_for": proxy_for} for name, proxy_for in sorted(
            {(m.name, m.proxy_for) for g in config.goals for q in g.questions for m in q.metrics
             if m.proxy_for})],
        "no_counterpart": [
            {"goal": g.id, "question": q.id, **nc.model_dump()} for g in config.goals for q in g.questions
            for nc in q.no_counterpart
        ],
        "systems": report_systems,
    }


def _node(node) -> dict:
    return {"score": node.score, "computable": node.score is not None, "reason": node.reason,
            "coverage": node.coverage}


def _unavailable(metric: MetricCfg, resolved: dict[str, str]) -> str:
    if not metric.computed:
        return f"not computed here: {metric.reason}"
    return "metric not computed in this run" if metric.name not in resolved else "no score for this slice"


def _slice_entry(config: GQMConfig, result: GQMResult, counts: dict[str, int], resolved: dict[str, str],
                 n: int) -> dict:
    contributions = {(c.goal, c.question, c.metric): c for c in result.contributions}
    questions = {(q.goal, q.id): q for q in result.questions}
    goals_out = []
    for cfg_goal, goal in zip(config.goals, result.goals):
        q_out = []
        for cfg_q in cfg_goal.questions:
            q = questions[cfg_goal.id, cfg_q.id]
            m_out = []
            for m in cfg_q.metrics:
                c = contributions.get((cfg_goal.id, cfg_q.id, m.name))
                m_out.append({
                    "name": m.name, "label": m.label, "display": m.display(), "proxy_for": m.proxy_for,
                    "note": m.note, "computed": m.computed,
                    "column": resolved.get(m.name), "role": m.role, "weight": m.weight,
                    "value": c.value if c else None, "n": int(counts.get(m.name, 0)),
                    "available": c is not None,
                    "reason": None if c else _unavailable(m, resolved),
                    "to_question": c.to_question if c else None, "to_goal": c.to_goal if c else None,
                    "to_overall": c.to_overall if c else None,
                })
            q_out.append({"id": q.id, "text": cfg_q.text, "component": q.component, "weight": cfg_q.weight,
                          **_node(q), "missing": list(q.missing), "metrics": m_out})
        goals_out.append({"id": goal.id, "text": cfg_goal.text, "weight": cfg_goal.weight, **_node(goal),
                          "questions": q_out})
    return {"n_queries": n, "overall": _node(result.overall), "goals": goals_out,
            "components": {k: _node(v) for k, v in result.components.items()}}


# --- the printed tree -------------------------------------------------------------------------------

def _score(node: dict) -> str:
    return f"{node['score']:.3f}" if node["score"] is not None else "n/a"


def tree_lines(report: dict) -> list[str]:
    """The report as `ccrs report` prints it: per system its overall score, goals and questions (score and
    coverage, the share of the tree's weight measured), each question's computed metrics (value, role,
    weight, proxy mark) apart from those not computed here; the reasons once, at the end."""
    lines = [f"goal tree {report['config']}"]
    for system in report["systems_order"]:
        entry = report["systems"][system]["all"]
        overall = entry["overall"]
        lines.append(f"{system}: overall {_score(overall)} (coverage {overall['coverage']:.2f})"
                     + ("" if overall["score"] is not None else f" ({overall['reason']})"))
        for goal in entry["goals"]:
            lines.append(f"  {goal['id']}: {_score(goal)} (coverage {goal['coverage']:.2f}) {goal['text']}")
            for question in goal["questions"]:
                lines += _question_lines(question)
    if report.get("not_computed"):
        lines.append("not computed here (their weight counts against coverage):")
        reasons = {m["name"]: m for m in report["not_computed"]}
        lines += [f"  {m['label'] or name}: {m['reason']}" for name, m in reasons.items()]
    return lines


def _question_lines(question: dict) -> list[str]:
    lines = [f"    {question['id']}: {_score(question)} (coverage {question['coverage']:.2f}) "
             f"[{question['component']}]"]
    computed = [m for m in question["metrics"] if m["computed"]]
    skipped = [m for m in question["metrics"] if not m["computed"]]
    if computed:
        lines.append("      computable here:")
        for m in computed:
            value = f"{m['value']:.3f}" if m["value"] is not None else "n/a  "
            absent = "" if m["value"] is not None else f" ({m['reason']})"
            lines.append(f"        {value}  {m['name']}: {m['display']}, {m['role']} {m['weight']:g}{absent}")
    if skipped:
        lines.append("      not computable here: " + "; ".join(
            f"{m['label'] or m['name']}, {m['role']} {m['weight']:g}" for m in skipped))
    return lines


# --- plots --------------------------------------------------------------------------------------------

def component_chart(report: dict, path: Path) -> Path:
    """Per system, one bar per metric category (the thesis' Figure 6.3: retrieval, generation and system
    metrics averaged); a category with no metric present is left out and marked n/a."""
    systems = report["systems_order"]
    categories = list(report["systems"][systems[0]]["all"]["metric_categories"])
    width = 0.8 / max(1, len(categories))
    with figure_file(path, dpi=110, figsize=(max(5.0, 1.2 * len(systems) + 2), 4)) as (_, ax):
        for k, category in enumerate(categories):
            scores = [report["systems"][s]["all"]["metric_categories"][category]["score"] for s in systems]
            xs = np.arange(len(systems)) + (k - (len(categories) - 1) / 2) * width
            ax.bar(xs, [s if s is not None else 0.0 for s in scores], width, label=category)
            for x, score in zip(xs, scores):
                ax.text(x, (score or 0.0) + 0.01, "n/a" if score is None else f"{score:.2f}", ha="center",
                        fontsize=6)
        ax.set_xticks(range(len(systems)), systems, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("mean of the category's metrics")
        ax.set_title("GQM metric categories per system")
        ax.legend(fontsize=7)
    return path


def radar_chart(report: dict, path: Path) -> Path:
    """Goal attainment per system (thesis Figure 6.1); a not-computable goal is drawn at 0 with 'n/a'."""
    goals = [g["id"] for g in next(iter(report["systems"].values()))["all"]["goals"]]
    angles = np.linspace(0, 2 * np.pi, len(goals), endpoint=False)
    labels = []
    for k, goal in enumerate(goals):
        na = all(report["systems"][s]["all"]["goals"][k]["score"] is None for s in report["systems_order"])
        labels.append(f"{goal} (n/a)" if na else goal)
    with figure_file(path, dpi=110, figsize=(6, 6), subplot_kw={"polar": True}) as (_, ax):
        for system in report["systems_order"]:
            scores = [g["score"] for g in report["systems"][system]["all"]["goals"]]
            vals = np.array([s if s is not None else 0.0 for s in scores])
            ax.plot(np.append(angles, angles[0]), np.append(vals, vals[0]), marker="o", label=system)
            ax.fill(np.append(angles, angles[0]), np.append(vals, vals[0]), alpha=0.1)
        ax.set_xticks(angles)
        ax.set_xticklabels(labels)
        ax.set_ylim(0, 1)
        ax.set_title("GQM goal attainment")
        ax.legend(loc="upper right", bbox_to_anchor=(1.35, 1.1), fontsize=7)
    return path


def heatmap(report: dict, path: Path, level: str) -> Path:
    """Rows goals (level='goals') or metrics (level='metrics'), columns question types, one panel per system;
    blank cells = not computable / not measured (thesis Figure 6.4)."""
    systems, qtypes = report["systems_order"], report["qtypes"] or ["unknown"]
    first = report["systems"][systems[0]]["all"]
    if level == "goals":
        rows = [g["id"] for g in first["goals"]]
    else:
        rows = list(dict.fromkeys(m["name"] for g in first["goals"] for q in g["questions"]
                                  for m in q["metrics"] if report["metric_columns"].get(m["name"])))
        rows = rows or ["(no metric of the tree measured)"]  # an all-n/a panel rather than an empty axis
    figsize = (2.2 + 1.1 * len(qtypes) * len(systems), 0.9 + 0.35 * max(1, len(rows)))
    with figure_file(path, dpi=110, tight_layout=False, bbox_inches="tight", nrows=1, ncols=len(systems),
                     figsize=figsize, squeeze=False) as (fig, axes):
        for ax, system in zip(axes[0], systems):
            grid = _heatmap_grid(report["systems"][system]["by_qtype"], rows, qtypes, level)
            image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap="viridis", aspect="auto")
            for (i, j), value in np.ndenumerate(grid):
                ax.text(j, i, "n/a" if np.isnan(value) else f"{value:.2f}", ha="center", va="center",
                        fontsize=7, color="gray" if np.isnan(value) else "white")
            ax.set_xticks(range(len(qtypes)), qtypes, rotation=30, fontsize=7)
            ax.set_yticks(range(len(rows)), rows, fontsize=7)
            ax.set_title(system, fontsize=8)
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
        fig.suptitle(f"GQM {level} by question type", fontsize=9)
    return path


def _heatmap_grid(by_qtype: dict, rows: list[str], qtypes: list[str], level: str) -> np.ndarray:
    """One system's values, rows x question types, NaN where not computable or not measured."""
    grid = np.full((len(rows), len(qtypes)), np.nan)
    for j, qtype in enumerate(qtypes):
        entry = by_qtype.get(qtype)
        if entry is None:
            continue
        if level == "goals":
            lookup = {g["id"]: g["score"] for g in entry["goals"]}
        else:
            lookup = {m["name"]: m["value"] for g in entry["goals"] for q in g["questions"]
                      for m in q["metrics"]}
        for i, row in enumerate(rows):
            if lookup.get(row) is not None:
                grid[i, j] = lookup[row]
    return grid


# --- entry points -------------------------------------------------------------------------------------

def write_report(run_dir: str | Path, goals: str | Path,
                 out_dir: str | Path | None = None) -> tuple[dict, list[Path]]:
    """The report of the run directory under the goal tree `goals`: gqm_report.json and the three plots in
    `out_dir` (default RunLayout.gqm_dir)."""
    run_dir = Path(run_dir)
    config = load_goals(goals)
    table, sources = load_metric_table(run_dir)
    report = build_report(config, table, sources)
    report["run_dir"] = str(run_dir)
    judged_grouse = "grouse" in RunLayout(run_dir).judged_suites()
    report["not_applicable"] = not_applicable(run_dir) if judged_grouse else []
    report["question_types"] = question_type_table(report)
    out = Path(out_dir) if out_dir else RunLayout(run_dir).gqm_dir
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "gqm_report.json"
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    if not report["systems"]:  # nothing scored (every judgment failed): no plot to draw
        return report, [json_path]
    written = [json_path, radar_chart(report, out / "radar.png"),
               heatmap(report, out / "heatmap_goals.png", "goals"),
               heatmap(report, out / "heatmap_metrics.png", "metrics")]
    if config.metric_categories:
        written.append(component_chart(report, out / "components.png"))
    written += question_type_files(report, out)
    return report, written


def _mlflow_key(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", text)


def log_to_mlflow(report: dict, files: list[Path], tracking_uri: str, run_id: str) -> None:
    """Artifacts under gqm/ of the given run, plus gqm/<system>/<goal> metrics (computable ones only)."""
    metrics = {}
    for system, entry in report["systems"].items():
        nodes = [("overall", entry["all"]["overall"])] + [(g["id"], g) for g in entry["all"]["goals"]]
        nodes += [(f"component/{k}", v) for k, v in entry["all"]["components"].items()]
        nodes += [(f"category/{k}", v) for k, v in entry["all"].get("metric_categories", {}).items()]
        metrics.update({_mlflow_key(f"gqm/{system}/{name}"): float(node["score"])
                        for name, node in nodes if node["score"] is not None})
    attach(tracking_uri, run_id, metrics=metrics, files=files, artifact_path="gqm")
