"""Coverage of the judge-noise bootstrap CIs on simulated data (docs/judge-trust.md, the coverage table).

For each setting: `--data-sets` normal data sets (3 systems with true means 0.5, 0.55, 0.6; the given
question, system x question and residual variances), 400 resamples each; prints one Markdown row per
scheme: the share of 95% percentile CIs that hold the true system means (pooled over systems), the true
reliability and the true question, system x question and residual components. `ours` is
stats.judge_noise.two_level_bootstrap; `plain` resamples questions and then repeats with replacement
without any adjustment. Slow on purpose (about 15 minutes on 2 cores at the default 400 data sets).

    .venv/bin/python benchmarks/coverage_judge_noise.py [--data-sets 400]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stats.judge_noise as judge_noise  # noqa: E402

EFFECTS = np.array([0.5, 0.55, 0.6])
SETTINGS = [(30, 2, 0.02, 0.005, 0.02), (60, 2, 0.02, 0.004, 0.02), (30, 3, 0.01, 0.01, 0.01),
            (100, 2, 0.01, 0.004, 0.01), (40, 5, 0.01, 0.004, 0.01)]
RESAMPLES = 400


def simulate(rng, n_questions, n_repeats, question, interaction, residual):
    k = len(EFFECTS)
    return (EFFECTS[None, :, None] + rng.normal(0, np.sqrt(question), (n_questions, 1, 1))
            + rng.normal(0, np.sqrt(interaction), (n_questions, k, 1))
            + rng.normal(0, np.sqrt(residual), (n_questions, k, n_repeats)))


def ours(y, rng):
    result = judge_noise.two_level_bootstrap(y, RESAMPLES, rng)
    return ((result.means_low, result.means_high), (result.components_low, result.components_high),
            (result.reliability_low, result.reliability_high))


def plain(y, rng):
    n_q, n_s, n_r = y.shape
    cells = y.mean(axis=2)
    deviations = y - cells[..., None]
    questions = rng.integers(0, n_q, (RESAMPLES, n_q))
    repeats = rng.integers(0, n_r, (RESAMPLES, n_q, n_s, n_r))
    flat = (questions[:, :, None, None] * n_s + np.arange(n_s)[None, None, :, None]) * n_r + repeats
    sample = cells[questions][..., None] + deviations.ravel()[flat]
    variances = np.maximum(judge_noise._estimates(judge_noise._mean_squares(sample), n_q, n_s, n_r), 0.0)
    bounds = [2.5, 97.5]
    return (np.percentile(sample.mean(axis=(1, 3)), bounds, axis=0), np.percentile(variances, bounds, axis=0),
            np.percentile(judge_noise.reliability(variances, n_r), bounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-sets", type=int, default=400)
    data_sets = parser.parse_args().data_sets
    print("| questions | repeats | var_q | var_sq | var_e | scheme | means | reliability | var_q | var_sq "
          "| var_e |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n_q, n_r, question, interaction, residual in SETTINGS:
        truth = np.array([np.var(EFFECTS, ddof=1), question, interaction, residual])
        true_reliability = interaction / (interaction + residual / n_r)
        for name, scheme in (("ours", ours), ("plain", plain)):
            data_rng, rng = np.random.default_rng(7), np.random.default_rng(1)
            means, reliability, components = 0.0, 0, np.zeros(4)
            for _ in range(data_sets):
                (mean_low, mean_high), (low, high), (rel_low, rel_high) = scheme(
                    simulate(data_rng, n_q, n_r, question, interaction, residual), rng)
                means += ((mean_low <= EFFECTS) & (EFFECTS <= mean_high)).mean()
                reliability += rel_low <= true_reliability <= rel_high
                components += (low <= truth) & (truth <= high)
            shares = components / data_sets
            print(f"| {n_q} | {n_r} | {question} | {interaction} | {residual} | {name} "
                  f"| {means / data_sets:.3f} | {reliability / data_sets:.3f} | {shares[1]:.3f} "
                  f"| {shares[2]:.3f} | {shares[3]:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
