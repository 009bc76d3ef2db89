"""`ccrs stats SCORES|RUN_DIR [--out DIR] [--labels LABELS]`: randomized Tukey HSD, bootstrap CIs, hypotheses
(Holm), descriptive statistics and correlations of long-format per-sample scores, and with human labels
the human-calibrated (PPI++) statistics; writes stats.json, tables and plots."""

from __future__ import annotations

import argparse
import atexit
import gc
import sys
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "stats") -> None:
    parser.add_argument(
        "scores", type=Path, help="Parquet, CSV or JSONL of per-sample scores: long (query_id, system, "
        "metric, score) or wide (query_id, system and one column per metric); question_id or id may stand "
        "for query_id; an optional integer `repeat` column marks repeated judgments of one answer (judge "
        "noise, docs/judge-trust.md). Or a run directory: its judge stages' scores, and its human labels "
        "(RUN_DIR/labels, `ccrs label`) unless --labels is given"
    )
    options.add_out(parser, name, "stats.json, tables/, plots/, summary.md")
    options.add(parser, name, "--scale", "--hypotheses", "--b", "--seed", "--alpha", "--no-progress",
                "--markdown")
    options.add_extensions(parser, name)


def main(args: argparse.Namespace) -> int:
    from pipelines.reporting.plots import BackgroundPlots

    # At exit Python's last collections walk every object the imports made (~0.3 s of a paper-scale run);
    # frozen, they are skipped: the process ends, and nothing it wrote is left open.
    atexit.register(gc.freeze)
    # Started first: the plot process imports matplotlib while this one imports the statistics.
    with BackgroundPlots.for_a_fresh_process() as plots:
        return _run(args, plots)


def _run(args: argparse.Namespace, plots) -> int:
    from infra.console import print_markdown, say
    from pipelines.extensions import command_hooks, verdict_sections
    from stats.errors import StatsInputError
    from pipelines.reporting.report import reduce_user_scores, user_scores

    hooks = command_hooks("stats")
    try:
        for hook in hooks:
            if hook.check is not None:
                hook.check(args)
        frame, contributed = scores_and_inputs(args)
        frame = user_scores(frame, options.parse_scale(args.scale))
        with _progress(frame["metric"].nunique(), disabled=args.no_progress) as advance:
            result, written, verdict = reduce_user_scores(
                frame, args.out, hypotheses_path=args.hypotheses, b=args.b, seed=args.seed,
                alpha=args.alpha, title=args.scores.name, on_metric=advance, sections=verdict_sections(),
                plots=plots, **contributed)
        for hook in hooks:
            if hook.stats_verdict is not None:
                verdict = hook.stats_verdict(args, frame, verdict)
    except StatsInputError as error:
        print(f"ccrs stats: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"ccrs stats: error: cannot write to {args.out}: {error}", file=sys.stderr)
        return 2
    if args.markdown:
        say(verdict)
    else:
        print_markdown(verdict)
    _print_summary(result, written, args.out)
    return 0


def scores_and_inputs(args: argparse.Namespace):
    """The scores (a file, or a run directory's judge stages) and what the run extensions' statistics
    contributors add to them from their options or the run directory (e.g. its human labels); an input that
    cannot be read is the command's error. `ccrs_eval.compute_stats` reads a run folder through it."""
    from pipelines.extensions import command_values, statistics_contributors
    from tasks.reduce import read_scores_file, run_folder_scores
    from tasks.runtime.contributions import StatisticsContext, contributed_inputs

    run_dir = args.scores if args.scores.is_dir() else None
    frame = run_folder_scores(run_dir) if run_dir is not None else read_scores_file(args.scores)
    found = contributed_inputs(statistics_contributors(),
                               StatisticsContext(run_dir, options=command_values(args, "stats")))
    if found.failed:
        raise found.failed[0][1]
    return frame, found.kwargs


def _print_comparison(rows: list[dict]) -> None:
    """One line per suite, metrics by discriminative power (the CCRS paper's Table 3)."""
    by_suite: dict[str, list[str]] = {}
    for row in rows:
        power = row["discriminative_power"]
        shown = "n/a" if power is None else f"{power:.3f}"
        by_suite.setdefault(row["suite"] or "your metrics", []).append(f"{row['metric']} {shown}")
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


def _print_judge_noise(noise: dict) -> None:
    """One line: the judge's reliability over the repeats, its CI and the pairs a single repeat flips."""
    low, high = noise["reliability_ci95"]
    flaky = ", ".join(f"{a} vs {b}" for a, b in noise["flaky_pairs"]) or "none"
    verdicts = (f", stable verdicts {noise['stable_share']:.0%}, flaky pairs: {flaky}"
                if noise["stable_share"] is not None else "")  # None: one system, no pair verdicts
    print(f"    judge noise ({noise['n_repeats']} repeats): reliability {noise['reliability']:.3f} "
          f"[{low:.3f}, {high:.3f}]{verdicts}")


def _print_summary(result: dict, written: list[Path], out_dir: Path) -> None:
    from pipelines.extensions import command_hooks

    print(f"{result['n_queries']} queries, systems {result['systems']}, metrics {result['metrics']}")
    for metric, entry in result["per_metric"].items():
        power = entry["discriminative_power"]
        shown = "n/a" if power is None else f"{power:.3f}"
        print(
            f"  {metric}: n_used={entry['n_used']} n_dropped={entry['n_dropped']} "
            f"discriminative power={shown}"
        )
        if entry.get("judge_noise"):
            _print_judge_noise(entry["judge_noise"])
        for hook in command_hooks("stats"):
            for line in hook.metric_lines(entry) if hook.metric_lines else ():
                print(line)
    _print_comparison(result["discriminative_power_comparison"])
    for name, entry in result["hypotheses"].items():
        verdict = "significant" if entry["significant"] else "not significant"
        print(f"  {name}: raw p={entry['raw_p']:.4g} adjusted p={entry['adjusted_p']:.4g} -> {verdict}")
    for note in result["notes"]:
        print(f"  note: {note}")
    print(f"wrote {len(written)} files to {out_dir}")
