"""stats/ppi.py against the PPI authors' library ppi_py (ppi-python 0.2.3) on the same data.

Data: the real pilot scores of data/bioasq-sample-pilot/extractive_scores.parquet (32 BioASQ 12b questions,
six extractive systems): token_f1 plays the judge, token_recall the human labels; a seeded random subset
is labeled. Clipping cases use seeded numpy simulations (named in each test).

What is compared, and the one known difference: point estimates and power-tuned lam agree to rounding.
ppi_py's ppi_mean_ci takes np.std (ddof=0) for both variance terms, stats/ppi.py the unbiased ddof=1
variance; so our se^2 = rectifier^2 * n / (n - 1) + imputed^2 * N / (N - 1), where rectifier and
imputed are ppi_py's own two terms (read off ppi_py by calling it once with the unlabeled scores zeroed,
which leaves the rectifier term alone). That factor is applied exactly and the comparison is tight.

Our default interval (stats.ppi.SMALL_SAMPLE: a t quantile, lam 0 below TUNE_LAM_FROM labels, the score
interval on a known scale) is not ppi_py's; rule=PUBLISHED is the published one, and is what is compared
here: the same estimate, lam and standard error, the z interval.

ppi_py clips the power-tuned lam to [0, 1] in ppi_mean_pointestimate and ppi_mean_ci (clip=True), as
stats.ppi.power_tuned_lam does; its ppi_mean_pval (lam=None) calls _calc_lam_glm without clip, so where
the unclipped lam leaves [0, 1] ppi_py's p-value is computed at a different lam than its own interval
(a discrepancy inside ppi_py; ours uses the clipped lam for the estimate, interval and p-value alike)."""
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipelines.config import REPO_ROOT
from stats.ppi import PUBLISHED, ppi_mean, ppi_paired_difference

with warnings.catch_warnings():  # ppi_py.ppi calls warnings.simplefilter("ignore") when imported
    import ppi_py
    from ppi_py.ppi import _calc_lam_glm

PILOT = REPO_ROOT / "data" / "bioasq-sample-pilot" / "extractive_scores.parquet"
EXACT = 1e-10


@pytest.fixture(scope="module")
def pilot() -> pd.DataFrame:
    """(query_id, system) rows with the token_recall ("labels") and token_f1 ("judge") columns."""
    scores = pd.read_parquet(PILOT)
    return scores.pivot_table(index=["query_id", "system"], columns="metric", values="score").reset_index()


def labeled_split(pilot: pd.DataFrame, n_labeled: int, seed: int):
    rows = np.random.default_rng(seed).permutation(len(pilot))
    labels, judged = pilot["token_recall"].to_numpy(), pilot["token_f1"].to_numpy()
    return labels[rows[:n_labeled]], judged[rows[:n_labeled]], judged[rows[n_labeled:]]


def ppi_py_lam(y, f, f_unlabeled, clip: bool = True) -> float:
    """The lam ppi_py's ppi_mean_ci tunes (0.2.3): _calc_lam_glm on the gradients at the lam = 1 estimate."""
    point = ppi_py.ppi_mean_pointestimate(y, f, f_unlabeled, lam=1)
    return float(_calc_lam_glm(y - point, f - point, f_unlabeled - point, np.eye(1), clip=clip))


def ppi_py_interval(y, f, f_unlabeled, alpha: float, lam: float | None) -> tuple[float, float]:
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabeled, alpha=alpha, lam=lam)
    return float(low[0]), float(high[0])


def expected_se(y, f, f_unlabeled, alpha: float, lam: float) -> tuple[float, float]:
    """(ppi_py's se, the se with ddof=1 variances) from ppi_py's own two variance terms."""
    z = stats.norm.ppf(1 - alpha / 2)
    low, high = ppi_py_interval(y, f, f_unlabeled, alpha, lam)
    total = (high - low) / (2 * z)
    low, high = ppi_py_interval(y, f, np.zeros_like(f_unlabeled), alpha, lam)  # imputed term 0
    rectifier = (high - low) / (2 * z)
    imputed_sq = total**2 - rectifier**2
    n, big_n = y.size, f_unlabeled.size
    return total, float(np.sqrt(rectifier**2 * n / (n - 1) + imputed_sq * big_n / (big_n - 1)))


def assert_matches_ppi_py(ours, y, f, f_unlabeled, alpha: float, lam: float | None):
    point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, f_unlabeled, lam=lam)))
    assert ours.estimate == pytest.approx(point, abs=EXACT)
    if lam is None:
        assert ours.lam == pytest.approx(ppi_py_lam(y, f, f_unlabeled), abs=EXACT)
        # ppi_py's power-tuned interval is the one at that lam
        assert ppi_py_interval(y, f, f_unlabeled, alpha, None) == pytest.approx(
            ppi_py_interval(y, f, f_unlabeled, alpha, ours.lam), abs=EXACT)
    se_ppi_py, se_ddof1 = expected_se(y, f, f_unlabeled, alpha, ours.lam)
    assert ours.se == pytest.approx(se_ddof1, rel=EXACT)
    n = y.size
    assert se_ppi_py <= ours.se <= se_ppi_py * np.sqrt(n / (n - 1)) * (1 + EXACT)
    half = stats.norm.ppf(1 - alpha / 2) * ours.se
    assert ours.ci == pytest.approx((ours.estimate - half, ours.estimate + half), abs=EXACT)


@pytest.mark.parametrize("lam", [None, 1.0, 0.0], ids=["power-tuned", "original PPI", "labels only"])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_mean_matches_ppi_py_on_the_real_pilot(pilot, lam, alpha):
    # 40 of the 192 (question, system) answers labeled, the other 152 judged only
    y, f, f_unlabeled = labeled_split(pilot, 40, seed=0)
    ours = ppi_mean(y, f, f_unlabeled, alpha=alpha, lam=lam, rule=PUBLISHED)
    assert_matches_ppi_py(ours, y, f, f_unlabeled, alpha, lam)
    if lam == 0.0:  # no imputed term: the whole difference is sqrt(n / (n - 1))
        se_ppi_py, _ = expected_se(y, f, f_unlabeled, alpha, 0.0)
        assert ours.se == pytest.approx(se_ppi_py * np.sqrt(40 / 39), rel=EXACT)
    if lam is None:
        assert 0.0 < ours.lam < 1.0  # the data sit inside the clip: a real tuning, not a bound


def test_paired_difference_matches_ppi_py_on_the_differences(pilot):
    # ppi_py has no paired difference: it is the PPI++ mean of the per-question differences a - b
    wide = {metric: pilot.pivot(index="query_id", columns="system", values=metric)
            for metric in ("token_recall", "token_f1")}
    rows = np.random.default_rng(1).permutation(len(wide["token_f1"]))
    labeled, unlabeled = rows[:14], rows[14:]
    y_a, y_b = (wide["token_recall"][s].to_numpy() for s in ("A", "C"))
    f_a, f_b = (wide["token_f1"][s].to_numpy() for s in ("A", "C"))
    ours = ppi_paired_difference(y_a[labeled], y_b[labeled], f_a[labeled], f_b[labeled], f_a[unlabeled],
                                 f_b[unlabeled], rule=PUBLISHED)
    differences = (y_a - y_b)[labeled], (f_a - f_b)[labeled], (f_a - f_b)[unlabeled]
    assert_matches_ppi_py(ours, *differences, alpha=0.05, lam=None)
    assert ours.p_value == pytest.approx(2 * stats.norm.sf(abs(ours.estimate) / ours.se))


def test_lam_clipped_to_one_as_ppi_py_does_when_the_judge_compresses_the_scale():
    # seeded simulation: the judge reports a third of the human score plus a little noise, so the unclipped
    # lam Cov(Y, f) / ((1 + n/N) Var(f)) is about 3 / 1.25
    rng = np.random.default_rng(2)
    y = rng.uniform(0, 1, 300)
    f = y / 3 + rng.normal(0, 0.02, 300)
    labeled, unlabeled = slice(0, 60), slice(60, None)
    assert ppi_py_lam(y[labeled], f[labeled], f[unlabeled], clip=False) > 1.5
    ours = ppi_mean(y[labeled], f[labeled], f[unlabeled], rule=PUBLISHED)
    assert ours.lam == 1.0 == ppi_py_lam(y[labeled], f[labeled], f[unlabeled])
    assert_matches_ppi_py(ours, y[labeled], f[labeled], f[unlabeled], 0.05, None)


def test_lam_clipped_to_zero_for_a_judge_that_disagrees_and_ppi_py_pval_does_not_clip():
    # seeded simulation: the judge's score falls as the human's rises (unclipped lam < 0)
    rng = np.random.default_rng(3)
    y = rng.uniform(0, 1, 300)
    f = 1 - y + rng.normal(0, 0.1, 300)
    y_l, f_l, f_u = y[:60], f[:60], f[60:]
    unclipped = ppi_py_lam(y_l, f_l, f_u, clip=False)
    assert unclipped < -0.5
    ours = ppi_mean(y_l, f_l, f_u, null=0.5, rule=PUBLISHED)
    assert ours.lam == 0.0 == ppi_py_lam(y_l, f_l, f_u)
    assert_matches_ppi_py(ours, y_l, f_l, f_u, 0.05, None)
    # ppi_py's ppi_mean_pval(lam=None) tunes lam without clipping (0.2.3): its p-value is the one at the
    # unclipped lam, not at the lam of its own interval; ours is at the clipped lam (with ddof=1 variances)
    p_value = float(np.squeeze(ppi_py.ppi_mean_pval(y_l, f_l, f_u, null=0.5)))
    at_unclipped = float(np.squeeze(ppi_py.ppi_mean_pval(y_l, f_l, f_u, null=0.5, lam=unclipped)))
    at_clipped = float(np.squeeze(ppi_py.ppi_mean_pval(y_l, f_l, f_u, null=0.5, lam=0.0)))
    assert p_value == pytest.approx(at_unclipped, rel=1e-9)
    assert p_value != pytest.approx(at_clipped, rel=1e-3)
    se_ppi_py, _ = expected_se(y_l, f_l, f_u, 0.05, 0.0)
    assert at_clipped == pytest.approx(2 * stats.norm.sf(abs(ours.estimate - 0.5) / se_ppi_py), rel=1e-9)
