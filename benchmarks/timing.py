"""Timing helper shared by the benchmark scripts (run as `python benchmarks/<script>.py`)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def interleaved_best(repeats: int, candidates: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Best time (and result) of each candidate, the candidates alternating within each repeat: on a
    shared machine a load spike then hits all of them alike instead of one."""
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, fn in candidates.items():
            started = time.perf_counter()
            result = fn()
            seconds = time.perf_counter() - started
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, result)
    return best
