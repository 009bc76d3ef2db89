"""Anytime-valid sequential decisions (stats/sequential.py): the kernel against reference values of
`confseq` (its betting_cs), exactness after all N questions, the seeded order, bad input, and simulations
with seeded generators: the family-wise error under no difference over whole runs, equivalence reached
under equal means, early separation of a large effect, coverage at every time, and the recorded pilot
against the full-data HSD. `pytest -s` prints the figures."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stats.analysis import compute_all
from stats.errors import StatsInputError
from stats.sequential import (DECISIONS, DEFAULT_TARGET, FINITE_POPULATION, confidence_sequence, decide,
                              replay, seeded_order, simulated_stops)

PILOT = Path(__file__).resolve().parents[2] / "data" / "bioasq-sample-pilot" / "extractive_scores.parquet"
ALPHA = 0.05

# confseq 0.0.11 (Waudby-Smith and Ramdas's package), computed once outside the suite:
# betting_cs((d + 1) / 2, alpha=0.1, N=40, breaks=2000, running_intersection=True, convex_comb=True,
# trunc_scale=0.5), mapped back to the difference scale (2 l - 1, 2 u - 1).
REFERENCE_D = np.array([0.25, 0.1, 0.3, -0.05, 0.2, 0.15, 0.35, 0.0, 0.2, 0.1, 0.25, 0.3, 0.15, 0.05, 0.2,
                        0.1, 0.3, 0.25, 0.2, 0.15])
REFERENCE_LOW = [-0.96875, -0.94125, -0.7, -0.611, -0.523, -0.452, -0.381, -0.34, -0.295, -0.26, -0.223,
                 -0.187, -0.162, -0.143, -0.121, -0.104, -0.082, -0.064, -0.048, -0.035]
REFERENCE_HIGH = [0.98125, 0.95875, 0.9, 0.722, 0.657, 0.604, 0.574, 0.527, 0.498, 0.467, 0.447, 0.433,
                  0.413, 0.392, 0.378, 0.361, 0.353, 0.345, 0.335, 0.325]
# the same with N=None (an infinite population), after 5, 10 and 20 values
REFERENCE_INFINITE = {5: (-0.562, 0.683), 10: (-0.319, 0.508), 20: (-0.112, 0.381)}


def ids(n: int) -> list[str]:
    return [f"q{i:04d}" for i in range(n)]


def correlated_scores(rng: np.random.Generator, n: int, effects, noise: float) -> np.ndarray:
    """(n, k) scores on [0, 1]: a question difficulty shared by the systems, each system's effect, noise."""
    difficulty = rng.beta(4, 2, size=(n, 1))
    return np.clip(difficulty + np.asarray(effects) + rng.normal(0.0, noise, (n, len(effects))), 0.0, 1.0)


def exact_null_scores(rng: np.random.Generator, blocks: int, k: int, noise: float) -> np.ndarray:
    """(blocks * k, k) scores whose k systems have exactly equal means over the questions: each block of k
    questions holds the k cyclic shifts of one question's scores, so every system gets every value once."""
    base = correlated_scores(rng, blocks, np.zeros(k), noise)
    shifts = [np.roll(base, shift, axis=1) for shift in range(k)]
    return np.stack(shifts, axis=1).reshape(blocks * k, k)


# --- the kernel ---------------------------------------------------------------------------------------

def test_kernel_matches_confseq_reference_values():
    low, high = confidence_sequence(REFERENCE_D[:, None], 40, 0.1)
    assert low[:, 0] == pytest.approx(REFERENCE_LOW, abs=1e-6)
    assert high[:, 0] == pytest.approx(REFERENCE_HIGH, abs=1e-6)


def test_kernel_matches_confseq_reference_values_for_an_infinite_population():
    low, high = confidence_sequence(REFERENCE_D[:, None], None, 0.1, times=sorted(REFERENCE_INFINITE))
    assert low[:, 0] == pytest.approx([low for low, _ in REFERENCE_INFINITE.values()], abs=1e-6)
    assert high[:, 0] == pytest.approx([high for _, high in REFERENCE_INFINITE.values()], abs=1e-6)


def test_interval_is_exact_mean_after_every_question_and_nests_before():
    rng = np.random.default_rng(3)
    differences = np.clip(rng.normal(0.1, 0.3, (60, 4)), -1.0, 1.0)
    low, high = confidence_sequence(differences, 60, ALPHA)
    assert low[-1] == pytest.approx(differences.mean(axis=0), abs=1e-12)
    assert high[-1] == pytest.approx(differences.mean(axis=0), abs=1e-12)
    assert (np.diff(low, axis=0) >= -1e-12).all() and (np.diff(high, axis=0) <= 1e-12).all()
    assert (high - low)[29].max() < (high - low)[4].min()


def test_decide_on_all_questions_reports_the_exact_differences():
    scores = {"CC": np.array([[0.5, 0.5, 0.1], [0.7, 0.7, 0.2], [0.2, 0.2, 0.9]])}
    decisions = decide(scores, ["A", "B", "C"], population=3, alpha=ALPHA, margin=0.02)
    assert [(d.a, d.b, d.decision, d.n) for d in decisions] == [
        ("A", "B", "equivalent", 3), ("A", "C", "different", 3), ("B", "C", "different", 3)]
    assert decisions[1].interval == pytest.approx((0.2 / 3, 0.2 / 3))


def test_decide_at_the_stop_is_what_replay_decided():
    rng = np.random.default_rng(5)
    scores = {"CC": correlated_scores(rng, 300, [0.2, 0.0, 0.0], 0.05),
              "QR": correlated_scores(rng, 300, [0.0, 0.0, 0.0], 0.05)}
    result = replay(scores, "ABC", ids(300), look_every=25, margin=0.05, seed=4, finite_population=True)
    order = [int(query_id[1:]) for query_id in seeded_order(ids(300), 4)][: result.stopped_at]
    again = decide({metric: matrix[order] for metric, matrix in scores.items()}, "ABC", 300, ALPHA, 0.05)
    assert again == list(result.decisions)
    assert result.stopped_at < 300 and all(d.decision != "open" for d in result.decisions)


def test_replay_json_carries_the_contract():
    rng = np.random.default_rng(0)
    result = replay({"CC": correlated_scores(rng, 40, [0.3, 0.0], 0.05)}, ["A", "B"], ids(40),
                    look_every=10, margin=0.05, seed=1)
    data = result.to_json()
    assert {"stopped_at", "n_questions", "looks", "decisions", "alpha", "margin", "family_size", "look_every",
            "seed", "judge_calls_saved_share"} <= set(data)
    first = data["looks"][0]
    assert set(first) == {"n_questions", "different", "equivalent", "open"} and first["n_questions"] == 10
    assert first["different"] + first["equivalent"] + first["open"] == 1
    decision = data["decisions"][0]
    assert {key: decision[key] for key in ("metric", "a", "b")} == {"metric": "CC", "a": "A", "b": "B"}
    assert decision["decision"] in DECISIONS and len(decision["interval"]) == 2
    assert data["judge_calls_total"] == 40 * 2
    assert data["judge_calls_saved_share"] == (40 - data["stopped_at"]) / 40


def test_the_kernels_default_target_is_the_population_as_everywhere_else():
    """One default (stats.sequential.DEFAULT_TARGET): replay and simulated_stops without a target decide
    about the population of questions, as judge.sequential.target and `ccrs stats --target` do."""
    assert (DEFAULT_TARGET, FINITE_POPULATION) == ("population", False)
    rng = np.random.default_rng(3)
    scores = {"CC": correlated_scores(rng, 30, [0.1, 0.0], 0.05)}
    default = replay(scores, ["A", "B"], ids(30), look_every=10, margin=1e-6, min_questions=30)
    population = replay(scores, ["A", "B"], ids(30), look_every=10, margin=1e-6, min_questions=30,
                        finite_population=False)
    assert default == population and default.to_json()["finite_population"] is False
    stops = simulated_stops(scores, ["A", "B"], 20, look_every=10, margin=0.05, alpha=ALPHA, replicates=2,
                            rng=np.random.default_rng(0))
    assert stops == simulated_stops(scores, ["A", "B"], 20, look_every=10, margin=0.05, alpha=ALPHA,
                                    replicates=2, rng=np.random.default_rng(0), finite_population=False)


def test_replay_looks_at_every_step_and_the_last_and_honours_the_limits():
    scores = {"CC": np.tile([[0.5, 0.5]], (23, 1))}
    finite = {"finite_population": True}
    result = replay(scores, ["A", "B"], ids(23), look_every=5, margin=0.05, min_questions=12, **finite)
    assert [look.n_questions for look in result.looks][:2] == [5, 10]
    assert result.stopped_at in (15, 20, 23) and result.decisions[0].decision == "equivalent"
    capped = replay(scores, ["A", "B"], ids(23), look_every=5, margin=1e-6, max_questions=12, **finite)
    assert [look.n_questions for look in capped.looks] == [5, 10, 12] and capped.stopped_at == 12
    full = replay(scores, ["A", "B"], ids(23), look_every=10, margin=1e-6, **finite)
    assert [look.n_questions for look in full.looks][-1] == 23


def test_seeded_order_is_a_keyed_permutation_of_the_set():
    # fixed values: the order must not change across processes, machines or numpy releases
    assert seeded_order([f"q{i}" for i in range(6)], 0) == ["q2", "q5", "q4", "q0", "q1", "q3"]
    assert seeded_order([f"q{i}" for i in range(6)], 7) == ["q2", "q3", "q5", "q1", "q0", "q4"]
    everything = seeded_order(ids(50), 3)
    assert seeded_order(list(reversed(ids(50))), 3) == everything
    subset = ids(50)[::3]
    assert seeded_order(subset, 3) == [query_id for query_id in everything if query_id in set(subset)]


@pytest.mark.parametrize("call, message", [
    (lambda: decide({"CC": np.array([[0.5, np.nan]])}, "AB", 5, ALPHA, 0.1), "NaN"),
    (lambda: decide({"CC": np.array([[0.5, 1.5]])}, "AB", 5, ALPHA, 0.1), "lie in"),
    (lambda: decide({"CC": np.array([[0.5]])}, "A", 5, ALPHA, 0.1), "two or more"),
    (lambda: decide({"CC": np.array([[0.5, 0.4]])}, "AB", 5, 1.0, 0.1), "alpha"),
    (lambda: decide({"CC": np.array([[0.5, 0.4]])}, "AB", 5, ALPHA, 0.0), "margin"),
    (lambda: decide({"CC": np.array([[0.5, 0.4]] * 3)}, "AB", 2, ALPHA, 0.1), "population"),
    (lambda: decide({"CC": np.array([[0.5, 0.4]])}, "AB", 5, ALPHA, 0.1, family_size=0), "family_size"),
    (lambda: replay({"CC": np.array([[0.5, 0.4]])}, "AB", ["q"], look_every=0, margin=0.1), "look_every"),
    (lambda: replay({"CC": np.array([[0.5, 0.4]])}, "AB", ["q", "r"], look_every=1, margin=0.1), "query ids"),
    (lambda: seeded_order(["q", "q"], 0), "unique"),
])
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(StatsInputError, match=message):
        call()


# --- simulations --------------------------------------------------------------------------------------

def test_no_difference_family_wise_error_over_whole_runs_stays_below_alpha():
    """150 data sets, 3 systems x 2 metrics (a family of 6), 120 questions whose systems have exactly equal
    means over the 120 (the guarantee's null), every look of the whole run (no early stop). Monte-Carlo
    error: the check passes at most 7 of 150; a family-wise rate of 0.10 (twice alpha) would pass it with
    probability 0.014, one of 0.15 with 5e-5 (the observed is 0 of 150: its 95% upper bound is 0.020)."""
    rng = np.random.default_rng(2024)
    datasets, errors, equivalent_at_end = 150, 0, 0
    for _ in range(datasets):
        scores = {metric: exact_null_scores(rng, 40, 3, 0.15) for metric in ("CC", "QR")}
        result = replay(scores, "ABC", ids(120), look_every=10, margin=0.05, seed=int(rng.integers(1 << 30)),
                        min_questions=120, finite_population=True)
        errors += any(look.different for look in result.looks)
        equivalent_at_end += all(d.decision == "equivalent" for d in result.decisions)
    rate = errors / datasets
    print(f"\n[sequential] null (exactly equal means): any 'different' at any look in {errors} of {datasets} "
          f"runs, family-wise rate {rate:.3f} (alpha {ALPHA})")
    assert rate <= ALPHA
    assert equivalent_at_end == datasets


def test_no_difference_in_expectation_keeps_the_population_target_below_alpha():
    """150 data sets of 120 questions drawn independently, 3 systems equal in expectation (their means over
    the 120 differ by chance): with finite_population=False no "different" at any look of whole runs.
    Monte-Carlo error as in the test above (150 data sets: a rate of 0.10 passes with probability 0.014)."""
    rng = np.random.default_rng(2025)
    datasets, errors = 150, 0
    for _ in range(datasets):
        scores = {metric: correlated_scores(rng, 120, [0.0, 0.0, 0.0], 0.15) for metric in ("CC", "QR")}
        result = replay(scores, "ABC", ids(120), look_every=10, margin=0.05, seed=int(rng.integers(1 << 30)),
                        min_questions=120, finite_population=False)
        errors += any(look.different for look in result.looks)
    print(f"\n[sequential] null in expectation, population target: any 'different' in {errors} of {datasets} "
          f"runs, family-wise rate {errors / datasets:.3f} (alpha {ALPHA})")
    assert errors / datasets <= ALPHA


def test_equal_means_reach_equivalence_before_the_last_question():
    rng = np.random.default_rng(11)
    stops = []
    for _ in range(20):
        scores = {"CC": correlated_scores(rng, 300, [0.0, 0.0, 0.0], 0.03)}
        result = replay(scores, "ABC", ids(300), look_every=10, margin=0.05, seed=int(rng.integers(1 << 30)),
                        finite_population=True)
        assert result.stopped_at < 300
        assert all(d.decision == "equivalent" for d in result.decisions)
        stops.append(result.stopped_at)
    print(f"\n[sequential] equal means (noise sd 0.03, margin 0.05): all 3 pairs equivalent in 20 of 20 "
          f"runs, stop after {min(stops)}-{max(stops)} (mean {np.mean(stops):.0f}) of 300 questions")


def test_a_large_effect_is_different_well_before_the_last_question():
    rng = np.random.default_rng(12)
    stops = []
    for _ in range(20):
        scores = {"CC": correlated_scores(rng, 400, [0.2, 0.0], 0.15)}
        result = replay(scores, ["A", "B"], ids(400), look_every=10, margin=0.02,
                        seed=int(rng.integers(1 << 30)), finite_population=True)
        (decision,) = result.decisions
        assert decision.decision == "different" and decision.interval[0] > 0.0
        assert result.stopped_at <= 100
        stops.append(result.stopped_at)
    print(f"\n[sequential] effect 0.2 (noise sd 0.15): 'different' in 20 of 20 runs after {min(stops)}-"
          f"{max(stops)} (mean {np.mean(stops):.0f}) of 400 questions")


def test_intervals_cover_the_finite_population_mean_at_every_time():
    """500 populations of 200 (means, spreads and shapes varied; some on a 0.05 lattice), one confidence
    sequence each at alpha = 0.1: the share that ever misses its population's mean is at most alpha."""
    rng = np.random.default_rng(7)
    n, columns, alpha = 200, 500, 0.1
    centre = rng.uniform(-0.6, 0.6, columns)
    spread = rng.uniform(0.02, 0.5, columns)
    differences = np.clip(centre + spread * rng.standard_t(3, (n, columns)), -1.0, 1.0)
    differences[:, ::3] = np.round(differences[:, ::3] * 20) / 20
    truth = differences.mean(axis=0)
    low, high = confidence_sequence(differences, n, alpha)
    missed = ((low > truth + 1e-12) | (high < truth - 1e-12)).any(axis=0)
    print(f"\n[sequential] coverage: {int(missed.sum())} of {columns} sequences ever missed the mean "
          f"(rate {missed.mean():.3f}, alpha {alpha}); half-width after 50 questions: median "
          f"{np.median(high[49] - low[49]) / 2:.3f}")
    assert missed.mean() <= alpha


def test_pilot_replay_agrees_with_the_full_data_hsd():
    frame = pd.read_parquet(PILOT)
    systems = sorted(frame["system"].unique())
    metrics = sorted(frame["metric"].unique())
    wide = frame.pivot_table(index="query_id", columns=["metric", "system"], values="score")
    scores = {metric: wide[metric][systems].to_numpy() for metric in metrics}
    hsd = compute_all(frame, b=2000, seed=0)
    significant = {(metric, pair["a"], pair["b"]): pair["diff"] for metric in metrics
                   for pair in hsd["per_metric"][metric]["pairwise"] if pair["significant"]}
    stops = []
    for seed in range(20):
        result = replay(scores, systems, list(wide.index), look_every=4, margin=0.05, seed=seed,
                        finite_population=True)
        stops.append(result.stopped_at)
        for d in result.decisions:
            if (d.metric, d.a, d.b) in significant and d.decision != "open":
                hsd_diff = significant[(d.metric, d.a, d.b)]
                if d.decision == "different":
                    assert np.sign(d.interval[0] + d.interval[1]) == np.sign(hsd_diff)
                else:  # equivalent within the margin: the HSD's difference must be within it too
                    assert abs(hsd_diff) <= 0.05
        if seed == 0:
            first = result
    before_last = replay(scores, systems, list(wide.index), look_every=4, margin=0.05, seed=0,
                         max_questions=28, finite_population=True)
    for d in before_last.decisions:
        if d.decision == "different" and (d.metric, d.a, d.b) in significant:
            assert np.sign(d.interval[0] + d.interval[1]) == np.sign(significant[(d.metric, d.a, d.b)])
    early = [d for d in before_last.decisions if d.decision != "open"]
    counts = {name: sum(d.decision == name for d in first.decisions) for name in DECISIONS}
    both = sum((d.metric, d.a, d.b) in significant and d.decision != "open" for d in first.decisions)
    saved = [(32 - stop) / 32 for stop in stops]
    print(f"\n[sequential] pilot (32 questions, 6 systems, 2 metrics, 30 comparisons, margin 0.05, look "
          f"every 4): seed 0 stopped after {first.stopped_at}: {counts}; the HSD finds {len(significant)} of "
          f"30 pairs significant, {both} decided by both, all agreeing; over seeds 0-19: stop after "
          f"{min(stops)}-{max(stops)}, judge calls saved {np.mean(saved):.1%} on average "
          f"(max {max(saved):.1%}); after 28 questions (seed 0): {len(early)} decided, "
          f"{sum((d.metric, d.a, d.b) in significant for d in early)} of them HSD-significant, all agreeing")


def test_decide_takes_each_metric_on_its_own_questions():
    """A failed judgment leaves a question out of one metric: that metric rests on fewer questions."""
    rng = np.random.default_rng(9)
    cc, qr = correlated_scores(rng, 60, [0.3, 0.0], 0.05), correlated_scores(rng, 60, [0.0, 0.0], 0.05)
    both = decide({"CC": cc, "QR": qr[:55]}, ["A", "B"], 60, ALPHA, 0.05)
    assert [(d.metric, d.n) for d in both] == [("CC", 60), ("QR", 55)]
    assert both[0] == decide({"CC": cc}, ["A", "B"], 60, ALPHA, 0.05, family_size=2)[0]


def test_the_population_target_also_settles_equal_systems_and_a_large_effect_before_the_last_question():
    """The default target of a run (judge.sequential.target: population): 3 equal systems (noise sd 0.03)
    are equivalent within 0.05, and a 0.2 effect (noise sd 0.15) is different, well before 600 questions."""
    rng = np.random.default_rng(1)
    ids = [str(i) for i in range(600)]
    for seed in range(3):
        equal = np.clip(rng.random((600, 1)) + rng.normal(0, 0.03, (600, 3)), 0, 1)
        settled = replay({"m": equal}, ("A", "B", "C"), ids, look_every=20, margin=0.05, seed=seed,
                         finite_population=False)
        assert settled.stopped_at < 400 and all(d.decision == "equivalent" for d in settled.decisions)
        effect = np.clip(rng.random((600, 1)) + rng.normal(0, 0.15, (600, 2)) + [0.2, 0.0], 0, 1)
        separated = replay({"m": effect}, ("A", "B"), ids, look_every=20, margin=0.05, seed=seed,
                           finite_population=False)
        assert separated.stopped_at <= 120 and separated.decisions[0].decision == "different"
