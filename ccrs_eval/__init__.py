"""ccrs-eval's Python API, for notebooks and scripts.

    from ccrs_eval import evaluate
    result = evaluate("my_outputs.jsonl", limit=20)      # or a list of files, a DataFrame, a list of dicts
    result.scores        # DataFrame: question_id, system, metric, score (0-1), suite
    result.judgments     # every judgment: raw reply, status, reason, tokens
    result.stats         # stats.json: means, bootstrap CIs, Tukey HSD p-values, DP, hypotheses (Holm)
    print(result.verdict)

`compute_stats(scores)` gives the same statistics for scores you already have. The same machinery backs
`ccrs evaluate` and `ccrs stats` (README: "Evaluate your own system").
"""
from __future__ import annotations

from ccrs_eval.api import EvaluationInputError, EvaluationResult, StatsResult, compute_stats, evaluate

__all__ = ["evaluate", "compute_stats", "EvaluationResult", "StatsResult", "EvaluationInputError"]
