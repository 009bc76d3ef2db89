import numpy as np

from pipelines.tools.planning.power import metric_plan


def test_systems_with_equal_means_still_plant_the_effect_on_two_distinct_systems():
    # Every system's mean is 0.5, yet the questions disagree: noise to plan from, no best or worst.
    matrix = np.array([[0.4, 0.6, 0.5], [0.6, 0.4, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
    assert len(set(matrix.mean(axis=0))) == 1
    plan = metric_plan(matrix, ("A", "B", "C"), delta=0.2, power=0.8, alpha=0.05, b=200, replicates=20,
                       rng=np.random.default_rng(0))
    for requirement in plan["requirements"].values():
        first, second = requirement["simulated_pair"]
        assert first != second
        assert requirement["target_reached"] in (True, False)
