"""`ccrs label RUN_DIR`: a local page to label the run's answers by hand, one question at a time, every
system's answer side by side and blind (docs/human-labels.md).

    ccrs label RUN_DIR [--metric M] [--label-scale LOW HIGH] [--predicted-by M=JUDGE] [--describe TEXT]
                       [--annotator NAME] [--seed S] [--host 127.0.0.1] [--port 0] [--token TOKEN]
                       [--design uniform|active [--label-budget N] [--label-floor P] [--label-margin M]]
    ccrs label RUN_DIR --agreement

The metric: a judge metric the run scored (default: the first judged one; its scale and construct from its
declaration), or a human metric of its own (`--metric acceptable --label-scale 0 1 --predicted-by
acceptable=CC --describe "..."`). Prints the page's URL in one line and serves until Ctrl-C. The URL carries
the server's
secret (`?token=...`, fresh per start unless `--token` gives one): the page and every API call need it, and
requests from another origin, or naming another host, are refused. `--host 0.0.0.0` (or a LAN address)
lets annotators on other machines open the printed URL; the start line says so. Labels are appended to
RUN_DIR/labels/labels.jsonl as they are given (skips to skips.jsonl; the metric's scale in metrics.json,
the seeded question order in order.json); reopening resumes. `--agreement` prints each labeled metric's
annotators, answers labeled by two or more and Krippendorff's alpha, and serves nothing. Exit 2 on bad
input, in one line. `--design active` serves only the questions an active design drew (probabilities from
the judge's uncertainty, labels/design.json) and shows which comparisons the labels settle
(pipelines/tools/labeling/active.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pipelines import options
from pipelines.options import UsageError


def add_arguments(parser: argparse.ArgumentParser, name: str = "label") -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="a run folder (`ccrs run`, `ccrs evaluate`)")
    options.add(parser, name, "--metric")
    options.add_extensions(parser, name)  # --label-scale, --predicted-by HUMAN=JUDGE (the labels extension)
    options.add_alias(parser, "--scale", next(a for a in parser._actions if a.dest == "label_scale"))
    parser.add_argument("--describe", metavar="TEXT", help="a human metric's construct, shown on the page")
    parser.add_argument("--annotator", metavar="NAME", default="",
                        help="the annotator name the page starts with (the page remembers the last one)")
    options.add(parser, name, "--seed", "--host", "--port")
    parser.add_argument("--token", metavar="TOKEN",
                        help="the page's secret (16+ characters of A-Z a-z 0-9 _ -), e.g. to restart with "
                        "the URL the annotators hold (default: a fresh random one; printed in the URL only)")
    parser.add_argument("--agreement", action="store_true",
                        help="print the annotators' agreement per labeled metric (no page)")


def labeled_metric(args: argparse.Namespace) -> str | None:
    """The one --metric the page labels (None: the run's first judged metric)."""
    if args.metric and len(args.metric) > 1:
        raise UsageError(f"--metric: the page labels one metric, got {', '.join(args.metric)}")
    return args.metric[0] if args.metric else None


def predicted_by(args: argparse.Namespace) -> str | None:
    """The judge metric of --predicted-by HUMAN=JUDGE for the --metric labeled (HUMAN must be it). The old
    form `--predicted-by JUDGE` works one release, with a note."""
    from infra.console import say

    if not args.predicted_by:
        return None
    if len(args.predicted_by) > 1:
        raise UsageError("--predicted-by: the page labels one metric, give one HUMAN=JUDGE")
    (value,), metric = args.predicted_by, labeled_metric(args)
    if "=" not in value:
        say(f"ccrs label: --predicted-by {value} is deprecated, use --predicted-by {metric}={value} (the old "
            "form goes in the next release)", err=True)
        return value
    ((human, judge),) = options.parse_predicted_by([value]).items()
    if human != metric:
        raise UsageError(f"--predicted-by {value}: names {human}, but the page labels --metric {metric}")
    return judge


def main(args: argparse.Namespace) -> int:
    from stats.errors import StatsInputError

    return options.exit_2_on_usage_error("label", lambda: _label(args), OSError, StatsInputError)


def _label(args: argparse.Namespace) -> int:
    from tasks.runtime.layout import RunLayout

    if not args.run_dir.is_dir():
        raise UsageError(f"{args.run_dir} is no run folder")
    layout = RunLayout(args.run_dir)
    return print_agreement(layout) if args.agreement else serve(layout, args)


def serve(layout, args: argparse.Namespace) -> int:
    from infra.console import say
    from pipelines.tools import labeling

    token = labeling.checked_token(args.token)  # before anything is written
    scale = options.parse_scale(args.label_scale, "--label-scale")
    metric = labeling.resolve_metric(layout, labeled_metric(args), scale, predicted_by(args), args.describe)
    questions = labeling.load_questions(layout)
    if not questions:
        raise UsageError(f"{layout.queries} holds no question")
    store = labeling.LabelStore.for_design(layout, metric, questions, args)  # the questions --design serves
    if store.repaired:
        say(f"ccrs label: dropped {store.repaired} unfinished line(s) a killed server left (never answered)",
            err=True)
    server = labeling.make_server(store, args.host, args.port, args.annotator, token)
    print(start_line(server, metric, questions, layout.labels_file), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say(f"ccrs label: stopped; every label given is in {layout.labels_file}", err=True)
    finally:
        server.server_close()
    return 0


def start_line(server, metric, questions, labels_file: Path) -> str:
    """The one line with the page's URL (its token included: the only place the token is shown)."""
    systems = len({answer.system for question in questions for answer in question.answers})
    scale = f"{metric.scale[0]:g}-{metric.scale[1]:g}{server.store.design_note()}"
    reach = ("reachable from other machines: only holders of this URL, token included, can read or write "
             "the labels; " if server.beyond_loopback else "")
    return (f"ccrs label: {metric.name} ({scale}) of {len(questions)} questions x {systems} systems at "
            f"{server.url} ({reach}Ctrl-C stops; labels: {labels_file})")


def print_agreement(layout) -> int:
    from tabulate import tabulate

    from pipelines.tools.labeling import agreement_rows

    rows = agreement_rows(layout)
    if not rows:
        raise UsageError(f"no labels in {layout.labels_file} yet")
    table = [[row["metric"], len(row["annotators"]), row["answers_by_2plus"],
              "-" if row["alpha"] is None else f"{row['alpha']:.3f}", row.get("note", "")] for row in rows]
    print(tabulate(table, headers=["metric", "annotators", "answers labeled by 2+",
                                   "Krippendorff's alpha (interval)", "note"]))
    return 0
