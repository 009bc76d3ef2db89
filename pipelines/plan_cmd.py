"""`ccrs plan power|cost`: plan an evaluation before paying for it.

- `ccrs plan power --pilot RUN_DIR|SCORES`: the number of questions that separates systems by `delta`
  with the randomized Tukey HSD at the target power (topic set size design, checked by simulation);
- `ccrs plan cost --config CONFIG`: calls, prompt tokens (sent and computed under prefix reuse), output
  tokens, FLOPs, GPU-hours and wall time of a run config;
- `ccrs plan labels --pilot RUN_DIR|SCORES (--width W | --delta D)`: the human labels per system that
  PPI++ needs for a CI half-width or a detectable paired difference. See docs/planning.md."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "plan") -> None:
    sub = parser.add_subparsers(dest="plan", required=True, metavar="{power,cost,labels}")
    power = sub.add_parser("power", help="questions needed to separate systems (power analysis)")
    power.add_argument("--pilot", type=Path, required=True,
                       help="a run directory (its judge_<suite>/scores.parquet) or a long-format scores file")
    power.add_argument("--metric", action="append", help="metric to plan (repeatable; default: all)")
    power.add_argument("--delta", type=float, default=0.05, help="difference to detect on the [0, 1] score "
                       "scale (default 0.05 = 5 points of a 0-100 judge)")
    power.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    power.add_argument("--alpha", type=float, default=0.05)
    sim_b = power.add_argument("--sim-b", type=int, default=1000, metavar="N", help="HSD iterations per "
                               "simulated data set (default 1,000, not --b's 10,000: the simulation runs "
                               "the HSD hundreds of times, and B only sets each p-value's resolution)")
    options.add_alias(power, "--b", sim_b)
    power.add_argument("--replicates", type=int, default=400, help="simulated data sets per recommendation "
                       "(0: parametric only)")
    power.add_argument("--seed", type=int, default=options.DEFAULT_SEED, metavar="N",
                       help=f"random seed (default {options.DEFAULT_SEED}; same seed, same output)")
    power.add_argument("--max-repeats", type=int, default=5, help="decision study (a pilot with a repeat "
                       "column): judge repeats per answer to consider, 1..N (default 5)")
    power.add_argument("--budget", type=int, help="decision study: judge calls per metric it may cost "
                       "(questions x systems x repeats)")
    power.add_argument("--max-questions", type=int, help="decision study: questions available (a fixed "
                       "test set); where they are scarce, repeats pay")
    options.add_extensions(power, "plan power")
    power.add_argument("--json", type=Path, help="write the plan as JSON (n_questions per metric)")
    power.add_argument("--plot", type=Path, help="PNG of power against the number of questions per metric")

    cost = sub.add_parser("cost", help="calls, tokens, FLOPs, GPU-hours and wall time of a run config")
    options.add_config(cost)
    cost.add_argument("--questions", type=int, help="questions to plan for (default: the config's limit)")
    cost.add_argument("--sample", type=int, default=8, help="questions of the dataset to calibrate on")
    cost.add_argument("--sample-dataset", help="dataset to calibrate on when the config's is not here")
    cost.add_argument("--mfu", type=float, default=0.3, help="model FLOPs utilization (default 0.3)")
    cost.add_argument("--json", type=Path, help="write the plan as JSON")
    add_labels_arguments(sub)


def add_labels_arguments(sub) -> None:
    labels = sub.add_parser("labels", help="human labels per system for a PPI++ CI width or a detectable "
                            "difference")
    labels.add_argument("--pilot", type=Path, required=True, help="a run directory (its judge stages' scores "
                        "and its labels/, unless --labels) or a long-format scores file")
    options.add_extensions(labels, "plan labels")  # --labels, --label-scale, --predicted-by
    labels.add_argument("--scale", nargs="+", metavar="MIN MAX", help="the pilot scores' scale, mapped onto "
                        "[0, 1] (default: already on [0, 1])")
    target = labels.add_mutually_exclusive_group(required=True)
    target.add_argument("--width", type=float, metavar="W", help="95%% (1 - alpha) CI half-width of each "
                        "system's mean, on the [0, 1] scale")
    target.add_argument("--delta", type=float, metavar="D", help="paired difference between two systems to "
                        "detect, on the [0, 1] scale")
    labels.add_argument("--power", type=float, help="with --delta: target power (default 0.8)")
    labels.add_argument("--alpha", type=float, default=0.05, help="--width: the CI's level is 1 - alpha; "
                        "--delta: the pairs' family level, alpha / pairs per pair (default 0.05)")
    labels.add_argument("--metric", action="append", help="judge metric to plan (repeatable; default: all)")
    labels.add_argument("--questions", type=int, metavar="N", help="questions the run judges, labeled or "
                        "not (default: unlabeled answers far outnumber the labels)")
    labels.add_argument("--replicates", type=int, default=500, help="simulated data sets per row (0: no "
                        "simulation; default 500)")
    labels.add_argument("--seed", type=int, default=options.DEFAULT_SEED, metavar="N",
                        help=f"random seed (default {options.DEFAULT_SEED}; same seed, same output)")
    options.add_out(labels, "plan-labels", "labels_plan.json")


def main(args: argparse.Namespace) -> int:
    if args.plan == "labels":
        return labels_main(args)
    return power_main(args) if args.plan == "power" else cost_main(args)


def labels_main(args: argparse.Namespace) -> int:
    from judges.suite import metric_order
    from pipelines.tools.label_plan import PLAN_FILE, load_pilot_and_labels, plan_labels, render
    from stats.errors import StatsInputError

    try:
        if args.power is not None and args.delta is None:
            raise StatsInputError("--power goes with --delta D (a detectable difference)")
        frame, labels = load_pilot_and_labels(
            args.pilot, args.labels, options.parse_scale(args.scale),
            options.parse_scale(args.label_scale, "--label-scale"),
            options.parse_predicted_by(args.predicted_by))
        plan = plan_labels(frame, labels, args.metric, width=args.width, delta=args.delta,
                           power=0.8 if args.power is None else args.power, alpha=args.alpha,
                           n_questions=args.questions, replicates=args.replicates, seed=args.seed,
                           metric_order=metric_order())
    except StatsInputError as exc:
        print(f"ccrs plan labels: {exc}", file=sys.stderr)
        return 2
    print(render(plan))
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / PLAN_FILE).write_text(json.dumps(plan, indent=2))
    except OSError as exc:
        print(f"ccrs plan labels: cannot write to {args.out}: {exc}", file=sys.stderr)
        return 2
    print(f"plan: {args.out / PLAN_FILE}")
    return 0


def power_main(args: argparse.Namespace) -> int:
    from judges.suite import metric_order
    from pipelines.extensions import command_hooks
    from pipelines.tools.power_plan import load_pilot, markdown, plan_power
    from stats.errors import StatsInputError

    try:
        pilot = load_pilot(args.pilot)
        plan = plan_power(pilot, args.metric, args.delta, args.power, args.alpha, args.sim_b,
                          args.replicates, args.seed, metric_order(), max_repeats=args.max_repeats,
                          budget=args.budget, max_questions=args.max_questions)
        for hook in command_hooks("plan power"):
            plan.update(hook.power_plan(args, pilot, plan) if hook.power_plan else {})
    except StatsInputError as exc:
        print(f"ccrs plan power: {exc}", file=sys.stderr)
        return 2
    print(markdown(plan))
    print(json.dumps({"n_questions": plan["n_questions"]}))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(plan, indent=2))
    if args.plot:
        from pipelines.reporting.plots import power_curves

        args.plot.parent.mkdir(parents=True, exist_ok=True)
        power_curves(plan, args.plot)
    return 0


def cost_main(args: argparse.Namespace) -> int:
    from pipelines.config import ConfigError, load_config
    from pipelines.tools.cost_plan import CostPlanError, cost_plan, render
    from retrievers.schema import DatasetError

    try:
        plan = cost_plan(load_config(args.config), args.questions, args.sample, args.sample_dataset, args.mfu)
    except (ConfigError, CostPlanError, DatasetError) as exc:
        print(f"ccrs plan cost: {exc}", file=sys.stderr)
        return 2
    print(render(plan))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(plan, indent=2))
    return 0
