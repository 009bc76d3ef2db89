"""The nightly gate's decision, pure: a run's judgments and its baseline's in, a typed outcome out (the
candidate-vs-baseline check apart from the fetch, as MLflow's models/evaluation/validation.py keeps it).

Every outcome is a status with its exit code (`statuses()`: the gate's own STATUSES and those of the run
extensions that stop a run before judging). Before any pairing, a night may be decided by its failure rate,
by having no baseline, or by a baseline judged otherwise (COMPARABLE settings). Else the systems both runs
hold are paired on (query, system, metric): each (system, metric) cell a paired sign-flip test, Holm over
the cells, its minimum detectable difference; the run extensions' cell kinds decide the cells they
contribute (the registry's GateCells, in registry order); the questions whose score moved most are listed
(`question_moves`, a pure function of two `sample_view` frames)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from pipelines.extensions.registry import GateInputs, GateStatus, gate_cells, gate_statuses, run_stops
from stats.multiple import holm_adjust
from stats.paired import paired_randomization_test
from stats.power import paired_minimum_detectable_difference
from stats.scores import REPEAT_COLUMN, SAMPLE_KEYS, mean_over_repeats
from pipelines.reporting.tracking import RAW_REPLY_MAX_CHARS

MDD_POWER = 0.8
MIN_PAIRED = 2  # shared questions of a cell for the paired test
TABLE_COLUMNS = ["system", "metric", "n", "mean_run", "mean_baseline", "diff", "p_value", "adjusted_p",
                 "significant", "verdict", "mdd"]
MOVES_PER_CELL = 5  # questions listed per regressed cell unless --show-moves N says otherwise
MOVE_COLUMNS = ["system", "metric", "rank", "query_id", "question", "score_baseline", "score_run", "move",
                "answer_baseline", "answer_run", "judge_baseline", "judge_run"]

# status -> exit code: the gate's own outcomes of `ccrs compare` / `ccrs nightly` (docs/nightly.md); a run
# extension that stops a run before judging adds its own (statuses())
STATUSES = {
    "pass": 0,          # no cell regressed against the baseline
    "baseline": 0,      # no baseline yet: this run is the baseline
    "crash": 1,         # the run failed while running (logged as a FAILED MLflow run with its error)
    "setup_error": 2,   # bad config, inputs, store or run/baseline ids: nothing was compared
    "regression": 3,    # at least one (system, metric) cell dropped significantly (Holm over cells)
    "failure_rate": 4,  # more failed judgments than --max-failure-rate: the comparison is not trusted
    "incomparable": 5,  # the baseline was judged otherwise (judge model, prompts, scoring, repeats, metrics)
}
ACCEPTED = ("pass", "baseline", "accepted")  # statuses that make a run a baseline for `previous`
COMPARABLE = {"ccrs.judge_model": "judge model", "ccrs.prompt_versions": "prompt versions",
              "ccrs.scoring": "scoring mode", "ccrs.judge_repeats": "judge repeats",
              "ccrs.metrics": "metric set"}


class RegressionError(RuntimeError):
    """A setup error of the gate (exit 2): no such experiment or run, nothing to pair."""


def statuses() -> dict[str, int]:
    """Every status with its exit code: the gate's own, then each run extension's stop (tasks/runtime/
    stops.py) and each gate cell kind's outcome (GateStatus), in registry order."""
    return (STATUSES | {stop.status: stop.exit_code for stop in run_stops()}
            | {kind.status: kind.exit_code for kind in gate_statuses()})


def stop_headline(status: str) -> str | None:
    """What the alert says of a run an extension stopped with `status` (None: no extension's status)."""
    return next((stop.headline for stop in run_stops() if stop.status == status), None)


def failing_verdicts() -> tuple[str, ...]:
    """The verdicts of the cells a night fails: regression, and those a gate cell kind holds (GateStatus)."""
    return ("regression", *(kind.verdict for kind in gate_statuses()))


def cell_status(status: str) -> GateStatus | None:
    """The gate cell kind's outcome named `status` (None: no kind adds it)."""
    return next((kind for kind in gate_statuses() if kind.status == status), None)


@dataclass(frozen=True)
class GateOptions:
    alpha: float = 0.05
    b: int = 10_000
    seed: int = 0
    max_failure_rate: float = 0.05
    allow_judge_change: bool = False
    show_moves: int | None = None  # None: MOVES_PER_CELL movers of each regressed cell; N: of every cell
    extensions: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # options' values: GateInputs


@dataclass(frozen=True)
class RegressionReport:
    """The gate's outcome on one run: its status (statuses()), the baseline (None: there is none yet), the
    per-cell table (None when nothing was compared), the differing judge settings and the failure rate."""

    status: str
    run_id: str
    baseline_id: str | None
    table: pd.DataFrame | None
    n_regressions: int
    markdown: str
    failure_rate: float = 0.0
    differing: dict = field(default_factory=dict)
    experiment: str = ""
    moves: pd.DataFrame | None = None  # question_moves of the listed cells (None when nothing was compared)
    unpaired: dict = field(default_factory=dict)  # {"run_only": [...], "baseline_only": [...]} systems
    series: str = ""  # the run's series (fetch.series_label)
    other_series: tuple[str, ...] = ()  # the experiment's earlier runs' other series (fetch.other_series)

    @property
    def exit_code(self) -> int:
        codes = STATUSES if self.status in STATUSES else statuses()
        return codes[self.status]

    def regressed_cells(self) -> list[str]:
        return [f"{r.system}/{r.metric} ({r.diff:+.3f}, adjusted p {r.adjusted_p:.4f})"
                for r in self._regressed_rows().itertuples()]

    def cells_with(self, verdict: str) -> list[str]:
        """The cells ("system/metric") whose verdict is `verdict`."""
        if self.table is None:
            return []
        rows = self.table[self.table["verdict"] == verdict]
        return [f"{system}/{metric}" for system, metric in zip(rows["system"], rows["metric"])]

    def regressed_pairs(self) -> list[tuple[str, str]]:
        rows = self._regressed_rows()
        return list(zip(rows["system"], rows["metric"]))

    def failing_pairs(self) -> list[tuple[str, str]]:
        """The (system, metric) cells regressed or held (failing_verdicts), whose movers the alert names."""
        if self.table is None:
            return []
        rows = self.table[self.table["verdict"].isin(failing_verdicts())]
        return list(zip(rows["system"], rows["metric"]))

    def _regressed_rows(self) -> pd.DataFrame:
        if self.table is None:
            return pd.DataFrame(columns=["system", "metric", "diff", "adjusted_p"])
        return self.table[self.table["verdict"] == "regression"]


# --- before any pairing: the failure rate, no baseline, another judge ---------------------------------------

def differing_settings(run_tags: dict, base_tags: dict) -> dict[str, tuple[str, str]]:
    """{setting: (baseline's, run's)} for the judge settings recorded on both runs that differ."""
    differing = {}
    for tag, label in COMPARABLE.items():
        ours, theirs = run_tags.get(tag), base_tags.get(tag)
        if ours is not None and theirs is not None and ours != theirs:
            differing[label] = (theirs, ours)
    return differing


def differing_text(differing: dict[str, tuple[str, str]]) -> str:
    return "; ".join(f"{label}: baseline {old!r}, run {new!r}" for label, (old, new) in differing.items())


def baseline_line(run_id: str, series: str, others: tuple[str, ...]) -> str:
    """The report's line of a night with no baseline, naming the experiment's other series."""
    also = (f" This experiment also holds runs of series {', '.join(others)}; `--series` names the series of "
            "a night (the experiment by default)." if others else "")
    return f"Run {run_id}: no baseline yet for series {series}; this run is the baseline.{also}"


def failure_rate(judgments: pd.DataFrame) -> float:
    return float((judgments["status"] == "failed").mean()) if len(judgments) else 0.0


def common_reasons(judgments: pd.DataFrame, shown: int = 3) -> str:
    if "reason" not in judgments:
        return ""
    reasons = judgments.loc[judgments["status"] == "failed", "reason"].dropna().value_counts().head(shown)
    listed = "; ".join(f"{reason} ({count})" for reason, count in reasons.items())
    return f" Most common reasons: {listed}." if listed else ""


def screen(run_id: str, judgments: pd.DataFrame, base_id: str | None, differing: dict,
           options: GateOptions, no_baseline: str) -> RegressionReport | None:
    """The night's outcome where it is decided before pairing (failure rate, no baseline, a baseline judged
    otherwise; `no_baseline`: the report's text of a night without one); None: pair it."""
    rate = failure_rate(judgments)
    unscored = len(judgments) > 0 and judgments["score"].isna().all()  # e.g. every judgment failed
    if rate > options.max_failure_rate or unscored:
        limit = (f", above the limit {options.max_failure_rate:.1%} (--max-failure-rate)"
                 if rate > options.max_failure_rate else ", and none has a score")
        text = (f"Run {run_id}: {rate:.1%} of its {len(judgments)} judgments failed{limit}: its comparison "
                f"is not trusted.{common_reasons(judgments)}")
        return RegressionReport("failure_rate", run_id, base_id, None, 0, text, rate)
    if base_id is None:
        return RegressionReport("baseline", run_id, None, None, 0, no_baseline, rate)
    if differing and not options.allow_judge_change:
        text = (f"Run {run_id} was judged otherwise than its baseline {base_id} "
                f"({differing_text(differing)}): their scores are not comparable. Judge a new baseline, or "
                "compare anyway with --allow-judge-change.")
        return RegressionReport("incomparable", run_id, base_id, None, 0, text, rate, differing)
    return None


# --- the paired comparison ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """The paired comparison of the systems both runs hold: the per-cell table, the notes of the cell kinds
    that decided a cell, the questions that moved most in the `listed` cells (None: every cell) and the
    systems left out."""

    table: pd.DataFrame
    notes: list[str]
    moves: pd.DataFrame
    listed: list[tuple[str, str]] | None
    unpaired: dict[str, list[str]]

    @property
    def n_regressions(self) -> int:
        return int((self.table["verdict"] == "regression").sum())

    @property
    def status(self) -> str:
        """regression where a cell regressed; else the outcome of the first cell kind whose verdict a cell
        has (GateStatus); else pass."""
        if self.n_regressions:
            return "regression"
        verdicts = set(self.table["verdict"])
        return next((kind.status for kind in gate_statuses() if kind.verdict in verdicts), "pass")


def compare(run: pd.DataFrame, base: pd.DataFrame, answers: tuple[pd.DataFrame | None, pd.DataFrame | None],
            inputs: GateInputs, options: GateOptions, run_id: str) -> Comparison:
    """The paired test of the systems both runs' judgments hold (`answers`: the run's and the baseline's,
    None where not at hand), the contributed cells decided, and the questions that moved most."""
    unpaired = unpaired_systems(run, base)
    if not set(run["system"]) & set(base["system"]):
        raise RegressionError(f"run {run_id} and its baseline {inputs.base_id} share no system (run: "
                              f"{', '.join(sorted(set(run['system'])))}; baseline: "
                              f"{', '.join(sorted(set(base['system'])))}): nothing to compare. An "
                              "outputs file without a `system` column names its system by its stem: add the "
                              "column or give --system NAME; another system's nights take their own --series")
    run_scores, base_scores = scored(run), scored(base)
    table = paired_table(run_scores, base_scores, options.alpha, options.b, options.seed)
    inputs = replace(inputs, run_scores=run_scores, base_scores=base_scores, b=options.b, seed=options.seed)
    table, notes = contributed_cells(table, inputs)
    if table.empty:
        raise RegressionError("the two runs share no (query, system, metric) judgments to pair, and no cell "
                              "kind decided one (each night needs two scores of a system and metric)")
    listed, top = moved_cells(table, options.show_moves)
    moves = question_moves(sample_view(run, answers[0]), sample_view(base, answers[1]), listed, top)
    return Comparison(table, notes, moves, listed, unpaired)


def scored(judgments: pd.DataFrame) -> pd.DataFrame:
    """One score per (question, system, metric): a run that judged each more than once gives the mean of each
    sample's scored repeats (stats/scores.py), so that runs with and without repeats pair up."""
    ok = judgments[(judgments["status"] != "failed") & judgments["score"].notna()]
    columns = ["query_id", "system", "metric", "score"] + ([REPEAT_COLUMN] if REPEAT_COLUMN in ok else [])
    return mean_over_repeats(ok[columns])


def paired_table(current: pd.DataFrame, baseline: pd.DataFrame, alpha: float, b: int,
                 seed: int) -> pd.DataFrame:
    joined = current.merge(baseline, on=["query_id", "system", "metric"], suffixes=("_run", "_base"))
    # a cell of fewer than MIN_PAIRED shared questions is no pair: left to the cell kinds (unpaired nights)
    joined = joined[joined.groupby(["system", "metric"])["query_id"].transform("size") >= MIN_PAIRED]
    if joined.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    rng = np.random.default_rng(seed)
    cells = joined.groupby(["system", "metric"], sort=True)
    rows = []
    for (system, metric), cell in cells:
        result = paired_randomization_test(cell["score_run"].to_numpy(), cell["score_base"].to_numpy(), b,
                                           rng)
        mdd = paired_minimum_detectable_difference(
            cell["score_run"].to_numpy() - cell["score_base"].to_numpy(), alpha / cells.ngroups, MDD_POWER)
        rows.append({"system": system, "metric": metric, "n": result.n, "mean_run": cell["score_run"].mean(),
                     "mean_baseline": cell["score_base"].mean(), "diff": result.mean_diff,
                     "p_value": result.p_value, "mdd": np.nan if mdd is None else mdd})
    table = pd.DataFrame(rows)
    table["adjusted_p"] = holm_adjust(table["p_value"].to_numpy())
    table["significant"] = table["adjusted_p"] < alpha
    table["verdict"] = cell_verdicts(table["diff"], table["significant"])
    return table[[c for c in table.columns if c != "mdd"] + ["mdd"]]


def cell_verdicts(diff, significant) -> np.ndarray:
    """regression / improvement where a cell's difference is significant (its sign), else same."""
    return np.where(significant, np.where(np.asarray(diff) < 0, "regression", "improvement"), "same")


def contributed_cells(table: pd.DataFrame, inputs: GateInputs) -> tuple[pd.DataFrame, list[str]]:
    """The gate's table with the cells the run extensions decide (each its cell kind, in registry order:
    pipelines/extensions/), and the notes of the cell kinds that decided one."""
    kinds = gate_cells()
    for kind in kinds:
        table = kind.decide(table, inputs)
    for kind in kinds:
        if kind.last is not None:
            table = kind.last(table, inputs)
    decided = set(table["basis"]) if "basis" in table else set()
    verdicts = set(table["verdict"])
    return table, [note for kind in kinds for note in (
        kind.note if kind.basis in decided else "",
        kind.status.note if kind.status is not None and kind.status.verdict in verdicts else "") if note]


def unpaired_systems(run: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, list[str]]:
    """The systems of two runs' judgments (or scores) that only one of them holds: {"run_only": [...],
    "baseline_only": [...]}, each sorted; both empty when the runs hold the same systems."""
    ours, theirs = set(run["system"]), set(baseline["system"])
    return {"run_only": sorted(ours - theirs), "baseline_only": sorted(theirs - ours)}


# --- what moved, question by question -----------------------------------------------------------------------

def sample_view(judgments: pd.DataFrame, answers: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per scored (question, system, metric) of a run: `score` as the gate pairs it (`scored`: the
    mean of the scored repeats), `judge` what the judge said (each judgment's raw reply, or its status and
    reason; judged more than once, one line per repeat, `[r]` first) and, from `answers` (query_id, system,
    answer and perhaps question), the answer and the question ("" where not at hand)."""
    said = judgments.assign(judge=[_judge_said(row) for row in judgments.itertuples()])
    notes = said.groupby(list(SAMPLE_KEYS), sort=False)["judge"].agg("\n".join).reset_index()
    view = scored(judgments).merge(notes, on=list(SAMPLE_KEYS), how="left")
    if answers is None:
        answers = pd.DataFrame(columns=["query_id", "system", "answer", "question"])
    columns = [c for c in ("answer", "question") if c in answers.columns]
    view = view.merge(answers[["query_id", "system", *columns]].drop_duplicates(["query_id", "system"]),
                      on=["query_id", "system"], how="left")
    for column in ("answer", "question"):
        view[column] = view[column].fillna("").astype(str) if column in view else ""
    return view


def _judge_said(row) -> str:
    """One judgment's reply (cut at RAW_REPLY_MAX_CHARS), its status and reason where it is not ok."""
    repeat = getattr(row, REPEAT_COLUMN, None)
    label = "" if repeat is None or pd.isna(repeat) else f"[{int(repeat)}] "
    raw = getattr(row, "raw", None)
    raw = raw.strip()[:RAW_REPLY_MAX_CHARS] if isinstance(raw, str) else ""
    reason = getattr(row, "reason", None)
    status = "" if row.status == "ok" else f"({row.status}: {reason})" if reason else f"({row.status})"
    return label + " ".join(part for part in (raw, status) if part)


def question_moves(run: pd.DataFrame, baseline: pd.DataFrame, cells: list[tuple[str, str]] | None,
                   top: int) -> pd.DataFrame:
    """The `top` questions of each cell (system, metric) whose score moved most from `baseline` to `run`
    (two `sample_view` frames; questions scored in both, as the paired test pairs them): the largest
    |move| first, a drop before a rise of the same size, then by query id; a question whose score did not
    move is left out. `cells` None: every cell both runs hold. Columns MOVE_COLUMNS, cells in (system,
    metric) order, `rank` 1.. within a cell."""
    joined = baseline.merge(run, on=list(SAMPLE_KEYS), suffixes=("_baseline", "_run"))
    joined["move"] = joined["score_run"] - joined["score_baseline"]
    joined = joined[joined["move"].abs() > 1e-12]
    if cells is not None:
        joined = joined[in_cells(joined, cells)]
    joined = joined.assign(size=joined["move"].abs()).sort_values(
        ["system", "metric", "size", "move", "query_id"], ascending=[True, True, False, True, True])
    joined = joined.groupby(["system", "metric"], sort=False).head(max(top, 0))
    joined["rank"] = joined.groupby(["system", "metric"], sort=False).cumcount() + 1
    tonight = joined["question_run"]
    joined["question"] = tonight.where(tonight != "", joined["question_baseline"])
    return joined[MOVE_COLUMNS].reset_index(drop=True)


def in_cells(frame: pd.DataFrame, cells: list[tuple[str, str]]) -> np.ndarray:
    """Which rows of `frame` (system, metric, ...) fall in one of `cells`."""
    wanted = set(cells)
    return np.array([(system, metric) in wanted for system, metric in zip(frame["system"], frame["metric"])],
                    dtype=bool)


def moved_cells(table: pd.DataFrame, show_moves: int | None) -> tuple[list[tuple[str, str]] | None, int]:
    """(cells, top) whose movers the report lists: every regressed (or held: GateStatus) cell's
    MOVES_PER_CELL by default; every cell's N with --show-moves N."""
    if show_moves is not None:
        return None, show_moves
    regressed = table[table["verdict"].isin(failing_verdicts())]
    return list(zip(regressed["system"], regressed["metric"])), MOVES_PER_CELL
