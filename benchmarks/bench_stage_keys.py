"""Stage keys: `tasks.runtime.stage.code_version` of the pipeline's own stages with each source's imports
parsed again (its cache cleared before every call, as before the cache) against parsed once a process (the
cache kept), side by side in one run; the keys must be the same.

    .venv/bin/python benchmarks/bench_stage_keys.py            # 20 rounds
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.runtime import stage  # noqa: E402

STAGES = ("tasks.generate", "tasks.judge", "tasks.reduce", "tasks.retrieval_stages", "pipelines.pipeline")


def timed(clear: bool) -> tuple[float, tuple[str, ...]]:
    if clear:
        stage._imports_in.cache_clear()
    started = time.perf_counter()
    keys = tuple(stage.code_version(name) for name in STAGES)
    return time.perf_counter() - started, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    parsed, cached = [], []
    for _ in range(args.rounds):  # alternated, so the machine's noise falls on both alike
        seconds, fresh = timed(clear=True)
        parsed.append(seconds)
        seconds, kept = timed(clear=False)
        cached.append(seconds)
        if fresh != kept:
            raise SystemExit("the cache changed a stage key")
    slow, fast = statistics.median(parsed), statistics.median(cached)
    print(f"code_version of {len(STAGES)} stages, median of {args.rounds}: parsed again "
          f"{slow * 1000:.1f} ms, cached {fast * 1000:.1f} ms; ratio {slow / fast:.1f}x (the same keys)")


if __name__ == "__main__":
    main()
