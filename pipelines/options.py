"""The `ccrs` command vocabulary: the option groups every command takes from here, each option with one
name, one meaning and one default (docs/architecture.md "The command vocabulary").

| group | options |
| --- | --- |
| config | `--config YAML`: the run config (default configs/cpu-demo.yaml) |
| endpoint | `--llm-base-url URL`: a running OpenAI-compatible endpoint instead of the config's Serve app |
| judge | `--judge-base-url URL`, `--judge-model NAME`, `--scoring integer|expected` |
| dataset | `--dataset PATH`, `--limit N` |
| output | `--out DIR`: always a folder, default runs/<command> (a report on a run: inside it) |
| bootstrap | `--b N` (default 10,000: stats.b of a run config), `--seed N` (default 0) |
| tracking | `--experiment NAME`, `--tracking-uri URI` (and `--no-mlflow` where logging is optional) |
| gate | `--baseline`, `--max-failure-rate`, `--allow-judge-change`, `--notify`, `--show-moves`, `--alpha` |

`config_overrides(args)` turns whatever groups a command took into the dotted overrides of
`pipelines.config.load_config`. An old spelling stays one release as a hidden alias (`add_alias`) that
stores into the new option and says so in one line on stderr.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.config import RESOURCE_ROOT, StatsConfig, judge_overrides

DEFAULT_B: int = StatsConfig.model_fields["b"].default
DEFAULT_SEED: int = StatsConfig.model_fields["seed"].default
TRACKING_URI_DEFAULT = "the config's mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db"


class DeprecatedAlias(argparse.Action):
    """An old spelling kept for one release: hidden from --help, it stores into the new option's dest and
    says so in one line on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        kwargs.update(default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: {option_string} is deprecated, use {self.new} (the old spelling goes in the "
              "next release)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_alias(parser: argparse.ArgumentParser, old: str, new: argparse.Action) -> None:
    """`old` as a deprecated spelling of the option `new` (the action add_argument returned)."""
    parser.add_argument(old, action=DeprecatedAlias, dest=new.dest, new=new.option_strings[0], type=new.type,
                        nargs=new.nargs, metavar=new.metavar, choices=new.choices)


def _with_aliases(parser: argparse.ArgumentParser, action: argparse.Action, aliases) -> argparse.Action:
    for old in aliases:
        add_alias(parser, old, action)
    return action


# --- the groups ---------------------------------------------------------------------------------------

def add_config(parser: argparse.ArgumentParser, default: str = "configs/cpu-demo.yaml") -> argparse.Action:
    """--config: the run config. `default` names a command's own default where it has a better one than the
    demo's (`ccrs vera score`: the run's own config)."""
    return parser.add_argument("--config", metavar="YAML", help=f"run config YAML (default {default})")


def add_endpoint(parser: argparse.ArgumentParser, aliases: tuple[str, ...] = ()) -> argparse.Action:
    action = parser.add_argument("--llm-base-url", metavar="URL",
                                 help="use this running OpenAI-compatible /v1 endpoint (readers and judge) "
                                      "instead of deploying the config's Serve app")
    return _with_aliases(parser, action, aliases)


def add_judge(parser: argparse.ArgumentParser, model_aliases: tuple[str, ...] = (),
              scoring: bool = True) -> None:
    """--judge-base-url, --judge-model and (unless `scoring` is False) --scoring: the judge's settings."""
    from judges.scoring import SCORINGS

    parser.add_argument("--judge-base-url", metavar="URL",
                        help="the judge's own OpenAI-compatible /v1 endpoint, apart from the readers' (key: "
                             "$CCRS_JUDGE_API_KEY or the secrets file); sets judge.base_url")
    model = parser.add_argument("--judge-model", metavar="NAME",
                                help="the judge model id at its endpoint; sets judge.model (default: the "
                                     "config's)")
    _with_aliases(parser, model, model_aliases)
    if scoring:
        parser.add_argument("--scoring", choices=SCORINGS,
                            help="judge.scoring: integer (the reply's mark) or expected (probability-"
                                 "weighted; needs token log-probabilities). With --judge-base-url and no "
                                 "--config the judge gets the defaults that fit an unknown endpoint (integer "
                                 "marks)")


def add_extensions(parser: argparse.ArgumentParser, command: str) -> None:
    """The options the run extensions add to `command` (pipelines/extensions/: each declares its own)."""
    from pipelines.extensions import add_command_options

    add_command_options(parser, command)


def extension_overrides(args: argparse.Namespace, command: str = "run") -> dict[str, Any]:
    """The dotted config overrides of the run extensions' options of `command` that `args` holds (a
    ConfigError where they do not go together)."""
    from pipelines.extensions import command_overrides

    return command_overrides(args, command)


def add_dataset(parser: argparse.ArgumentParser, limit_help: str = "use only the first N questions") -> None:
    parser.add_argument("--dataset", metavar="PATH", help="BioASQ JSON file/folder or rag-mini-bioasq folder "
                        "(default: the config's dataset.path)")
    parser.add_argument("--limit", type=int, metavar="N", help=f"{limit_help} (default: the config's "
                        "dataset.limit)")


def add_out(parser: argparse.ArgumentParser, command: str | None, what: str = "",
            inside_run: str | None = None) -> argparse.Action:
    """--out DIR: a folder, never a file; default runs/<command>, or for a command that reports on a run
    directory a folder inside it (`inside_run`, e.g. "RUN_DIR/gqm"; the option's value is then None)."""
    default = Path("runs") / command if command else None
    shown = inside_run or default
    return parser.add_argument("--out", type=Path, metavar="DIR", default=default,
                               help=f"output folder{' (' + what + ')' if what else ''}, default {shown}")


def add_bootstrap(parser: argparse.ArgumentParser, what: str = "bootstrap resamples") -> None:
    """--b and --seed. `given(args, "b")` tells an explicit --b from the default."""
    parser.add_argument("--b", type=int, metavar="N", default=DEFAULT_B, action=_RecordGiven,
                        help=f"{what} (default {DEFAULT_B:,})")
    parser.add_argument("--seed", type=int, metavar="N", default=DEFAULT_SEED,
                        help=f"random seed (default {DEFAULT_SEED}; same seed, same output)")


def add_tracking(parser: argparse.ArgumentParser, experiment: str | None = None,
                 optional: bool = False) -> None:
    """--experiment (default: `experiment`, a tool's own, else the config's mlflow.experiment) and
    --tracking-uri; `optional`: also --no-mlflow, for a command whose logging can be left out."""
    default = experiment or "the config's mlflow.experiment"
    parser.add_argument("--experiment", metavar="NAME", default=experiment,
                        help=f"MLflow experiment (default {default})")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help=f"MLflow tracking URI (default: {TRACKING_URI_DEFAULT})")
    if optional:
        parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def add_series(parser: argparse.ArgumentParser) -> None:
    """--series and --system (`ccrs evaluate`, `ccrs nightly`): whose nights a run is, whatever its outputs
    file is named (docs/nightly.md)."""
    parser.add_argument("--series", metavar="NAME", help="the run's nightly series (tag ccrs.series): "
                        "`previous` finds its baseline among the series' runs (default: the experiment); "
                        "one per system whose nights share an experiment")
    parser.add_argument("--system", metavar="NAME", help="the name of the one system the outputs hold "
                        "(default: their `system` column, else the file's stem): nights written to dated "
                        "files keep one system")


def series_override(args: argparse.Namespace) -> dict[str, str]:
    """{"mlflow.series": --series} where given."""
    return {"mlflow.series": args.series} if getattr(args, "series", None) is not None else {}


def add_gate(parser: argparse.ArgumentParser) -> None:
    """The nightly gate's options (`ccrs compare`, `ccrs nightly`; pipelines/tools/regression.py)."""
    parser.add_argument("--baseline", default="previous", help="previous (default: the latest accepted "
                        "earlier run of the same series, not ad hoc), a run id, or tag:NAME")
    parser.add_argument("--max-failure-rate", type=float, default=0.05, help="failed judgments above this "
                        "share of the run's judgments: status failure_rate, exit 4 (default 0.05)")
    parser.add_argument("--allow-judge-change", action="store_true", help="compare even when the baseline "
                        "was judged with another judge model, prompt version, scoring or metric set")
    parser.add_argument("--notify", metavar="URL", help="POST a JSON alert (Slack-compatible `text` and the "
                        "outcome table) on every status but pass; env:NAME reads the URL from that "
                        "variable (the secrets file), e.g. env:CCRS_NOTIFY_URL")
    parser.add_argument("--show-moves", type=int, metavar="N", help="list the N questions whose score moved "
                        "most in every cell (default: the 5 of each regressed cell), with both nights' "
                        "answers, judge replies and scores")
    parser.add_argument("--alpha", type=float, default=0.05)
    add_bootstrap(parser, "randomization iterations of each paired test")


class _RecordGiven(argparse._StoreAction):
    """A store that remembers the option was given (a preset may fill only what was not)."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        given_options = set(getattr(namespace, "_given", set()))
        setattr(namespace, "_given", given_options | {self.dest})


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option of `dest` was on the command line (for options added with a recording store)."""
    return dest in getattr(args, "_given", set())


# --- what the groups mean ------------------------------------------------------------------------------

def dataset_path(value: str) -> Path:
    """A relative path is read from the working directory when it exists there, else from the project's
    resources (configs/, data/)."""
    path = Path(value)
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (RESOURCE_ROOT / path).resolve()


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The run config overrides of the groups `args` holds (endpoint, judge, dataset, tracking)."""
    value = lambda name: getattr(args, name, None)  # noqa: E731 - a group the command did not take is None
    overrides: dict[str, Any] = {}
    if value("dataset"):
        overrides["dataset.path"] = str(dataset_path(args.dataset))
    if hasattr(args, "dataset") and value("limit") is not None:  # --limit of the dataset group
        overrides["dataset.limit"] = args.limit
    if value("llm_base_url"):
        overrides["serving"] = {"profile": "external", "base_url": args.llm_base_url}
    if hasattr(args, "judge_base_url"):
        overrides.update(judge_overrides(value("config"), args.judge_base_url, value("scoring")))
    if value("judge_base_url"):
        overrides["judge.base_url"] = args.judge_base_url.rstrip("/")
    if value("judge_model"):
        overrides["judge.model"] = args.judge_model
    if value("tracking_uri"):
        overrides["mlflow.tracking_uri"] = args.tracking_uri
    return overrides | extension_overrides(args)


def experiment_override(args: argparse.Namespace) -> dict[str, str]:
    """{"mlflow.experiment": --experiment} where given: for the commands whose run is the config's
    (`run`, `evaluate`, `nightly`); a tool logs into its own experiment (`args.experiment`)."""
    return {"mlflow.experiment": args.experiment} if getattr(args, "experiment", None) else {}


def tracking_uri(args: argparse.Namespace, config=None) -> str:
    """--tracking-uri, else the config's mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else ./mlflow.db."""
    from pipelines.config import MlflowConfig

    mlflow = config.mlflow if config is not None else MlflowConfig()
    given_uri = getattr(args, "tracking_uri", None)
    chosen = mlflow.model_copy(update={"tracking_uri": given_uri or mlflow.tracking_uri})
    return chosen.resolved_uri(Path.cwd())


def comma_list(text: str) -> list[str]:
    """A comma-separated list option (`--judges ccrs,grouse`)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def config_experiment(args: argparse.Namespace) -> str:
    """--experiment, else the run config's mlflow.experiment (`ccrs compare`, `ccrs nightly`)."""
    from pipelines.config import load_config

    return getattr(args, "experiment", None) or load_config(getattr(args, "config", None)).mlflow.experiment


class UsageError(ValueError):
    """Options or inputs a command cannot run with: one line, exit 2 (`exit_2_on_usage_error`)."""


def exit_2_on_usage_error(command: str, run: Callable[[], int], *kinds: type[Exception]) -> int:
    """run()'s exit code, or `ccrs COMMAND: <the error>` in one line and 2 on a UsageError or `kinds`."""
    from infra.console import say

    try:
        return run()
    except (UsageError, *kinds) as exc:
        say(f"ccrs {command}: {exc}", err=True)
        return 2


def parse_scale(values: list[str] | None, option: str = "--scale") -> tuple[float, float] | None:
    """`--scale 1 5`, `--scale 1-5` -> (1.0, 5.0); None without the option (`--scale`, `--label-scale`)."""
    from stats.errors import StatsInputError

    if not values:
        return None
    parts = values[0].split("-", 1) if len(values) == 1 and "-" in values[0].lstrip("-") else values
    try:
        low, high = (float(part) for part in parts)
    except ValueError as exc:
        raise StatsInputError(f"{option} takes MIN MAX (e.g. {option} 1 5 or {option} 1-5), got "
                              f"{' '.join(values)}") from exc
    return low, high


def parse_predicted_by(values: list[str]) -> dict[str, str]:
    """`--predicted-by HUMAN=JUDGE` (repeatable) -> {human metric: judge metric}."""
    from stats.errors import StatsInputError

    mapping = {}
    for value in values:
        human, _, judge = value.partition("=")
        if not human.strip() or not judge.strip():
            raise StatsInputError(f"--predicted-by takes HUMAN=JUDGE (e.g. acceptable=CC), got {value!r}")
        mapping[human.strip()] = judge.strip()
    return mapping
