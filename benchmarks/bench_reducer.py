"""Benchmark of `ccrs stats` at the CCRS paper's scale (4,719 questions x 6 systems x 5 metrics, B = 10,000),
the whole command in fresh processes: where its time goes (imports, statistics, figures, the rest) and the
command as it runs now (new: a plot process started first, which imports matplotlib while the command
imports the statistics, draws the score plots while the statistics are computed and the result plots while
the tables are written; the metrics' HSDs on threads; the heap not collected at exit) against one thing
after another (old: `reduce_user_scores(in_parallel=False)`, no plot process, the heap collected at exit:
the code path before issue 45), the two run in turn, A B B A ..., so that a load spike hits both alike.

    .venv/bin/python benchmarks/bench_reducer.py              # paper scale, 4 pairs
    .venv/bin/python benchmarks/bench_reducer.py --quick      # 600 questions, B = 1,000, 2 pairs

Prints each run's split, the medians, the ratio new/old pair by pair (wall and CPU, CPU counting the plot
process), and whether both wrote the same 21 files byte for byte. On a shared machine the absolute times
follow its load; quote the ratios and say the load (printed).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import filecmp
import functools
import gc
import importlib.abc
import importlib.machinery
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HYPOTHESES = REPO / "configs" / "hypotheses" / "paper-h1-h3.yaml"


def run_command(mode: str, scores: Path, out: Path, b: int) -> dict[str, float]:
    """`ccrs stats` in this process (a fresh one: `--child`), as the command runs it, timed by phase:
    imports (outside the other phases), statistics (compute_all), figures (the time this process spends on
    them: drawing, or starting and waiting for the plot process), the rest (reading and checking the
    scores, tables, verdict). Old: reduce_user_scores(in_parallel=False), no plot process, and the heap
    collected at exit."""
    started = time.perf_counter()
    spent = {"imports": 0.0, "statistics": 0.0, "figures": 0.0}
    phases = [0]  # > 0 inside a timed phase: its imports are its own

    def patch_analysis(analysis):
        analysis.compute_all = _timed(analysis.compute_all, spent, "statistics", phases)

    def patch_plots(plots):
        plots.write_plots = _timed(plots.write_plots, spent, "figures", phases)
        for method in ("__init__", "draw_scores", "add_result", "write", "__exit__"):
            timed = _timed(getattr(plots.BackgroundPlots, method), spent, "figures", phases)
            setattr(plots.BackgroundPlots, method, timed)
        if mode == "old":
            plots.BackgroundPlots.for_a_fresh_process = classmethod(lambda cls: contextlib.nullcontext())

    def patch_report(report):
        if mode == "old":
            report.reduce_user_scores = functools.partial(report.reduce_user_scores, in_parallel=False)

    sys.meta_path.insert(0, _AfterImport({"stats.analysis": patch_analysis, "pipelines.reporting.plots":
                                          patch_plots, "pipelines.reporting.report": patch_report}))
    _time_imports(spent, phases)
    from pipelines.cli import main

    code = main(["stats", str(scores), "--out", str(out), "--hypotheses", str(HYPOTHESES), "--b", str(b),
                 "--no-progress"])
    if mode == "old":  # its heap collected at exit, as before
        atexit.unregister(gc.freeze)
    spent["total"] = time.perf_counter() - started
    spent["rest"] = spent["total"] - spent["imports"] - spent["statistics"] - spent["figures"]
    if code:
        raise SystemExit(f"ccrs stats exited {code}")
    return spent


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls patches[name](module) once that module has run: the timers go in without importing anything
    before the command does."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            self.patches[name](module)

        spec.loader.exec_module = exec_module
        return spec


def _time_imports(spent: dict[str, float], phases: list[int]) -> None:
    """Add the time of every outermost import outside a timed phase to spent["imports"] (through the import
    statement's own loader function, which it looks up at each import)."""
    bootstrap = sys.modules["_frozen_importlib"]
    find_and_load = bootstrap._find_and_load
    depth = [0]

    def timed(name, import_):
        if depth[0] or phases[0]:
            return find_and_load(name, import_)
        depth[0] += 1
        started = time.perf_counter()
        try:
            return find_and_load(name, import_)
        finally:
            depth[0] -= 1
            spent["imports"] += time.perf_counter() - started

    bootstrap._find_and_load = timed


def _timed(function, spent: dict[str, float], phase: str, phases: list[int]):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        if phases[0]:  # inside another phase (write_plots when the plot process failed)
            return function(*args, **kwargs)
        phases[0] += 1
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            phases[0] -= 1
            spent[phase] += time.perf_counter() - started

    return timed


def one_run(mode: str, scores: Path, out: Path, b: int) -> dict[str, float]:
    """A fresh process running the command: its split, its wall time and its CPU (with the plot process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    reply = subprocess.run([sys.executable, __file__, "--child", mode, str(scores), str(out), str(b)],
                           check=True, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    spent = json.loads(reply.stdout.strip().splitlines()[-1])
    return {**spent, "start+exit": wall - spent["total"], "process wall": wall, "process cpu": cpu}


def same_files(first: Path, second: Path) -> bool:
    names = sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file())
    other = sorted(path.relative_to(second) for path in second.rglob("*") if path.is_file())
    return names == other and all(filecmp.cmp(first / name, second / name, shallow=False) for name in names)


PHASES = ("imports", "statistics", "figures", "rest", "start+exit", "process wall", "process cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=4719)
    parser.add_argument("--b", type=int, default=10000)
    parser.add_argument("--pairs", type=int, default=4, help="old/new pairs, run in turn")
    parser.add_argument("--quick", action="store_true", help="600 questions, B = 1,000, 2 pairs")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "SCORES", "OUT", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, scores, out, b = args.child
        print(json.dumps(run_command(mode, Path(scores), Path(out), int(b))))
        return
    if args.quick:
        args.queries, args.b, args.pairs = 600, 1000, 2
    from benchmarks.bench_stats import synthetic_scores  # here: a --child process times its own imports

    print(f"`ccrs stats`, {args.queries} questions x 6 systems x 5 metrics, B = {args.b}; {os.cpu_count()} "
          f"CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        scores = Path(tmp) / "scores.parquet"
        synthetic_scores(args.queries).to_parquet(scores)
        runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for pair in range(args.pairs):
            for mode in ("old", "new") if pair % 2 == 0 else ("new", "old"):
                runs[mode].append(one_run(mode, scores, Path(tmp) / f"{mode}{pair}", args.b))
                print(f"  pair {pair + 1} {mode}: " + ", ".join(f"{phase} {runs[mode][-1][phase]:.2f} s"
                                                             for phase in PHASES))
        identical = same_files(Path(tmp) / "old0", Path(tmp) / "new0")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("median seconds        " + "  ".join(f"{phase:>12}" for phase in PHASES))
    for mode in ("old", "new"):
        print(f"  {mode:<19} " + "  ".join(f"{statistics.median(r[phase] for r in runs[mode]):12.2f}"
                                         for phase in PHASES))
    for figure in ("process wall", "process cpu"):
        ratios = [new[figure] / old[figure] for old, new in zip(runs["old"], runs["new"])]
        print(f"new/old {figure}, pair by pair: " + ", ".join(f"{ratio:.2f}" for ratio in ratios)
              + f" (median {statistics.median(ratios):.2f})")
    print(f"old and new wrote the same files byte for byte: {'yes' if identical else 'NO'}")


if __name__ == "__main__":
    main()
