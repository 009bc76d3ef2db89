"""Coverage of the human-calibrated (PPI++) intervals over label counts 10-200, the published interval
beside this project's (stats/ppi.py, stats/ppi_coverage.py; the table in docs/human-labels.md).

Simulated data (issue 45's design: 4 systems, 400 questions, 1-5 marks, the judge +0.10 toward two
systems, every pair's true difference 0; and two designs where marks crowd an end of the scale), D data
sets per cell, a numpy Generator seeded per cell. Per label count n (the same n questions labeled for
every system) and interval rule, the figures are: the coverage of the 95% intervals of the systems'
means (the lowest of the four), of the pairs' differences (the lowest of the six), and the family-wise
error of the Holm decisions (any pair declared different); and the mean width of this code's intervals
of the means over the published ones'. The rules compared:

    published   z quantile, lam tuned on the labels (PPI++ as published; this code before issue 45)
    t           t(n - 1) quantile, lam tuned
    t, lam 0    t(n - 1), lam 0 below TUNE_LAM_FROM labels, tuned from it on
    this code   t, lam 0 below TUNE_LAM_FROM, and the labels' scale: the score interval, and the exact
                bound for labels all one value inside the scale (stats.ppi.SMALL_SAMPLE)

It prints the label floor the table gives: the smallest n at which this code's coverage of the means is
>= 0.93 and the family-wise error <= 0.06 on issue 45's design.

    .venv/bin/python benchmarks/bench_ppi_coverage.py                  # D = 2000 (~1 min on 2 cores)
    .venv/bin/python benchmarks/bench_ppi_coverage.py --datasets 1000 --counts 10 30
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.ppi import PUBLISHED, SMALL_SAMPLE, TUNE_LAM_FROM, IntervalRule  # noqa: E402
from stats.ppi_coverage import CoverageDesign, coverage  # noqa: E402

COUNTS = (10, 15, 20, 30, 60, 100, 200)
ISSUE = CoverageDesign()
DESIGNS = {
    "issue 45's: 1-5 marks around 3.4": ISSUE,
    "1-5 marks crowded at the top (mean mark 4.6)": CoverageDesign(
        mark_means=(4.6,) * 4, question_sd=0.5, answer_sd=0.5),
    "0/1 metric of good systems (share 0.90)": CoverageDesign(
        mark_means=(1.04,) * 4, question_sd=0.3, answer_sd=0.3, marks=(0, 1)),
}
RULES = {
    "published": PUBLISHED,
    "t": IntervalRule("t", 2, use_scale=False),
    "t, lam 0": IntervalRule("t", TUNE_LAM_FROM, use_scale=False),
    "this code": SMALL_SAMPLE,
}
FLOOR_COVERAGE, FLOOR_FWER = 0.93, 0.06


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=2000, help="data sets per cell (default 2000)")
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS), help="labels per system")
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    floor = None
    for index, (name, design) in enumerate(DESIGNS.items()):
        rules = RULES if design is ISSUE else {key: RULES[key] for key in ("published", "this code")}
        print(f"\n{name}; {args.datasets} data sets per cell: coverage of the means / of the pairs / "
              f"family-wise error (Holm)\n")
        print("| labels | " + " | ".join(rules) + " | width / published |")
        print("| --- |" + " --- |" * (len(rules) + 1))
        for n in args.counts:
            cells = {key: coverage(design, n, args.datasets, np.random.default_rng([args.seed, index, n]),
                                   rule) for key, rule in rules.items()}
            ours = cells["this code"]
            print(f"| {n} | " + " | ".join(_cell(figures) for figures in cells.values())
                  + f" | {ours.mean_width / cells['published'].mean_width:.2f} |")
            if (design is ISSUE and floor is None and ours.mean_coverage.min() >= FLOOR_COVERAGE
                    and ours.fwer <= FLOOR_FWER):
                floor = n
    print(f"\nlabel floor (issue 45's design, this code: means >= {FLOOR_COVERAGE}, FWER <= {FLOOR_FWER}): "
          f"{floor}; {time.perf_counter() - start:.0f} s")
    return 0


def _cell(figures) -> str:
    return f"{figures.mean_coverage.min():.3f} / {figures.pair_coverage.min():.3f} / {figures.fwer:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
