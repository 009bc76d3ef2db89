"""The error rate of the nightly gate's human-scale test (pipelines/extensions/labels.py
human_calibrated_cells; the table in docs/human-labels.md, "The nightly gate and --require-human").

Two nights of the same quality, D pairs a cell: n labeled answers a night (every answer labeled, or 3
judged per labeled one), labels binary (p 0.5, 0.7, 0.85) or marks 1-5 (uniform, skewed up) mapped onto
[0, 1], the judge the label plus N(0, 0.2) clipped; each night's PPI++ mean and 95% interval as
stats.ppi gives them (the labels' scale known). Per cell it prints how often each test rejects at alpha
0.05: `z` (the test before this one: the widths read as z intervals', no correction) and `gate` (the
gate's: Welch t with a continuity correction of half a label step a night); then the largest of each,
and the gate's power to find a drop of 0.2.

    .venv/bin/python benchmarks/bench_gate_human_scale.py                 # D = 20000 (~2 min on 2 cores)
    .venv/bin/python benchmarks/bench_gate_human_scale.py --datasets 4000 --counts 10 25
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.extensions.labels import welch_p_value  # noqa: E402
from stats.labels import label_step  # noqa: E402
from stats.ppi import ppi_mean_batch  # noqa: E402

LABELS = {"binary 0.5": (1.0, 1.0), "binary 0.7": (3.0, 7.0), "binary 0.85": (3.0, 17.0),
          "1-5 uniform": (1, 1, 1, 1, 1), "1-5 skewed": (1, 1, 2, 4, 6)}
Z_95 = float(stats.norm.ppf(0.975))


def nights(rng, weights, n: int, unlabeled: int, sets: int):
    """(estimates, lows, highs, label steps) of `sets` nights."""
    probabilities = np.asarray(weights, dtype=float) / np.sum(weights)
    y = rng.choice(len(probabilities), size=(sets, n + unlabeled), p=probabilities) / (len(probabilities) - 1)
    f = np.clip(y + rng.normal(0.0, 0.2, size=y.shape), 0.0, 1.0)
    batch = ppi_mean_batch(y[:, :n], f[:, :n], f[:, n:], 0.05, bounds=(0.0, 1.0))
    return batch.estimate, batch.low, batch.high, np.array([label_step(row) for row in y[:, :n]])


def rates(rng, weights, n: int, unlabeled: int, sets: int, shift: float = 0.0) -> tuple[float, float]:
    (e1, l1, h1, g1), (e2, l2, h2, g2) = (nights(rng, weights, n, unlabeled, sets) for _ in range(2))
    diff = e1 - (e2 - shift)
    se1, se2 = (h1 - l1) / (2 * Z_95), (h2 - l2) / (2 * Z_95)
    total = np.hypot(se1, se2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(total > 0, 2 * stats.norm.sf(np.abs(diff) / total), (diff == 0).astype(float))
    gate = [welch_p_value(d, [a, b], [n, n], (s1 + s2) / (2 * n))
            for d, a, b, s1, s2 in zip(diff, se1, se2, g1, g2)]
    return float(np.mean(z < 0.05)), float(np.mean(np.array(gate) < 0.05))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=20_000)
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 12, 15, 20, 25, 30, 40, 60])
    args = parser.parse_args()
    worst_z, worst_gate, power = 0.0, 0.0, []
    for n in args.counts:
        for name, weights in LABELS.items():
            for unlabeled in (0, 3 * n):
                rng = np.random.default_rng([n, unlabeled, len(weights), int(100 * weights[-1])])
                z, gate = rates(rng, weights, n, unlabeled, args.datasets)
                _, found = rates(rng, weights, n, unlabeled, args.datasets // 4, shift=0.2)
                worst_z, worst_gate = max(worst_z, z), max(worst_gate, gate)
                power.append(found)
                print(f"n={n:3d} N={unlabeled:3d} {name:12s}  z {z:.4f}  gate {gate:.4f}  "
                      f"power@0.2 {found:.2f}", flush=True)
    print(f"largest rejection rate at alpha 0.05: z {worst_z:.4f}, gate {worst_gate:.4f}; "
          f"gate's power at a drop of 0.2: {min(power):.2f}-{max(power):.2f} ({args.datasets} pairs a cell)")


if __name__ == "__main__":
    main()
