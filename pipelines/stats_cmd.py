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
from stats.sequential import DEFAULT_TARGET, TARGETS


def add_arguments(parser: argparse.ArgumentParser, name: str = "stats") -> None:
    parser.add_argument(
        "scores", type=Path, help="Parquet, CSV or JSONL of per-sample scores: long (query_id, system, "
        "metric, score) or wide (query_id, system and one column per metric); question_id or id may stand "
        "for query_id; an optional integer `repeat` column marks repeated judgments of one answer (judge "
        "noise, docs/judge-trust.md). Or a run directory: its judge stages' scores, and its human labels "
        "(RUN_DIR/labels, `ccrs label`) unless --labels is given"
    )
    options.add_out(parser, "stats", "stats.json, tables/, plots/, summary.md")
    parser.add_argument("--scale", nargs="+", metavar="MIN MAX", help="the scores' scale, mapped onto [0, 1] "
                        "(e.g. --scale 1 5 or --scale 1-5 for a Likert mark, --scale 0 100); default: the "
                        "scores are already on [0, 1]")
    options.add_labels(parser, "adds the human-calibrated (PPI++) statistics, docs/human-labels.md")
    parser.add_argument(
        "--hypotheses", type=Path, default=None, help="hypotheses YAML (see configs/hypotheses)"
    )
    options.add_bootstrap(parser, "HSD iterations and bootstrap resamples")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--markdown", action="store_true", help="print the verdict's Markdown source")
    parser.add_argument("--sequential", action="store_true", help="also replay the scores as a sequential "
                        "run: questions in the seeded random order (--seed), a look every --look-every "
                        "questions, stopping once every pair is different or equivalent within --margin "
                        "(anytime-valid at --alpha; docs/sequential.md)")
    parser.add_argument("--margin", type=float, metavar="M", help="with --sequential: the equivalence "
                        "margin on the [0, 1] score scale (e.g. 0.02)")
    parser.add_argument("--look-every", type=int, metavar="L", help="with --sequential: questions per look")
    parser.add_argument("--min-questions", type=int, metavar="N", help="with --sequential: no stop before N "
                        "questions (default 0)")
    parser.add_argument("--max-questions", type=int, metavar="N", help="with --sequential: stop after N "
                        "questions at the latest (default: all)")
    parser.add_argument("--target", choices=TARGETS, help="with --sequential: decide about the population "
                        "of questions the scores' are drawn from (population, as the HSD), or about these "
                        f"questions only (questions: sampling without replacement); default {DEFAULT_TARGET}")


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
    from pipelines.extensions import verdict_sections
    from stats.errors import StatsInputError
    from pipelines.reporting.report import reduce_user_scores, user_scores
    from pipelines.tools.sequential_replay import check_sequential_options, sequential_replay

    try:
        check_sequential_options(args)
        frame, labels = _scores_and_labels(args)
        frame = user_scores(frame, options.parse_scale(args.scale))
        with _progress(frame["metric"].nunique(), disabled=args.no_progress) as advance:
            result, written, verdict = reduce_user_scores(
                frame, args.out, hypotheses_path=args.hypotheses, b=args.b, seed=args.seed,
                alpha=args.alpha, title=args.scores.name, on_metric=advance, sections=verdict_sections(),
                labels=labels, plots=plots)
        if args.sequential:
            verdict = sequential_replay(args, frame, verdict)
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


def _scores_and_labels(args: argparse.Namespace):
    """The scores (a file, or a run directory's judge stages) and the labels (--labels, else a run
    directory's own), the labels checked (stats.labels.LabelSet) or None."""
    from stats.errors import StatsInputError
    from stats.labels import validate_labels
    from tasks.reduce import concat_scores, read_labels_file, read_run_labels, read_scores_file, run_scores

    if args.scores.is_dir():
        frame = concat_scores([read_scores_file(path) for path in run_scores(args.scores)])
        if args.labels is None:
            if args.label_scale or args.predicted_by:
                raise StatsInputError("--label-scale and --predicted-by describe a --labels file; a run "
                                      "directory's labels carry their scales (labels/metrics.json)")
            return frame, read_run_labels(args.scores)
    else:
        frame = read_scores_file(args.scores)
    if args.labels is None:
        if args.label_scale or args.predicted_by:
            raise StatsInputError("--label-scale and --predicted-by need --labels LABELS")
        return frame, None
    scale = options.parse_scale(args.label_scale, "--label-scale")
    return frame, validate_labels(read_labels_file(args.labels), scale,
                                  options.parse_predicted_by(args.predicted_by))


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


def _print_human_calibrated(block: dict) -> None:
    pairs = block["pairwise"]
    print(f"    human-calibrated ({block['human_metric']}): {sum(block['n_labels'].values())} labels, "
          f"{sum(pair['significant'] for pair in pairs)} of {len(pairs)} pairs differ, "
          f"{sum(pair['decision_changed'] for pair in pairs)} decisions changed from the judge alone, "
          f"{len(block['too_few_labels'])} systems with too few labels")


def _print_summary(result: dict, written: list[Path], out_dir: Path) -> None:
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
        if entry.get("human_calibrated"):
            _print_human_calibrated(entry["human_calibrated"])
    _print_comparison(result["discriminative_power_comparison"])
    for name, entry in result["hypotheses"].items():
        verdict = "significant" if entry["significant"] else "not significant"
        print(f"  {name}: raw p={entry['raw_p']:.4g} adjusted p={entry['adjusted_p']:.4g} -> {verdict}")
    for note in result["notes"]:
        print(f"  note: {note}")
    print(f"wrote {len(written)} files to {out_dir}")
