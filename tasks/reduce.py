"""The final reducer stage: per-sample scores -> CCRS statistics (stats/ does the math).

Its code key covers the statistics and the scores they read only: the metric order and the suites'
metrics come in as data from the caller (the judge registry), and the tables/ and plots/ beside
stats.json are reporting that the caller writes after the stage (pipelines/reporting/report.py)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from stats.analysis import compute_all, unscored_result
from tasks.hypotheses_io import load_hypotheses
from tasks.scores_io import concat_scores, load_scores, write_stats
from tasks.stage import StageResult, code_version, file_fingerprint, run_stage, stage_key

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
) -> StageResult:
    """`metric_order`: every metric's place in the tables (judges.suite.metric_order()); `suites`: {suite:
    its metric names} (judges.suite.suite_membership()), which groups the discriminative power comparison
    (the CCRS paper's Table 3)."""
    membership = {name: list(metrics) for name, metrics in suites.items()}
    config = {"b": b, "seed": seed, "alpha": alpha, "hypotheses": _hypotheses_text(hypotheses_path),
              "suites": membership, "metric_order": list(metric_order)}
    key = stage_key("reduce", config, [file_fingerprint(path) for path in scores_paths],
                    code_version(__name__))

    def reduce_scores(out_dir: Path) -> dict:
        scores = concat_scores([load_scores(path) for path in scores_paths])
        if scores.empty:  # every judgment failed: the verdict is the failure report (pipelines/reporting/)
            result = unscored_result(b, seed, alpha, UNSCORED_NOTE)
        else:
            hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path else None
            result = compute_all(scores, hypotheses=hypotheses, b=b, seed=seed, alpha=alpha,
                                 metric_order=list(metric_order), metric_suites=membership)
        written = write_stats(result, out_dir)
        return {
            "n_queries": result["n_queries"],
            "systems": result["systems"],
            "metrics": result["metrics"],
            "hypotheses": result.get("hypotheses", {}),
            "files": [str(written.relative_to(out_dir))],
        }

    return run_stage(run_dir, "reduce", key, reduce_scores, force=force)


def _hypotheses_text(path: str | None) -> str | None:
    return Path(path).read_text() if path else None
