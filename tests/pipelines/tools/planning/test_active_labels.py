"""`ccrs plan labels --design active`: the forecast (pipelines/tools/planning/active_labels.py) checked by
simulation: with the judge's error sd proportional to its uncertainty, the active design at the forecast
budget estimates the mean as precisely as uniform labeling at the uniform plan's n, with fewer labels."""
from __future__ import annotations

import numpy as np
import pytest

from pipelines.tools.labeling.design import FLOOR_SHARE
from pipelines.tools.planning.active_labels import active_labels
from stats.active import active_ppi_batch, sampling_probabilities


def simulated_sd(errors: np.ndarray, judged: np.ndarray, probabilities: np.ndarray, rng, sets: int) -> float:
    """The sd over `sets` draws of the IPW estimate (predictor the judge itself: lam 1, offset 0)."""
    drawn = rng.random((sets, errors.size)) < probabilities
    labels = np.where(drawn, judged + errors, np.nan)
    batch = active_ppi_batch(labels, np.broadcast_to(judged, labels.shape), probabilities, lam=1.0,
                             offset=0.0)
    return float(batch.estimate.std())


def test_the_forecast_matches_uniform_precision_with_fewer_labels_in_simulation():
    rng = np.random.default_rng(0)
    n, uniform_n = 1000, 200
    uncertainty = rng.lognormal(-2.5, 1.0, n)
    errors = rng.normal(0.0, uncertainty)  # the judge's error, sd its uncertainty
    judged = rng.uniform(0.2, 0.8, n)
    forecast = active_labels(uniform_n, uncertainty, n)
    assert forecast < 0.8 * uniform_n  # an uneven uncertainty: fewer labels
    active = sampling_probabilities(uncertainty, forecast, FLOOR_SHARE * forecast / n).probabilities
    uniform_sd = simulated_sd(errors, judged, np.full(n, uniform_n / n), rng, 4000)
    active_sd = simulated_sd(errors, judged, active, rng, 4000)
    assert active_sd <= 1.05 * uniform_sd  # as precise, within the simulation's noise
    smaller = sampling_probabilities(uncertainty, 0.8 * forecast, FLOOR_SHARE * 0.8 * forecast / n)
    # and not more than needed
    assert simulated_sd(errors, judged, smaller.probabilities, rng, 4000) > uniform_sd


@pytest.mark.parametrize(("uniform_n", "uncertainty", "expected"), [
    (None, np.ones(10), None),        # uniform cannot reach the target: nor can active
    (50, np.ones(100), 50),           # a flat uncertainty: nothing to save
    (120, np.arange(100.0), 120),     # labeling every question anyway
    (30, None, 30),                   # no uncertainty to use (rho = 0): uniform's
])
def test_the_forecast_saves_nothing_where_there_is_nothing_to_save(uniform_n, uncertainty, expected):
    assert active_labels(uniform_n, uncertainty, 100) == expected
