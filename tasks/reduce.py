"""The final reducer stage: per-sample scores -> CCRS statistics (stats/ does the math)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from judges.suite import metric_order
from stats.hypotheses import load_hypotheses
from stats.report import compute_all, load_scores, write_outputs
from tasks.stage import StageResult, code_version, file_fingerprint, run_stage, stage_key


def run_reduce(
    run_dir: Path,
    scores_paths: list[Path],
    b: int,
    seed: int,
    alpha: float,
    hypotheses_path: str | None = None,
    force: bool = False,
) -> StageResult:
    config = {"b": b, "seed": seed, "alpha": alpha, "hypotheses": _hypotheses_text(hypotheses_path)}
    key = stage_key("reduce", config, [file_fingerprint(path) for path in scores_paths],
                    code_version(__name__))

    def reduce_scores(out_dir: Path) -> dict:
        scores = pd.concat([load_scores(path) for path in scores_paths], ignore_index=True)
        hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path else None
        result = compute_all(scores, hypotheses=hypotheses, b=b, seed=seed, alpha=alpha,
                             metric_order=metric_order())
        written = write_outputs(result, scores, out_dir)
        return {
            "n_queries": result["n_queries"],
            "systems": result["systems"],
            "metrics": result["metrics"],
            "hypotheses": result.get("hypotheses", {}),
            "files": [str(path.relative_to(out_dir)) for path in written],
        }

    return run_stage(run_dir, "reduce", key, reduce_scores, force=force)


def _hypotheses_text(path: str | None) -> str | None:
    return Path(path).read_text() if path else None
