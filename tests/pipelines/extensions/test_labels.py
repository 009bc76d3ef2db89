"""The human-labels extension (pipelines/extensions/labels.py): its MLflow metrics and its gate cells (both
nights labeled: decided on the human scale)."""
import numpy as np
import pandas as pd
import pytest


def test_a_systems_human_calibrated_figures_become_mlflow_metrics():
    from pipelines.extensions.labels import human_calibrated_metrics

    block = {"n_labels": {"A": 12, "B": 3}, "means": {"A": 0.6}, "ci95": {"A": [0.5, 0.7]},
             "judge_bias": {"A": 0.1, "B": -0.2}, "pairwise": []}
    stats = {"per_metric": {"CC": {"human_calibrated": block}, "QR": {}}}
    assert human_calibrated_metrics(stats, "A") == {"CC_human_labels": 12.0, "CC_human": 0.6,
                                                    "CC_human_ci_low": 0.5, "CC_human_ci_high": 0.7,
                                                    "CC_judge_bias": 0.1}
    assert human_calibrated_metrics(stats, "B") == {"CC_human_labels": 3.0, "CC_judge_bias": -0.2}


def _human_stats(means: dict, ci95: dict, n_labels: dict | None = None) -> dict:
    block = {"means": means, "ci95": ci95, "n_labels": n_labels or {s: 12 for s in means},
             "label_step": {s: 0.25 for s in means}}
    return {"per_metric": {"CC": {"human_calibrated": block}, "QR": {}}}


def test_cells_both_nights_labeled_are_tested_on_the_human_scale():
    """run 0.6 [0.5, 0.7] from 12 labels, baseline 0.7 [0.6, 0.8] from 10, both on a 1-5 scale (step 0.25):
    se 0.2 / (2 * 1.96) each, |diff| 0.1 less 0.25 / 24 + 0.25 / 20, Welch df 4 / (1/11 + 1/9)."""
    from scipy import stats

    from pipelines.extensions.labels import human_calibrated_cells

    run = _human_stats({"A": 0.6, "B": 0.5}, {"A": [0.5, 0.7], "B": [0.4, 0.6]}, {"A": 12, "B": 12})
    base = _human_stats({"A": 0.7}, {"A": [0.6, 0.8]}, {"A": 10})
    cells = human_calibrated_cells(run, base)
    assert cells[["system", "metric"]].values.tolist() == [["A", "CC"]]  # B: no baseline labels
    se = 0.2 / (2 * stats.norm.ppf(0.975))  # each interval 0.2 wide
    shrunk = 0.1 - (0.25 / 24 + 0.25 / 20)
    assert cells["human_diff"].iloc[0] == pytest.approx(-0.1)
    assert cells["human_p"].iloc[0] == pytest.approx(
        2 * stats.t.sf(shrunk / (np.sqrt(2) * se), 4 / (1 / 11 + 1 / 9)))
    assert human_calibrated_cells(run, None).empty and human_calibrated_cells(None, base).empty


@pytest.mark.parametrize(("labels", "n"), [("binary", 12), ("binary", 25), ("marks 1-5", 10)])
def test_the_human_scale_test_keeps_its_error_rate_at_the_fewest_labels(labels, n):
    """Two nights of the same quality (4,000 pairs, all answers labeled, 10 labels the fewest a mean is
    claimed from; binary at 12 and 25 labels was the worst case of the uncorrected test, 6.5%): rejections at
    alpha 0.05 stay under 5% (within 2 standard errors of the simulation)."""
    from pipelines.extensions.labels import human_calibrated_cells
    from stats.labels import label_step
    from stats.ppi import ppi_mean_batch

    rng, sets = np.random.default_rng(7), 4000
    levels = 2 if labels == "binary" else 5

    def nights():
        y = rng.integers(0, levels, size=(sets, n)) / (levels - 1)
        f = np.clip(y + rng.normal(0, 0.2, size=y.shape), 0, 1)
        batch = ppi_mean_batch(y, f, f[:, :0], 0.05, bounds=(0.0, 1.0))
        return [{"per_metric": {"CC": {"human_calibrated": {
            "means": {"A": batch.estimate[i]}, "ci95": {"A": [batch.low[i], batch.high[i]]},
            "n_labels": {"A": n}, "label_step": {"A": label_step(y[i])}}}}} for i in range(sets)]

    p_values = [human_calibrated_cells(a, b)["human_p"].iloc[0] for a, b in zip(nights(), nights())]
    assert np.mean(np.array(p_values) < 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / sets)


def test_the_baselines_stats_are_fetched_only_for_a_night_with_human_calibrated_cells():
    from pipelines.extensions.labels import has_human_calibrated

    assert has_human_calibrated(_human_stats({"A": 0.6}, {"A": [0.5, 0.7]}))
    assert not has_human_calibrated({"per_metric": {"CC": {"means": {"A": 0.6}}, "QR": {}}})
    assert not has_human_calibrated(None) and not has_human_calibrated({})


def test_a_human_calibrated_cell_is_decided_by_its_human_test_with_holm_over_every_cell():
    from pipelines.extensions.labels import with_human_calibrated

    table = pd.DataFrame({"system": ["A", "A"], "metric": ["CC", "QR"], "n": [30, 30], "diff": [0.01, -0.2],
                          "p_value": [0.8, 0.001], "adjusted_p": [0.8, 0.002], "significant": [False, True],
                          "verdict": ["same", "regression"]})
    human = pd.DataFrame({"system": ["A"], "metric": ["CC"], "human_diff": [-0.3], "human_p": [0.01]})
    gated = with_human_calibrated(table, human, 0.05)
    assert gated["basis"].tolist() == ["human", "judge"]
    assert gated["diff"].tolist() == [-0.3, -0.2] and gated["judge_diff"].tolist() == [0.01, -0.2]
    assert gated["adjusted_p"].tolist() == pytest.approx([0.01 * 1, 0.001 * 2])
    assert gated["verdict"].tolist() == ["regression", "regression"]
    assert with_human_calibrated(table, human.iloc[:0], 0.05) is table


def test_require_human_holds_each_judge_regression_until_both_nights_labels_decide_it():
    """(A, CC) failed on the judge scale, tonight has no human mean of it: held, tonight named; (B, CC) was
    decided on the human scale: kept; (A, QR) did not fail: kept. Without the option nothing changes."""
    from pipelines.extensions.labels import AWAITING, require_human
    from pipelines.extensions.registry import GateInputs

    table = pd.DataFrame({"system": ["A", "A", "B"], "metric": ["CC", "QR", "CC"],
                          "basis": ["judge", "judge", "human"],
                          "verdict": ["regression", "same", "regression"]})
    run = _human_stats({"B": 0.5}, {"B": [0.4, 0.6]})
    base = _human_stats({"A": 0.7, "B": 0.7}, {"A": [0.6, 0.8], "B": [0.6, 0.8]})
    required = GateInputs(run, lambda: base, "base", 0.05, options={"labels": {"require_human": True}})
    held = require_human(table, required)
    assert held["verdict"].tolist() == [AWAITING.verdict, "same", "regression"]
    assert held["needs_labels"].tolist() == ["tonight", "", ""]
    unlabeled = GateInputs(None, lambda: None, "base", 0.05, options={"labels": {"require_human": True}})
    assert require_human(table.drop(columns="basis"), unlabeled)["needs_labels"].tolist() == [
        "tonight, baseline", "", "tonight, baseline"]
    assert require_human(table, GateInputs(run, lambda: base, "base", 0.05)) is table
    assert (AWAITING.status, AWAITING.exit_code) == ("awaiting_labels", 7)
