import numpy as np
import pandas as pd
import pytest

from pipelines.tools.regression import RegressionError, paired_table


def _scores(rng, shift_cell=None, shift=0.0):
    rows = []
    base = rng.uniform(0.2, 0.8, size=(60, 2, 2))
    for q in range(60):
        for s, system in enumerate("AB"):
            for m, metric in enumerate(["CC", "IR"]):
                score = base[q, s, m]
                if (system, metric) == shift_cell:
                    score = np.clip(score + shift, 0, 1)
                rows.append({"query_id": f"q{q}", "system": system, "metric": metric, "score": score})
    return pd.DataFrame(rows)


def test_planted_drop_is_a_regression_and_the_rest_unchanged():
    baseline = _scores(np.random.default_rng(0))
    noise = np.random.default_rng(1).normal(0, 0.01, size=len(baseline))
    current = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.15)
    current["score"] = np.clip(current["score"] + noise, 0, 1)
    table = paired_table(current, baseline, alpha=0.05, b=2000, seed=0).set_index(["system", "metric"])
    assert table.loc[("B", "IR"), "verdict"] == "regression"
    assert (table.drop(index=[("B", "IR")])["verdict"] == "same").all()
    assert table["n"].eq(60).all()


def test_runs_without_common_judgments_are_an_error():
    rng = np.random.default_rng(0)
    current = _scores(rng)
    baseline = current.assign(query_id=current["query_id"] + "-other")
    with pytest.raises(RegressionError, match="share no"):
        paired_table(current, baseline, alpha=0.05, b=100, seed=0)


def test_every_cell_reports_its_minimum_detectable_difference():
    baseline = _scores(np.random.default_rng(0))
    current = baseline.assign(score=np.clip(baseline["score"] + np.random.default_rng(2).normal(0, 0.05,
                                                                                               len(baseline)),
                                            0, 1))
    table = paired_table(current, baseline, alpha=0.05, b=500, seed=0)
    assert list(table.columns)[-1] == "mdd"
    # the noise sd is 0.05 per question: the MDD of 60 questions at alpha 0.05/4 and power 0.8 is about
    # (z_0.99375 + z_0.8) * 0.05 / sqrt(60) = 0.021
    assert table["mdd"].between(0.015, 0.03).all()
    small = paired_table(current[current["query_id"].isin(["q0", "q1", "q2", "q3"])],
                         baseline, alpha=0.05, b=500, seed=0)
    assert (small["mdd"] > 2 * table["mdd"].max()).all()  # a pass on a tiny subset says little
