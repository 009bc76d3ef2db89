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


def make_repeated_scores(n_queries=30, systems=("A", "B", "C"), metrics=("CC",), n_repeats=3,
                         effects=None, judge_sd=0.08, seed=0) -> pd.DataFrame:
    """Long-format scores with a `repeat` column: each (query, system) answer has a true score (query
    difficulty + system effect + its own deviation) and every metric judges it n_repeats times with
    independent judge noise of sd judge_sd (clipped to [0, 1])."""
    rng = np.random.default_rng(seed)
    effects = effects or {}
    rows = []
    for q in range(n_queries):
        base = rng.uniform(0.3, 0.7)
        for system in systems:
            answer = base + effects.get(system, 0.0) + rng.normal(0, 0.05)
            for metric in metrics:
                for repeat in range(n_repeats):
                    score = float(np.clip(answer + rng.normal(0, judge_sd), 0, 1))
                    rows.append((f"q{q:03d}", system, metric, score, repeat))
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score", "repeat"])
