"""The final reducer stage: per-sample scores -> CCRS statistics (stats/ does the math).

Its code key covers the statistics and the scores they read only: the metric order and the suites'
metrics come in as data from the caller (the judge registry), and the tables/ and plots/ beside
stats.json are reporting that the caller writes after the stage (pipelines/reporting/report.py).

The stage's own files are read and written here too: long-format scores in, stats.json out (stats/ itself
reads and writes nothing), and a hypotheses YAML file (a top-level `hypotheses:` list) read into stats'
typed records."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stats.analysis import compute_all, unscored_result
from stats.errors import StatsInputError
from stats.hsd import Direction
from stats.hypotheses import Hypothesis, HypothesisSet
from stats.multiple import Combine
from stats.scores import REPEAT_COLUMN, validate_scores
from tasks.runtime.contributions import (
    StatisticsContext,
    StatisticsContributor,
    contributed_blocks,
    contributed_fingerprints,
    contributed_inputs,
)
from tasks.runtime.layout import STATS_FILE, RunLayout
from tasks.runtime.stage import StageResult, code_version, file_fingerprint, run_stage, stage_key
from tasks.runtime.tables import read_table

UNSCORED_NOTE = ("no judgment has a score (every one failed: failures.json, the judgments' reasons and raw "
                 "replies): no statistics, no hypotheses tested")


def run_reduce(
    run_dir: Path,
    scores_paths: list[Path],
    b: int,
    seed: int,
    alpha: float,
    hypotheses_path: str | None = None,
    force: bool = False,
    *,
    metric_order: Sequence[str],
    suites: Mapping[str, Sequence[str]],
    contributors: Sequence[StatisticsContributor] = (),
) -> StageResult:
    """`metric_order`: every metric's place in the tables (judges.suite.metric_order()); `suites`: {suite:
    its metric names} (judges.suite.suite_membership()), which groups the discriminative power comparison
    (the CCRS paper's Table 3); `contributors`: the run extensions' parts of the statistics
    (tasks/runtime/contributions.py), handed in by the caller."""
    membership = {name: list(metrics) for name, metrics in suites.items()}
    config = {"b": b, "seed": seed, "alpha": alpha, "hypotheses": _hypotheses_text(hypotheses_path),
              "suites": membership, "metric_order": list(metric_order)}
    context = StatisticsContext(Path(run_dir), tuple(scores_paths))
    key = stage_key("reduce", config, [file_fingerprint(path) for path in scores_paths]
                    + contributed_fingerprints(contributors, context),
                    code_version(__name__, *(module for c in contributors for module in c.code)))

    def reduce_scores(out_dir: Path) -> dict:
        scores = concat_scores([load_scores(path) for path in scores_paths])
        if scores.empty:  # every judgment failed: the verdict is the failure report (pipelines/reporting/)
            result = unscored_result(b, seed, alpha, UNSCORED_NOTE)
        else:
            hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path else None
            result = contributed_statistics(contributors, context, scores, hypotheses=hypotheses, b=b,
                                            seed=seed, alpha=alpha, metric_order=list(metric_order),
                                            metric_suites=membership)
        settings = {"b": b, "seed": seed, "alpha": alpha}
        result.update(contributed_blocks(contributors, replace(context, scores=scores, settings=settings)))
        written = write_stats(result, out_dir)
        return {
            "n_queries": result["n_queries"],
            "systems": result["systems"],
            "metrics": result["metrics"],
            "hypotheses": result.get("hypotheses", {}),
            "files": [str(written.relative_to(out_dir))],
        }

    return run_stage(run_dir, "reduce", key, reduce_scores, force=force)


def contributed_statistics(contributors: Sequence[StatisticsContributor], context: StatisticsContext,
                           scores: pd.DataFrame, **options) -> dict:
    """compute_all with what the contributors add to it (read from the run's files or the command's
    options; an `amend(result, scores)` among them rewrites the result before it is written, as in
    pipelines.reporting.report.reduce_user_scores); inputs that cannot be used (a bad file, a system the
    scores lack) leave the core statistics whole, with a note that says why."""
    inputs = contributed_inputs(contributors, context)
    failed, result = inputs.failed, None
    kwargs = dict(inputs.kwargs)
    amend = kwargs.pop("amend", None)
    if kwargs:
        try:
            result = compute_all(scores, **kwargs, **options)
            result = amend(result, scores) if amend is not None else result
        except StatsInputError as error:
            failed += [(unusable, error) for unusable in inputs.given]
            result = None
    if result is None:
        result = compute_all(scores, **options)
    result["notes"] += [f"{unusable}: {error}" for unusable, error in failed]
    return result


def run_folder_scores(run_dir: Path) -> pd.DataFrame:
    """A run's judge stages' scores in one long table (`ccrs stats RUN_DIR`, `ccrs_eval.compute_stats`)."""
    return concat_scores([read_scores_file(path) for path in run_scores(run_dir)])


def run_scores(run_dir: Path) -> list[Path]:
    """The scores of a run's finished judge stages (`ccrs stats RUN_DIR`)."""
    layout = RunLayout(run_dir)
    paths = [layout.scores(suite) for suite in layout.judged_suites()]
    if not paths:
        raise StatsInputError(f"{run_dir} has no judge stage's scores (judge_<suite>/scores.parquet)")
    return paths


def _hypotheses_text(path: str | None) -> str | None:
    return Path(path).read_text() if path else None


# --- the scores read and stats.json written


def read_scores_file(path: str | Path) -> pd.DataFrame:
    return read_table(path, "scores")


def load_scores(path: str | Path) -> pd.DataFrame:
    """Read long-format scores from Parquet or CSV and validate them (raises StatsInputError)."""
    return validate_scores(read_scores_file(path))


def concat_scores(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One long-format table of several suites' scores. When only some carry a repeat column (judged
    more than once per answer), the others were judged once: their rows get repeat 0."""
    if any(REPEAT_COLUMN in frame.columns for frame in frames):
        frames = [frame if REPEAT_COLUMN in frame.columns else frame.assign(**{REPEAT_COLUMN: 0})
                  for frame in frames]
    return pd.concat(frames, ignore_index=True)


def write_stats(result: dict, out_dir: Path) -> Path:
    """stats.json in out_dir (created when missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats_path = out_dir / STATS_FILE
    stats_path.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return stats_path


# --- a hypotheses file


class HypothesisEntry(BaseModel):
    """One entry of the file; the fields of `stats.hypotheses.Hypothesis`, checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    pairs: tuple[tuple[str, str], ...] = Field(min_length=1)
    metrics: tuple[str, ...] = Field(min_length=1)
    direction: Direction = "two-sided"
    combine: Combine = "all"

    @field_validator("pairs")
    @classmethod
    def _pairs_of_distinct_systems(cls, pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        same = [pair for pair in pairs if pair[0] == pair[1]]
        if same:
            raise ValueError(f"a pair compares a system with itself: {same}")
        return pairs

    @field_validator("metrics")
    @classmethod
    def _distinct_metrics(cls, metrics: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics are listed more than once: {list(metrics)}")
        return metrics


class HypothesesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hypotheses: tuple[HypothesisEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> HypothesesFile:
        names = [h.name for h in self.hypotheses]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"hypothesis names must be unique; repeated: {repeated}")
        return self

    def hypothesis_set(self) -> HypothesisSet:
        return HypothesisSet(tuple(Hypothesis(**entry.model_dump()) for entry in self.hypotheses))


def load_hypotheses(path: str | Path) -> HypothesisSet:
    """Read and validate a hypotheses YAML file (StatsInputError, one line, naming what is wrong)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise StatsInputError(f"cannot read hypotheses file {path}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        raise StatsInputError(f"hypotheses file {path} is not valid YAML: {error}") from error
    try:
        return HypothesesFile.model_validate(raw).hypothesis_set()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
            for item in error.errors()
        )
        raise StatsInputError(f"hypotheses file {path} is invalid: {problems}") from error
