import numpy as np
import pandas as pd
import pytest


def make_scores(
    n_queries=40, systems=("A", "B", "C"), metrics=("CC", "QR"), effects=None, seed=0
) -> pd.DataFrame:
    """Long-format scores; effects maps system -> shift added to every score (then clipped to [0, 1])."""
    rng = np.random.default_rng(seed)
    effects = effects or {}
    rows = []
    for q in range(n_queries):
        base = rng.random()
        for system in systems:
            for metric in metrics:
                score = np.clip(0.6 * base + 0.4 * rng.random() + effects.get(system, 0.0), 0, 1)
                rows.append((f"q{q:03d}", system, metric, round(float(score), 2)))
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"])


@pytest.fixture
def scores() -> pd.DataFrame:
    return make_scores()
