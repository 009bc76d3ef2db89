"""`ccrs plan power|cost`: plan an evaluation before paying for it.

- `ccrs plan power --pilot RUN_DIR|SCORES`: the number of questions that separates systems by `delta`
  with the randomized Tukey HSD at the target power (topic set size design, checked by simulation);
- `ccrs plan cost --config CONFIG`: calls, prompt tokens (sent and computed under prefix reuse), output
  tokens, FLOPs, GPU-hours and wall time of a run config. See docs/planning.md."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str = "plan") -> None:
    sub = parser.add_subparsers(dest="plan", required=True, metavar="{power,cost}")
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
    power.add_argument("--json", type=Path, help="write the plan as JSON (n_questions per metric)")
    power.add_argument("--plot", type=Path, help="PNG of power against the number of questions per metric")

    cost = sub.add_parser("cost", help="calls, tokens, FLOPs, GPU-hours and wall time of a run config")
    options.add_config(cost)
    cost.add_argument("--questions", type=int, help="questions to plan for (default: the config's limit)")
    cost.add_argument("--sample", type=int, default=8, help="questions of the dataset to calibrate on")
    cost.add_argument("--sample-dataset", help="dataset to calibrate on when the config's is not here")
    cost.add_argument("--mfu", type=float, default=0.3, help="model FLOPs utilization (default 0.3)")
    cost.add_argument("--json", type=Path, help="write the plan as JSON")


def main(args: argparse.Namespace) -> int:
    return power_main(args) if args.plan == "power" else cost_main(args)


def power_main(args: argparse.Namespace) -> int:
    from judges.suite import metric_order
    from pipelines.tools.power_plan import load_pilot, markdown, plan_power
    from stats.errors import StatsInputError

    try:
        plan = plan_power(load_pilot(args.pilot), args.metric, args.delta, args.power, args.alpha, args.sim_b,
                          args.replicates, args.seed, metric_order(), max_repeats=args.max_repeats,
                          budget=args.budget, max_questions=args.max_questions)
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
