"""`ccrs stats SCORES --sequential --margin M --look-every L [--seed S] [--alpha A] [--min-questions N]
[--max-questions N]`: replay judged scores as a sequential run (stats/sequential.py, docs/sequential.md):
the questions in the seeded random order, a look every L questions, and when the rule would have stopped
and what it decided. Adds stats.json["sequential"] beside the normal statistics and its section to the
verdict (pipelines/reporting/sequential.py)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.reporting.sequential import SEQUENTIAL_KEY, sequential_section
from stats.errors import StatsInputError
from stats.scores import build_cube
from stats.sequential import DEFAULT_TARGET, replay
from tasks.reduce import write_stats
from tasks.runtime.layout import STATS_FILE, SUMMARY_FILE

SEQUENTIAL_OPTIONS = ("margin", "look_every", "min_questions", "max_questions", "target")


def check_sequential_options(args: argparse.Namespace) -> None:
    """One line (StatsInputError) on sequential options that cannot be used, before any work."""
    given = [name for name in SEQUENTIAL_OPTIONS if getattr(args, name, None) is not None]
    if not args.sequential:
        if given:
            raise StatsInputError(f"{_flag(given[0])} needs --sequential")
        return
    if args.margin is None or args.look_every is None:
        raise StatsInputError("--sequential needs --margin M (the equivalence margin, e.g. 0.02) and "
                              "--look-every L (questions per look)")
    if not (math.isfinite(args.margin) and args.margin > 0.0):
        raise StatsInputError(f"--margin must be a positive number, got {args.margin}")
    if args.look_every < 1:
        raise StatsInputError(f"--look-every must be at least 1 question, got {args.look_every}")
    if args.min_questions is not None and args.min_questions < 0:
        raise StatsInputError(f"--min-questions must be 0 or more, got {args.min_questions}")
    if args.max_questions is not None and args.max_questions < 1:
        raise StatsInputError(f"--max-questions must be at least 1, got {args.max_questions}")


def sequential_replay(args: argparse.Namespace, frame: pd.DataFrame, verdict: str) -> str:
    """Replay the validated scores `frame` (long, on [0, 1]) after the normal statistics were written to
    args.out: adds stats.json["sequential"], appends its section to the verdict (summary.md); returns the
    verdict with it."""
    out = Path(args.out)
    stats = json.loads((out / STATS_FILE).read_text())
    stats[SEQUENTIAL_KEY] = replay_block(frame, stats["metrics"], args)
    write_stats(stats, out)
    verdict = f"{verdict.rstrip()}\n\n{sequential_section(stats)}\n"
    (out / SUMMARY_FILE).write_text(verdict)
    return verdict


def replay_block(frame: pd.DataFrame, metric_order: list[str], args: argparse.Namespace) -> dict:
    """stats.json["sequential"] of a replay: the questions with every system's score on every metric
    (repeat-averaged where judged repeatedly), in the seeded order; questions left out are counted."""
    cube = build_cube(frame, metric_order)
    if len(cube.systems) < 2:
        raise StatsInputError(f"--sequential compares systems; the scores hold one ({cube.systems[0]})")
    complete = np.isfinite(cube.values).all(axis=(1, 2))
    if not complete.any():
        raise StatsInputError("--sequential needs questions with every system's score on every metric; "
                              "none has")
    scores = {metric: cube.metric_matrix(metric)[complete] for metric in cube.metrics}
    query_ids = [query_id for query_id, kept in zip(cube.query_ids, complete) if kept]
    result = replay(scores, cube.systems, query_ids, look_every=args.look_every, margin=args.margin,
                    alpha=args.alpha, seed=args.seed, min_questions=args.min_questions or 0,
                    max_questions=args.max_questions,
                    finite_population=(getattr(args, "target", None) or DEFAULT_TARGET) == "questions")
    return {**result.to_json(), "replay": True, "questions_left_out": int((~complete).sum())}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
