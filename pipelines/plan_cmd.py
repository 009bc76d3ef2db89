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
    options.add(power, "plan power", "--pilot", required=True)
    options.add(power, "plan power", "--metric", "--delta", "--power", "--alpha", "--b", "--replicates",
                "--seed")
    options.add_alias(power, "--sim-b", next(a for a in power._actions if a.dest == "b"))
    power.add_argument("--max-repeats", type=int, default=5, help="decision study (a pilot with a repeat "
                       "column): judge repeats per answer to consider, 1..N (default 5)")
    power.add_argument("--budget", type=int, help="decision study: judge calls per metric it may cost "
                       "(questions x systems x repeats)")
    questions = options.add(power, "plan power", "--questions")[0]
    options.add_alias(power, "--max-questions", questions)  # the decision study's questions available
    options.add_extensions(power, "plan power")
    _plan_outputs(power, "plan power", "power_plan.json and power.png")

    cost = sub.add_parser("cost", help="calls, tokens, FLOPs, GPU-hours and wall time of a run config")
    options.add_config(cost, "plan cost")
    options.add(cost, "plan cost", "--questions")
    calibration = cost.add_argument("--calibration-questions", type=int, default=8, metavar="N",
                                    help="the dataset's first N questions with a reference answer, whose "
                                    "prompts calibrate the token counts (default 8)")
    options.add_alias(cost, "--sample", calibration)
    dataset = cost.add_argument("--calibration-dataset", metavar="PATH",
                                help="dataset to calibrate on when the config's is not here")
    options.add_alias(cost, "--sample-dataset", dataset)
    cost.add_argument("--mfu", type=float, default=0.3, help="model FLOPs utilization (default 0.3)")
    _plan_outputs(cost, "plan cost", "cost_plan.json")
    add_labels_arguments(sub)


def _plan_outputs(parser: argparse.ArgumentParser, command: str, holds: str) -> None:
    """--out DIR (the plan written there; default: printed only), --json (printed as JSON); the old `--json
    FILE` and `--plot FILE` work one release, with a note."""
    options.add_out(parser, command, holds, shown="none, the plan is printed only")
    options.add(parser, command, "--json")
    parser.add_argument("--plot", type=Path, help=argparse.SUPPRESS)


def _written(args: argparse.Namespace, command: str, plan: dict, name: str) -> None:
    """The plan as JSON in --out (and the old --json FILE)."""
    targets = [args.out / name] if args.out else []
    if isinstance(args.json, str):
        print(f"ccrs {command}: --json FILE is deprecated, use --out DIR (--json prints the plan as JSON; "
              "the "
              "old form goes in the next release)", file=sys.stderr)
        targets.append(Path(args.json))
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(plan, indent=2))


def add_labels_arguments(sub) -> None:
    labels = sub.add_parser("labels", help="human labels per system for a PPI++ CI width or a detectable "
                            "difference")
    command = "plan labels"
    options.add(labels, command, "--pilot", required=True)
    options.add_extensions(labels, command)  # --labels, --label-scale, --predicted-by
    options.add(labels, command, "--scale")
    target = labels.add_mutually_exclusive_group(required=True)
    target.add_argument("--width", type=float, metavar="W", help="95%% (1 - alpha) CI half-width of each "
                        "system's mean, on the [0, 1] scale")
    options.add(target, command, "--delta")
    options.add(labels, command, "--power", "--alpha", "--metric", "--questions", "--replicates", "--seed")
    options.add_out(labels, command, "labels_plan.json")


def main(args: argparse.Namespace) -> int:
    if args.plan == "labels":
        return labels_main(args)
    return power_main(args) if args.plan == "power" else cost_main(args)


def labels_main(args: argparse.Namespace) -> int:
    from judges.suite import metric_order
    from pipelines.tools.planning.active_labels import plan_labels, render  # with the --design's part
    from pipelines.tools.planning.labels import PLAN_FILE, load_pilot_and_labels
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
                           metric_order=metric_order(), design=args.design, pilot=args.pilot)
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
    from pipelines.tools.planning.power import load_pilot, markdown, plan_power
    from stats.errors import StatsInputError

    try:
        pilot = load_pilot(args.pilot)
        plan = plan_power(pilot, args.metric, args.delta, args.power, args.alpha, args.b, args.replicates,
                          args.seed, metric_order(), max_repeats=args.max_repeats, budget=args.budget,
                          max_questions=args.questions)
        for hook in command_hooks("plan power"):
            plan.update(hook.power_plan(args, pilot, plan) if hook.power_plan else {})
    except StatsInputError as exc:
        print(f"ccrs plan power: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2) if args.json is True else markdown(plan))
    if args.json is not True:
        print(json.dumps({"n_questions": plan["n_questions"]}))
    _written(args, "plan power", plan, "power_plan.json")
    plots = ([args.out / "power.png"] if args.out else []) + ([args.plot] if args.plot else [])
    if args.plot:
        print("ccrs plan power: --plot FILE is deprecated, use --out DIR (power.png in it; the old option "
              "goes "
              "in the next release)", file=sys.stderr)
    for plot in plots:
        from pipelines.reporting.plots import power_curves

        plot.parent.mkdir(parents=True, exist_ok=True)
        power_curves(plan, plot)
    return 0


def cost_main(args: argparse.Namespace) -> int:
    from pipelines.config import ConfigError, load_config
    from pipelines.tools.planning.cost import CostPlanError, cost_plan
    from pipelines.tools.planning.cost_render import render
    from retrievers.schema import DatasetError

    try:
        plan = cost_plan(load_config(args.config), args.questions, args.calibration_questions,
                         args.calibration_dataset, args.mfu)
    except (ConfigError, CostPlanError, DatasetError) as exc:
        print(f"ccrs plan cost: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2) if args.json is True else render(plan))
    _written(args, "plan cost", plan, "cost_plan.json")
    return 0
