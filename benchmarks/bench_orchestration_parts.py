"""The judge stage's orchestration costs, part by part, before and after, side by side in one run.

    .venv/bin/python benchmarks/bench_orchestration_parts.py [--units 3000] [--json OUT]

No Ray and no endpoint: each part of what `benchmarks/bench_orchestration.py` measures end to end, timed
as it was and as it is (the old way re-stated here, next to the code that replaced it), on inputs built
the same way (paper proportions from the real BioASQ 12b files), interleaved (benchmarks/timing.py):
- shard client: a new LLMClient (httpx client) per shard vs the worker's client reset per shard;
- checkpoint save of a 16-judgment shard: fsync at every save vs at most once a second;
- injection detector over the contexts' chunks: every regex on every chunk vs the literal prefilter;
- Judgment.record: dataclasses.asdict vs the plain field copy;
- driver memory of the planned units: with their rendered prompts kept (as before) vs without.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from timing import interleaved_best  # noqa: E402


def _samples(units: int):
    import pandas as pd

    from bench_orchestration import TOP_K, build_inputs
    from tasks.runtime.judge_session import load_samples

    queries, retrieved, generations, _ = build_inputs(Path(tempfile.mkdtemp(prefix="bench-parts-")), units, 5)
    samples, _ = load_samples(pd.read_parquet(queries), pd.read_parquet(retrieved),
                              pd.read_parquet(generations), TOP_K)
    return samples


def shard_client_parts(repeats: int) -> dict:
    from judges.client import LLMClient
    from judges.config import ClientConfig
    from tasks.runtime.fanout import shard_client

    cfg, url = ClientConfig(max_concurrency=64), "http://127.0.0.1:9/v1"

    def new_client():
        with LLMClient(cfg, url):
            pass

    best = interleaved_best(repeats, {"new_per_shard": new_client,
                                      "reused_reset": lambda: shard_client(cfg, url)})
    return {name: round(seconds * 1000, 3) for name, (seconds, _) in best.items()} | {"unit": "ms per shard"}


def checkpoint_parts(repeats: int, records: list[dict]) -> dict:
    from tasks.runtime.stage import StageCheckpoint

    root = Path(tempfile.mkdtemp(prefix="bench-ckpt-", dir=REPO.parent if os.access(REPO.parent, os.W_OK)
                                 else None))
    every = StageCheckpoint(root, "judge_ccrs", "every", fsync_interval_s=0)
    interval = StageCheckpoint(root, "judge_ccrs", "interval")
    counter = iter(range(10**9))

    def shard():
        n = next(counter)
        return {f"A/q{n}/{i}": [records[i % len(records)]] for i in range(16)}

    totals = {"fsync_every_save": 0.0, "fsync_once_a_second": 0.0}
    for _ in range(repeats * 10):  # mean, not best: an fsync's cost varies with what else is writing
        for name, checkpoint in (("fsync_every_save", every), ("fsync_once_a_second", interval)):
            started = time.perf_counter()
            checkpoint.save(shard())
            totals[name] += time.perf_counter() - started
    return {name: round(total / (repeats * 10) * 1000, 3) for name, total in totals.items()} | {
        "unit": "ms per 16-judgment shard, mean"}


def detector_parts(samples) -> dict:
    from judges.injection import _COMPILED, injection_markers
    from judges.suite import neutralize

    chunks = list(dict.fromkeys(chunk for sample in samples for chunk in sample.context))

    def full_scan(text: str) -> tuple[str, ...]:
        return tuple(name for name, patterns in _COMPILED.items()
                     if (neutralize(text) != text if name == "delimiter_escape"
                         else any(p.search(text) for p in patterns)))

    best = interleaved_best(1, {"every_regex": lambda: [full_scan(c) for c in chunks],
                                "prefiltered": lambda: [injection_markers(c) for c in chunks]})
    same = best["every_regex"][1] == best["prefiltered"][1]
    return {name: round(seconds / len(chunks) * 1e6, 1) for name, (seconds, _) in best.items()} | {
        "unit": f"us per distinct chunk ({len(chunks)} chunks)", "identical_markers": same}


def cc_judgment(query_id: str):
    """A typical CCRS judgment record (a 5000-token prompt, 20 tokens of it prefix-cached)."""
    from judges.ccrs import CCRS_METRICS
    from judges.suite import Judgment, Sample, Usage

    return Judgment.of(Sample(query_id, "A", "", "", "", []), CCRS_METRICS["CC"], status="ok",
                       prompt_version="paper", judge_model="m", usage=Usage(1, 5000, 2, 20), score=0.5,
                       llm_score=50, raw="50")


def record_parts(repeats: int) -> dict:
    judgments = [cc_judgment(f"q{i}") for i in range(5000)]
    best = interleaved_best(repeats, {"asdict": lambda: [asdict(j) for j in judgments],
                                      "field_copy": lambda: [j.record() for j in judgments]})
    return {name: round(seconds / len(judgments) * 1e6, 2) for name, (seconds, _) in best.items()} | {
        "unit": "us per judgment"}


def planning_memory(samples) -> dict:
    """Bytes the planned units hold (tracemalloc), with the rendered request kept per unit (as before:
    Unit.plan was the ChatRequest) and without (now), on the same samples; and planning time."""
    from judges.ccrs import unit_request
    from judges.suite import get_suite
    from tasks.runtime.judge_session import judge_counter
    from bench_orchestration import paper_configs

    judge, client = paper_configs()
    suite, count = get_suite("ccrs"), judge_counter(judge)
    figures = {}
    for name, keep in (("prompts_kept", True), ("no_prompts", False)):
        tracemalloc.start()
        started = time.perf_counter()
        units = [u for s in samples for u in suite.plan(s, judge, client.seed, count)]
        kept = [unit_request(u, judge) for u in units] if keep else []
        seconds = time.perf_counter() - started
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        figures[name] = {"bytes_per_unit": round(held / len(units)), "units": len(units),
                         "plan_ms_per_unit": round(seconds / len(units) * 1000, 3)}
        del units, kept
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=3000, help="judge units (requests) to plan")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    samples = _samples(args.units)
    record = cc_judgment("q").record()
    figures = {
        "shard_client": shard_client_parts(args.repeats),
        "checkpoint_save": checkpoint_parts(args.repeats, [record]),
        "injection_detector": detector_parts(samples),
        "judgment_record": record_parts(max(3, args.repeats // 4)),
        "planning_memory": planning_memory(samples),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
