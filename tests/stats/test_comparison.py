import pytest

from stats.comparison import COMPARISON_COLUMNS, discriminative_power_comparison
from stats.errors import StatsInputError
from stats.analysis import compute_all
from tests.stats.conftest import make_scores


def _entry(p_values, alpha=0.05, n_used=10):
    """A per_metric entry as compute_all builds it, from its pairwise p-values (None: no complete query)."""
    pairwise = [{"p_value": p, "significant": p is not None and p <= alpha} for p in p_values]
    defined = p_values and p_values[0] is not None
    power = sum(pair["significant"] for pair in pairwise) / len(pairwise) if defined else None
    return {"pairwise": pairwise, "discriminative_power": power, "n_used": n_used if defined else 0}


PER_METRIC = {
    "CC": _entry([0.01, 0.20, 0.60]),         # 1 of 3 significant, median p 0.20
    "QR": _entry([0.00, 0.04, 0.30]),         # 2 of 3, median 0.04
    "rc_recall": _entry([0.01, 0.02, 0.05]),  # 3 of 3 (p = alpha counts), median 0.02
    "rc_precision": _entry([0.50, 0.90, 1.0]),  # 0 of 3, median 0.9
    "extra": _entry([None, None, None]),      # no complete query
}
SUITES = {"ccrs": ["CC", "QR", "ID"], "grouse": ["g1"], "ragchecker": ["rc_precision", "rc_recall"]}


def test_rows_grouped_by_suite_ranked_by_power_by_hand():
    rows = discriminative_power_comparison(PER_METRIC, SUITES)
    assert [(r["suite"], r["metric"], r["rank"]) for r in rows] == [
        ("ccrs", "QR", 1), ("ccrs", "CC", 2),
        ("ragchecker", "rc_recall", 1), ("ragchecker", "rc_precision", 2),
        (None, "extra", 1),
    ]
    by_metric = {r["metric"]: r for r in rows}
    assert (by_metric["QR"]["significant_pairs"], by_metric["QR"]["pairs"]) == (2, 3)
    assert by_metric["QR"]["discriminative_power"] == pytest.approx(2 / 3)
    assert by_metric["rc_recall"]["discriminative_power"] == 1.0
    assert by_metric["rc_precision"]["discriminative_power"] == 0.0
    assert [by_metric[m]["median_asl"] for m in ("CC", "QR", "rc_recall", "rc_precision")] == [
        0.20, 0.04, 0.02, 0.9]
    assert by_metric["extra"]["discriminative_power"] is None and by_metric["extra"]["median_asl"] is None
    assert all(tuple(row) == COMPARISON_COLUMNS for row in rows)


def test_ties_keep_the_given_metric_order():
    per_metric = {"B": _entry([0.01, 0.5]), "A": _entry([0.5, 0.01])}
    assert [r["metric"] for r in discriminative_power_comparison(per_metric, {"s": ["A", "B"]})] == ["B", "A"]


def test_a_metric_under_two_suites_is_an_error():
    with pytest.raises(StatsInputError, match="'CC' is listed under two suites"):
        discriminative_power_comparison(PER_METRIC, {"ccrs": ["CC"], "other": ["CC"]})


def test_compute_all_reports_the_comparison_from_the_same_hsd():
    scores = make_scores(n_queries=30, metrics=("CC", "rc_recall", "zeta"), effects={"C": 0.2})
    result = compute_all(scores, b=200, metric_suites={"ccrs": ["CC", "QR"], "ragchecker": ["rc_recall"]})
    rows = result["discriminative_power_comparison"]
    assert [(r["suite"], r["metric"]) for r in rows] == [("ccrs", "CC"), ("ragchecker", "rc_recall"),
                                                         (None, "zeta")]
    for row in rows:
        entry = result["per_metric"][row["metric"]]
        assert row["discriminative_power"] == entry["discriminative_power"]
        assert row["significant_pairs"] == sum(p["significant"] for p in entry["pairwise"])
    assert [r["suite"] for r in compute_all(scores, b=20)["discriminative_power_comparison"]] == [None] * 3
