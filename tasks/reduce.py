"""The final reducer stage: per-sample scores -> CCRS statistics (stats/ does the math)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from judges.suite import metric_order, suites
from stats.analysis import compute_all, unscored_result
from tasks.hypotheses_io import load_hypotheses
from tasks.report import concat_scores, load_scores, write_outputs
from tasks.stage import StageResult, code_version, file_fingerprint, run_stage, stage_key

if TYPE_CHECKING:
    from tasks.verdict import VerdictSection


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
) -> StageResult:
    membership = suite_membership()
    config = {"b": b, "seed": seed, "alpha": alpha, "hypotheses": _hypotheses_text(hypotheses_path),
              "suites": membership}
    key = stage_key("reduce", config, [file_fingerprint(path) for path in scores_paths],
                    code_version(__name__))

    def reduce_scores(out_dir: Path) -> dict:
        scores = concat_scores([load_scores(path) for path in scores_paths])
        if scores.empty:  # every judgment failed: the verdict is the failure report (tasks/verdict.py)
            result = unscored_result(b, seed, alpha, UNSCORED_NOTE)
        else:
            hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path else None
            result = compute_all(scores, hypotheses=hypotheses, b=b, seed=seed, alpha=alpha,
                                 metric_order=metric_order(), metric_suites=membership)
        written = write_outputs(result, scores, out_dir)
        return {
            "n_queries": result["n_queries"],
            "systems": result["systems"],
            "metrics": result["metrics"],
            "hypotheses": result.get("hypotheses", {}),
            "files": [str(path.relative_to(out_dir)) for path in written],
        }

    return run_stage(run_dir, "reduce", key, reduce_scores, force=force)


def reduce_user_scores(scores: pd.DataFrame, out_dir: Path, *, scale: tuple[float, float] | None = None,
                       hypotheses_path: str | Path | None = None, b: int = 10_000, seed: int = 0,
                       alpha: float = 0.05, title: str = "your scores", on_metric=None,
                       sections: Sequence[VerdictSection] = ()) -> tuple[dict, list[Path], str]:
    """Scores the user brings (`ccrs stats`, `ccrs_eval.compute_stats`): long or wide, on [0, 1] or on
    `scale`, through the same statistics as a run; writes stats.json, tables/, plots/ and the verdict
    (summary.md, with the caller's added `sections`) into out_dir. The user's metric names are theirs: no
    judge suite is attached to them."""
    from tasks.layout import SUMMARY_FILE
    from tasks.verdict import build_stats_summary

    frame = user_scores(scores, scale)
    hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path is not None else None
    result = compute_all(frame, hypotheses, b=b, seed=seed, alpha=alpha, on_metric=on_metric,
                         metric_order=metric_order(), metric_suites={})
    written = write_outputs(result, frame, out_dir)
    verdict = build_stats_summary(result, title, str(hypotheses_path) if hypotheses_path else None, sections)
    summary = Path(out_dir) / SUMMARY_FILE
    summary.write_text(verdict)
    return result, [*written, summary], verdict


def user_scores(scores: pd.DataFrame, scale: tuple[float, float] | None = None) -> pd.DataFrame:
    """Validated long-format scores on [0, 1] from the user's long or wide table (StatsInputError, one
    line, on anything else)."""
    from stats.scores import long_scores, rescale_scores, validate_scores

    frame = long_scores(scores)
    return validate_scores(rescale_scores(frame, *scale) if scale is not None else frame)


def suite_membership() -> dict[str, list[str]]:
    """{suite: its metric names} from the judge registry, as plain data for stats/ (which imports nothing
    of the project): it groups the discriminative power comparison (the CCRS paper's Table 3)."""
    return {name: list(suite.metrics) for name, suite in suites().items()}


def _hypotheses_text(path: str | None) -> str | None:
    return Path(path).read_text() if path else None
