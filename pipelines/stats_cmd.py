"""`ccrs stats SCORES --out DIR`: randomized Tukey HSD, bootstrap CIs, hypotheses (Holm), descriptive
statistics and correlations of long-format per-sample scores; writes stats.json, tables and plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, name: str = "stats") -> None:
    parser.add_argument(
        "scores", type=Path, help="Parquet or CSV with columns query_id, system, metric, score"
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder (stats.json, tables/, plots/)")
    parser.add_argument(
        "--hypotheses", type=Path, default=None, help="hypotheses YAML (see configs/hypotheses)"
    )
    parser.add_argument("--b", type=int, default=10000, help="HSD iterations and bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same output)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from stats.errors import StatsInputError
    from stats.hypotheses import load_hypotheses
    from judges.suite import metric_order
    from stats.report import compute_all, load_scores, write_outputs
    from tasks.reduce import suite_membership

    try:
        scores = load_scores(args.scores)
        hypotheses = load_hypotheses(args.hypotheses) if args.hypotheses is not None else None
        with _progress(scores["metric"].nunique(), disabled=args.no_progress) as advance:
            result = compute_all(
                scores, hypotheses, b=args.b, seed=args.seed, alpha=args.alpha, on_metric=advance,
                metric_order=metric_order(), metric_suites=suite_membership(),
            )
        written = write_outputs(result, scores, args.out)
    except StatsInputError as error:
        print(f"ccrs stats: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"ccrs stats: error: cannot write to {args.out}: {error}", file=sys.stderr)
        return 2
    _print_summary(result, written, args.out)
    return 0


def _print_comparison(rows: list[dict]) -> None:
    """One line per suite, metrics by discriminative power (the CCRS paper's Table 3)."""
    by_suite: dict[str, list[str]] = {}
    for row in rows:
        power = row["discriminative_power"]
        shown = "n/a" if power is None else f"{power:.3f}"
        by_suite.setdefault(row["suite"] or "(no suite)", []).append(f"{row['metric']} {shown}")
    for suite, metrics in by_suite.items():
        print(f"  discriminative power, {suite}: {', '.join(metrics)}")


class _progress:
    """tqdm bar over metrics (on stderr), advanced each time a metric's tests are done."""

    def __init__(self, total: int, disabled: bool):
        self.total, self.disabled, self.bar = total, disabled, None

    def __enter__(self):
        from tqdm import tqdm

        self.bar = tqdm(
            total=self.total, desc="ccrs stats", unit="metric", disable=self.disabled, file=sys.stderr
        )
        return self.advance

    def advance(self, metric: str) -> None:
        self.bar.set_postfix_str(metric)
        self.bar.update(1)

    def __exit__(self, *exc_info) -> None:
        self.bar.close()


def _print_summary(result: dict, written: list[Path], out_dir: Path) -> None:
    print(f"{result['n_queries']} queries, systems {result['systems']}, metrics {result['metrics']}")
    for metric, entry in result["per_metric"].items():
        power = entry["discriminative_power"]
        shown = "n/a" if power is None else f"{power:.3f}"
        print(
            f"  {metric}: n_used={entry['n_used']} n_dropped={entry['n_dropped']} "
            f"discriminative power={shown}"
        )
    _print_comparison(result["discriminative_power_comparison"])
    for name, entry in result["hypotheses"].items():
        verdict = "significant" if entry["significant"] else "not significant"
        print(f"  {name}: raw p={entry['raw_p']:.4g} adjusted p={entry['adjusted_p']:.4g} -> {verdict}")
    for note in result["notes"]:
        print(f"  note: {note}")
    print(f"wrote {len(written)} files to {out_dir}")
