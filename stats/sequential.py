"""Anytime-valid sequential judging: judge questions in a seeded random order, look every few questions,
and stop once every (metric, system pair) comparison is settled (docs/sequential.md).

The interval. For a pair (a, b) of a metric, each judged question gives a paired difference d = a - b in
[-1, 1], mapped to x = (d + 1) / 2 in [0, 1]. With the `questions` target (below) the target is the mean of
x over the N questions available (the finite population). For a candidate value m of that mean, the
questions judged so far fix what the not-yet-judged ones must average: (N m - S) / (N - t + 1) before the
t-th question, S the sum of the first t - 1 values. Under random order the t-th value has exactly that
conditional mean when m is the truth, so a gambler who bets on x landing above it (or below it) gains
nothing in expectation: the capital is a nonnegative martingale and, by Ville's inequality, it reaches
1 / alpha with probability at most alpha, ever. We run that bet for every m on a grid of [0, 1]
(confidence sequences by betting, Waudby-Smith and Ramdas, JRSS-B 2024, in the sampling-without-
replacement form of their NeurIPS 2020 paper): the hedged capital, half the stake on "above" and half on
"below", each bet a predictable plug-in size (from the questions before, shrinking like
1 / sqrt(t log t), capped at half of what keeps the capital positive). A candidate is excluded for good
once its capital reaches 1 / alpha' (the running intersection), and also once it is impossible (the
remaining questions, each in [0, 1], cannot average what it needs). The interval of a pair is the range
of the candidates left, widened by one grid step each side (the set is taken as an interval between
grid points) and cut to the possible range; after all N questions it is the exact mean.

The family. Every metric x pair is one interval at alpha' = alpha / family_size (Bonferroni): the
probability that ANY interval of the family misses its target at ANY time is at most alpha, so decisions
taken at a data-dependent look (the stop) keep that guarantee.

Which mean (DEFAULT_TARGET, the one default of judge.sequential.target, `ccrs stats --target` and
`replay`). `population` (the default; decide's population None, replay's finite_population=False): the
mean over the population of questions that the N are an independent random sample of: a random order of
such a sample is itself an independent sequence, the bets use m itself as the next value's mean, nothing
is excluded as impossible, and the interval never collapses; a "different" generalizes beyond the N
questions. `questions` (decide's `population` = N, finite_population=True): the mean over the N questions:
the tightest intervals, exact at N, but a "different" says only that the systems' means over these N
questions differ, by however little (late in a run that can be a difference of chance size, about
sd / sqrt(N), that questions outside the set would not show).

Which scale. The scores are the judge's: every decision is about the judge's means (its scale, its bias),
not about what human annotators would mark (PPI++'s human-calibrated means are fixed-n, stats/ppi.py).

Decisions. "different": the interval excludes 0 (the two systems' target means differ, in the
interval's direction). "equivalent": the interval lies inside [-margin, margin] (whatever the difference
of the target means is, it is no larger than the margin). A pair can be both (a real
difference smaller than the margin): it is reported "different", with its interval. Otherwise "open".

Assumptions. The questions are exchangeable: they are judged in the seeded random order of
`seeded_order`, fixed before any score is seen, and the scores of a question do not depend on when it
was judged (the judge is the same throughout, no drift). Every system of a question is judged before
the question counts (paired looks). Scores lie in [0, 1]. With the `questions` target the guarantee is
about the N questions' means; what the stop says about other questions is then what the fixed-n
statistics say (descriptive here).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from stats.errors import StatsInputError

DECISIONS = ("different", "equivalent", "open")
TARGETS = ("population", "questions")  # what a decision is about: the questions' population, or these N
DEFAULT_TARGET = "population"
FINITE_POPULATION = DEFAULT_TARGET == "questions"  # the default of replay's and simulated_stops' flag
GRID_STEPS = 2000       # candidate means of x: step 1/2000 on [0, 1], 0.001 on the difference's scale
TRUNCATION = 0.5        # a bet stakes at most half of what would put the capital at 0
PRIOR_MEAN, PRIOR_VARIANCE = 0.5, 0.25  # one pseudo-observation regularizing the plug-in bet size
_TINY = 1e-12
ZERO_TOLERANCE = 1e-9   # an interval end this close to 0 is 0 (float rounding of an exact mean of 0)


@dataclass(frozen=True)
class PairDecision:
    metric: str
    a: str
    b: str
    decision: str                   # one of DECISIONS
    interval: tuple[float, float]   # anytime-valid interval of mean(a - b) over the N questions, after n
    n: int                          # questions it rests on


@dataclass(frozen=True)
class Look:
    n_questions: int
    different: int
    equivalent: int
    open: int

    @classmethod
    def of(cls, n_questions: int, decisions: Sequence[PairDecision]) -> Look:
        """The look after `n_questions`, counting its decisions."""
        counts = {name: sum(d.decision == name for d in decisions) for name in DECISIONS}
        return cls(n_questions, counts["different"], counts["equivalent"], counts["open"])


@dataclass(frozen=True)
class SequentialResult:
    stopped_at: int                 # questions judged when the rule stopped (n_questions if it never did)
    n_questions: int                # N, the questions available
    looks: tuple[Look, ...]
    decisions: tuple[PairDecision, ...]  # at the stop
    alpha: float
    margin: float
    family_size: int
    look_every: int
    seed: int
    min_questions: int = 0
    max_questions: int | None = None
    systems: tuple[str, ...] = field(default=())
    metrics: tuple[str, ...] = field(default=())
    finite_population: bool = FINITE_POPULATION  # True: the means over these N, not their population

    @property
    def settled(self) -> bool:
        return all(decision.decision != "open" for decision in self.decisions)

    def judge_calls(self) -> tuple[int, int]:
        """(not sent, total): one judge call per (question, system, metric) score."""
        per_question = len(self.systems) * len(self.metrics)
        return (self.n_questions - self.stopped_at) * per_question, self.n_questions * per_question

    def to_json(self) -> dict:
        not_sent, total = self.judge_calls()
        return {
            "stopped_at": self.stopped_at,
            "n_questions": self.n_questions,
            "settled": self.settled,
            "looks": [{"n_questions": look.n_questions, "different": look.different,
                       "equivalent": look.equivalent, "open": look.open} for look in self.looks],
            "decisions": [{"metric": d.metric, "a": d.a, "b": d.b, "decision": d.decision,
                           "interval": [d.interval[0], d.interval[1]], "n": d.n} for d in self.decisions],
            "alpha": self.alpha,
            "margin": self.margin,
            "family_size": self.family_size,
            "look_every": self.look_every,
            "seed": self.seed,
            "min_questions": self.min_questions,
            "max_questions": self.max_questions,
            "systems": list(self.systems),
            "metrics": list(self.metrics),
            "finite_population": self.finite_population,
            "judge_calls_total": total,
            "judge_calls_not_sent": not_sent,
            "judge_calls_saved_share": (self.n_questions - self.stopped_at) / self.n_questions,
        }


def seeded_order(query_ids: Sequence[str], seed: int) -> list[str]:
    """The judging order: the ids sorted by a random key that numpy's SeedSequence draws from (seed, id).
    A function of the set of ids and the seed only (not of their input order, the process or the
    machine), and a subset's order is the full set's order restricted to it, so a resumed run, or a
    replay of the questions a stopped run judged, sees the same order."""
    ids = [str(query_id) for query_id in query_ids]
    if len(set(ids)) != len(ids):
        raise StatsInputError(f"query ids must be unique; {len(ids) - len(set(ids))} repeat")
    _check_seed(seed)
    return sorted(ids, key=lambda query_id: (_order_key(query_id, seed), query_id))


def _order_key(query_id: str, seed: int) -> tuple[int, int]:
    encoded = query_id.encode()
    state = np.random.SeedSequence([seed, len(encoded), *encoded]).generate_state(2, np.uint64)
    return int(state[0]), int(state[1])


def confidence_sequence(differences: np.ndarray, population: int | None, alpha: float,
                        times: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Anytime-valid intervals of each column's mean over `population` values from its first t values
    (population None: the mean of the distribution the values are independently drawn from).

    differences: (n, P) paired differences in [-1, 1], rows in judging order; each column its own
    confidence sequence at level alpha (no family correction here). Returns (lower, upper), each
    (len(times), P), on the difference scale, after t = each of `times` values (default 1..n)."""
    values = _checked_differences(differences)
    _check_alpha(alpha)
    _check_population(population, len(values))
    times = list(range(1, len(values) + 1)) if times is None else [int(t) for t in times]
    if any(t < 0 or t > len(values) for t in times) or times != sorted(times):
        raise StatsInputError(f"times must be ascending within 0..{len(values)}, got {times}")
    process = _BettingProcess(values.shape[1], population, alpha)
    lower, upper = np.empty((len(times), values.shape[1])), np.empty((len(times), values.shape[1]))
    done = 0
    for row, t in enumerate(times):
        process.advance(values[done:t])
        done = t
        lower[row], upper[row] = process.intervals()
    return lower, upper


def decide(scores: Mapping[str, np.ndarray], systems: Sequence[str], population: int | None, alpha: float,
           margin: float, family_size: int | None = None) -> list[PairDecision]:
    """Every (metric, pair a < b in `systems` order) decision from the first n questions judged.

    scores: {metric: (n, k)} on [0, 1], rows the first n questions in the seeded order that have every
    system's score on that metric (n may differ across metrics where judgments failed, which is taken to
    be independent of the scores). Each interval is the anytime-valid one of mean(a - b) over the
    `population` questions at alpha / family_size (default: every metric x pair); population None: over
    the population of questions that the judged ones are an independent random sample of (wider, never
    exact)."""
    matrices, systems = _checked_scores(scores, systems, same_rows=False)
    _check_alpha(alpha)
    _check_margin(margin)
    _check_population(population, max(matrix.shape[0] for matrix in matrices.values()))
    family = _family_size(family_size, matrices, systems)
    decisions = []
    for metric, matrix in matrices.items():  # each metric on its own questions
        one = {metric: matrix}
        process = _BettingProcess(len(_pair_labels(one, systems)), population, alpha / family)
        process.advance(_pair_differences(one, systems))
        decisions += _decisions(process, one, systems, margin)
    return decisions


@dataclass(frozen=True)
class SimulatedStops:
    """Where simulated sequential runs of `n_questions` stopped (`ccrs plan power --sequential-margin`)."""

    n_questions: int
    stops: tuple[int, ...]          # questions judged when each simulated run stopped
    settled: float                  # share of the runs with no comparison open at their stop

    @property
    def mean_stop(self) -> float:
        return float(np.mean(self.stops))


def simulated_stops(scores: Mapping[str, np.ndarray], systems: Sequence[str], n_questions: int, *,
                    look_every: int, margin: float, alpha: float, replicates: int, rng: np.random.Generator,
                    finite_population: bool = FINITE_POPULATION) -> SimulatedStops:
    """Sequential runs of `n_questions` questions drawn with replacement from a pilot's questions (every
    metric of a question together, so the pilot's effects and correlations carry over), each replayed."""
    matrices, systems = _checked_scores(scores, systems)
    if replicates < 1 or n_questions < 1:
        raise StatsInputError(f"replicates and n_questions must be positive, got {replicates}, {n_questions}")
    pilot = _rows(matrices)
    ids = [str(row) for row in range(n_questions)]  # the draws are random already: any order will do
    stops, settled = [], 0
    for _ in range(replicates):
        rows = rng.integers(0, pilot, n_questions)
        result = replay({metric: matrix[rows] for metric, matrix in matrices.items()}, systems, ids,
                        look_every=look_every, margin=margin, alpha=alpha,
                        finite_population=finite_population)
        stops.append(result.stopped_at)
        settled += result.settled
    return SimulatedStops(n_questions, tuple(stops), settled / replicates)


def replay(scores: Mapping[str, np.ndarray], systems: Sequence[str], query_ids: Sequence[str], *,
           look_every: int, margin: float, alpha: float = 0.05, seed: int = 0, min_questions: int = 0,
           max_questions: int | None = None, finite_population: bool = FINITE_POPULATION) -> SequentialResult:
    """Replay judged scores as a sequential run: the questions in `seeded_order(query_ids, seed)`, a look
    after every `look_every` questions (and at the last), stopping at the first look with at least
    `min_questions` judged where no comparison is open, else at max_questions (or N).

    scores: {metric: (N, k)} on [0, 1], rows in `query_ids`' order. finite_population: False (the default,
    DEFAULT_TARGET) intervals of the means over the population the N questions are a random sample of
    (decide's population None); True: of the means over these N questions (the `questions` target)."""
    matrices, systems = _checked_scores(scores, systems)
    _check_alpha(alpha)
    _check_margin(margin)
    n_questions = _rows(matrices)
    if len(query_ids) != n_questions:
        raise StatsInputError(f"{len(query_ids)} query ids for {n_questions} rows of scores")
    if n_questions < 1:
        raise StatsInputError("a replay needs at least one question")
    limit = _check_schedule(look_every, min_questions, max_questions, n_questions)
    position = {query_id: row for row, query_id in enumerate(str(q) for q in query_ids)}
    order = np.array([position[query_id] for query_id in seeded_order(query_ids, seed)])
    ordered = {metric: matrix[order] for metric, matrix in matrices.items()}
    differences = _pair_differences(ordered, systems)
    family = _family_size(None, matrices, systems)
    process = _BettingProcess(differences.shape[1], n_questions if finite_population else None,
                              alpha / family)
    looks, decisions, judged = [], [], 0
    for look_at in [*range(look_every, limit, look_every), limit]:
        process.advance(differences[judged:look_at])
        judged = look_at
        decisions = _decisions(process, ordered, systems, margin)
        looks.append(Look.of(judged, decisions))
        if judged >= min_questions and looks[-1].open == 0:
            break
    return SequentialResult(judged, n_questions, tuple(looks), tuple(decisions), alpha, margin, family,
                            look_every, seed, min_questions, max_questions, systems, tuple(matrices),
                            finite_population)


class _BettingProcess:
    """The hedged betting capital of every candidate mean of every column, advanced question by question.

    Candidates live in flat arrays sorted by (column, m); excluded ones are dropped for good. The state
    is a function of the values fed so far, however they are split into calls."""

    def __init__(self, columns: int, population: int | None, alpha: float):
        self.population, self.columns = population, columns
        self.log_threshold = float(np.log(1.0 / alpha))
        # each side's bet size is tuned to its half of the capital (level alpha / 2)
        self.bet_scale = float(np.sqrt(2.0 * np.log(2.0 / alpha)))
        self.t = 0
        self.total = np.zeros(columns)                  # sum of x seen
        self.squares = np.zeros(columns)                # sum of squared deviations from the running mean
        grid = np.linspace(0.0, 1.0, GRID_STEPS + 1)
        self.column = np.repeat(np.arange(columns), grid.size)
        self.m = np.tile(grid, columns)
        self.log_up = np.zeros(self.m.size)             # capital of the bets on "above"
        self.log_down = np.zeros(self.m.size)           # capital of the bets on "below"
        self.last_low = np.zeros(columns)               # candidates' range before a column lost its last one
        self.last_high = np.ones(columns)

    def advance(self, differences: np.ndarray) -> None:
        for row in (np.asarray(differences, dtype=np.float64) + 1.0) / 2.0:
            if self.population is not None and self.t >= self.population:
                raise StatsInputError(f"more than the population's {self.population} questions fed")
            self._step(row)

    def _step(self, x: np.ndarray) -> None:
        self.t += 1
        variance = (PRIOR_VARIANCE + self.squares) / self.t  # from the t - 1 values before (+1 pseudo)
        bet = self.bet_scale / np.sqrt(variance * self.t * np.log1p(self.t))
        remaining_mean = self._remaining_mean()
        gain = x[self.column] - remaining_mean
        bet_up = np.minimum(bet[self.column], TRUNCATION / np.maximum(remaining_mean, _TINY))
        bet_down = np.minimum(bet[self.column], TRUNCATION / np.maximum(1.0 - remaining_mean, _TINY))
        self.log_up += np.log1p(bet_up * gain)
        self.log_down += np.log1p(-bet_down * gain)
        hedged = np.logaddexp(self.log_up, self.log_down) + np.log(0.5)
        self.total += x
        running_mean = np.minimum((PRIOR_MEAN + self.total) / (self.t + 1), 1.0)
        self.squares += (x - running_mean) ** 2
        low, high = self._possible()
        keep = (hedged < self.log_threshold) & (self.m >= low[self.column]) & (self.m <= high[self.column])
        if not keep.all():
            self._drop(keep)

    def _remaining_mean(self) -> np.ndarray:
        """What each candidate needs the unseen values to average (itself for an infinite population)."""
        if self.population is None:
            return self.m
        return (self.population * self.m - self.total[self.column]) / (self.population - self.t + 1)

    def _possible(self) -> tuple[np.ndarray, np.ndarray]:
        """The range of means the seen values allow: the rest all 0, or all 1."""
        if self.population is None:
            return np.zeros(self.columns), np.ones(self.columns)
        return self.total / self.population, (self.total + self.population - self.t) / self.population

    def _drop(self, keep: np.ndarray) -> None:
        before = np.bincount(self.column, minlength=self.columns)
        after = np.bincount(self.column[keep], minlength=self.columns)
        for column in np.flatnonzero((before > 0) & (after == 0)):
            first, last = self._bounds(column)
            self.last_low[column], self.last_high[column] = self.m[first], self.m[last - 1]
        self.column, self.m = self.column[keep], self.m[keep]
        self.log_up, self.log_down = self.log_up[keep], self.log_down[keep]

    def _bounds(self, column: int) -> tuple[int, int]:
        return (int(np.searchsorted(self.column, column, "left")),
                int(np.searchsorted(self.column, column, "right")))

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) of every column on the difference scale [-1, 1]."""
        low, high = self._possible()
        if self.population is not None and self.t == self.population:
            exact = 2.0 * low - 1.0
            return exact, exact.copy()
        starts = np.searchsorted(self.column, np.arange(self.columns), "left")
        ends = np.searchsorted(self.column, np.arange(self.columns), "right")
        alive = ends > starts
        first = np.where(alive, self.m[np.minimum(starts, self.m.size - 1)] if self.m.size else 0.0,
                         self.last_low)
        last = np.where(alive, self.m[np.maximum(ends - 1, 0)] if self.m.size else 0.0, self.last_high)
        step = 1.0 / GRID_STEPS
        lower, upper = np.maximum(first - step, low), np.minimum(last + step, high)
        empty = lower > upper  # the sequence missed (probability <= alpha): fall back on the possible range
        lower, upper = np.where(empty, low, lower), np.where(empty, high, upper)
        return 2.0 * lower - 1.0, 2.0 * upper - 1.0


def _decisions(process: _BettingProcess, matrices: Mapping[str, np.ndarray], systems: tuple[str, ...],
               margin: float) -> list[PairDecision]:
    lower, upper = process.intervals()
    return [PairDecision(metric, a, b, _decision(low, high, margin), (float(low), float(high)), process.t)
            for (metric, a, b), low, high in zip(_pair_labels(matrices, systems), lower, upper)]


def _decision(low: float, high: float, margin: float) -> str:
    if low > ZERO_TOLERANCE or high < -ZERO_TOLERANCE:
        return "different"
    if low >= -margin and high <= margin:
        return "equivalent"
    return "open"


def _pair_labels(matrices: Mapping[str, np.ndarray], systems: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return [(metric, systems[i], systems[j]) for metric in matrices
            for i, j in combinations(range(len(systems)), 2)]


def _pair_differences(matrices: Mapping[str, np.ndarray], systems: tuple[str, ...]) -> np.ndarray:
    """(n, metrics x pairs) differences a - b, columns in _pair_labels' order."""
    pairs = list(combinations(range(len(systems)), 2))
    n = _rows(matrices)
    columns = [matrix[:, i] - matrix[:, j] for matrix in matrices.values() for i, j in pairs]
    return np.column_stack(columns) if columns else np.zeros((n, 0))


def _family_size(family_size: int | None, matrices: Mapping[str, np.ndarray],
                 systems: tuple[str, ...]) -> int:
    pairs = len(matrices) * len(systems) * (len(systems) - 1) // 2
    if family_size is None:
        return pairs
    if not _is_integer(family_size) or family_size < pairs:
        raise StatsInputError(f"family_size must be an integer of at least the {pairs} comparisons decided, "
                              f"got {family_size!r}")
    return int(family_size)


def _checked_scores(scores: Mapping[str, np.ndarray], systems: Sequence[str],
                    same_rows: bool = True) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    systems = tuple(str(system) for system in systems)
    if len(systems) < 2 or len(set(systems)) != len(systems):
        raise StatsInputError(f"sequential decisions compare two or more distinct systems, got {systems}")
    if not scores:
        raise StatsInputError("no metric to decide on")
    matrices = {}
    for metric, values in scores.items():
        matrix = np.asarray(values, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != len(systems):
            raise StatsInputError(f"scores of {metric!r} must be (questions, {len(systems)} systems), got "
                                  f"shape {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise StatsInputError(f"scores of {metric!r} hold {int((~np.isfinite(matrix)).sum())} NaN or "
                                  "infinite values: every system of a judged question needs a score")
        if ((matrix < 0.0) | (matrix > 1.0)).any():
            raise StatsInputError(f"scores of {metric!r} must lie in [0, 1]; "
                                  f"{int(((matrix < 0.0) | (matrix > 1.0)).sum())} do not")
        matrices[str(metric)] = matrix
    if same_rows and len({matrix.shape[0] for matrix in matrices.values()}) != 1:
        raise StatsInputError("every metric needs the same questions (rows)")
    return matrices, systems


def _checked_differences(differences: np.ndarray) -> np.ndarray:
    values = np.asarray(differences, dtype=np.float64)
    if values.ndim != 2:
        raise StatsInputError(f"differences must be 2-D (questions, columns), got shape {values.shape}")
    if not np.isfinite(values).all() or (np.abs(values) > 1.0).any():
        raise StatsInputError("differences must be finite and lie in [-1, 1]")
    return values


def _rows(matrices: Mapping[str, np.ndarray]) -> int:
    return next(iter(matrices.values())).shape[0]


def _check_schedule(look_every: int, min_questions: int, max_questions: int | None, n_questions: int) -> int:
    """The last question a replay may judge."""
    for name, value in (("look_every", look_every), ("min_questions", min_questions)):
        if not _is_integer(value):
            raise StatsInputError(f"{name} must be an integer, got {value!r}")
    if look_every < 1:
        raise StatsInputError(f"look_every must be at least 1 question, got {look_every}")
    if min_questions < 0:
        raise StatsInputError(f"min_questions must be non-negative, got {min_questions}")
    if max_questions is None:
        return n_questions
    if not _is_integer(max_questions) or max_questions < 1:
        raise StatsInputError(f"max_questions must be a positive integer, got {max_questions!r}")
    return min(int(max_questions), n_questions)


def _check_population(population: int | None, n: int) -> None:
    if population is None:
        return
    if not _is_integer(population) or population < max(n, 1):
        raise StatsInputError(f"population must be an integer of at least the {n} questions judged, "
                              f"got {population!r}")


def _is_integer(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def _check_alpha(alpha: float) -> None:
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
        raise StatsInputError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")


def _check_margin(margin: float) -> None:
    if not (isinstance(margin, (int, float)) and np.isfinite(margin) and margin > 0.0):
        raise StatsInputError(f"margin must be a positive number, got {margin!r}")


def _check_seed(seed: int) -> None:
    if not _is_integer(seed) or seed < 0:
        raise StatsInputError(f"seed must be a non-negative integer, got {seed!r}")
