"""RAGChecker-style baseline over samples (judges/ragchecker.py), fanned out through the shared client."""
from __future__ import annotations

import json

import pandas as pd

from judges.client import LLMClient
from judges.config import ClientConfig
from judges.ragchecker import METRICS, RagCheckerConfig, RagCheckerInput, check_sample


def run_ragchecker(samples: list[RagCheckerInput], cfg: RagCheckerConfig, client_cfg: ClientConfig,
                   base_url: str) -> pd.DataFrame:
    """Judgments frame: query_id, system, metric, score (None = not computable), reason, and per-sample usage
    (calls/tokens on the rc_precision row only, so sums over the frame count each call once)."""
    with LLMClient(client_cfg, base_url) as client:
        results = client.map(lambda s: check_sample(client, cfg, s), samples)
    rows = []
    for r in results:
        for metric in METRICS:
            first = metric == METRICS[0]
            rows.append({"query_id": r.query_id, "system": r.system, "metric": metric, "score": r.scores[metric],
                         "reason": r.reasons[metric], "calls": r.calls if first else 0,
                         "prompt_tokens": r.prompt_tokens if first else 0,
                         "completion_tokens": r.completion_tokens if first else 0,
                         "detail": json.dumps(r.detail, default=str) if first else None})
    return pd.DataFrame(rows)
