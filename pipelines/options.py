"""The `ccrs` command vocabulary: every option more than one command takes, declared once here
(pipelines/option_schema.py `Option`: name, kind, one meaning, its default on each command, where it lands in
a run config, its old spellings), and the groups commands add them in (docs/architecture.md "The command
vocabulary"). A run extension declares its own options the same way (pipelines/extensions/). The test
tests/pipelines/test_options.py reads every command's parser: one name has one meaning (type, destination,
help without its default clause), and a concept one name.

| group | options |
| --- | --- |
| config | `--config YAML`: the run config (default configs/cpu-demo.yaml) |
| endpoint | `--llm-base-url URL`: a running OpenAI-compatible endpoint instead of the config's Serve app |
| judge | `--judge-base-url URL`, `--judge-model NAME`, `--scoring integer|expected` |
| dataset | `--dataset PATH`, `--limit N` |
| output | `--out DIR`: always a folder (`--run-dir` is its old spelling) |
| runs | `RUN_DIR`: a run folder (an argument); `--run ID`: an MLflow run |
| bootstrap | `--b N` (default 10,000: stats.b of a run config), `--seed N` (default 0) |
| tracking | `--experiment NAME`, `--tracking-uri URI` (and `--no-mlflow` where logging is optional) |
| gate | `--baseline`, `--max-failure-rate`, `--allow-judge-change`, `--notify`, `--show-moves`, `--alpha` |

`config_overrides(args)` turns the options a command declared as landing into the dotted overrides of
`pipelines.config.load_config`; `ccrs_eval.evaluate()` takes the same names (EVALUATE_OPTIONS) and maps them
the same way (`overrides_of`).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pipelines.config import RESOURCE_ROOT, StatsConfig, judge_overrides
from pipelines.option_schema import DeprecatedAlias  # noqa: F401 - for the commands (options.DeprecatedAlias)
from pipelines.option_schema import ANY_COMMAND, Option, RecordGiven, add_alias, landing_overrides

DEFAULT_B: int = StatsConfig.model_fields["b"].default
DEFAULT_SEED: int = StatsConfig.model_fields["seed"].default
DEFAULT_ALPHA = 0.05
TRACKING_URI_DEFAULT = "the config's mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db"
# The commands whose --out is the run folder of a run config (it lands in run_dir)
RUN_FOLDER_COMMANDS = ("run", "evaluate", "nightly", "index", "retrieve")


def comma_list(text: str) -> list[str]:
    """A comma-separated list option (`--judges ccrs,grouse`)."""
    return [name.strip() for name in text.split(",") if name.strip()]


class CommaList(argparse.Action):
    """A list option given comma-separated, or repeated (`--metrics CC,QR`, `--metrics CC --metrics QR`); one
    value a time, so that it never takes a command's positional arguments; `choices` are checked per item."""

    def __init__(self, option_strings, dest, choices=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)  # argparse would check the whole "A,B" against them
        self.allowed = None if choices is None else list(choices)

    def __call__(self, parser, namespace, values, option_string=None):
        given = [values] if isinstance(values, str) else values
        items = [item for value in given for item in comma_list(value)]
        wrong = [item for item in items if self.allowed is not None and item not in self.allowed]
        if wrong:
            parser.error(f"argument {option_string}: invalid choice: {wrong[0]!r} (choose from "
                         f"{', '.join(map(repr, self.allowed))})")
        setattr(namespace, self.dest, (getattr(namespace, self.dest, None) or []) + items)

    def format_usage(self) -> str:
        return self.option_strings[0]


def _resolved(key: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {key: str(Path(value).resolve())}


def _endpoint(url: str) -> dict[str, Any]:
    return {"serving": {"profile": "external", "base_url": url.rstrip("/")}}


def _dataset(value: str) -> dict[str, Any]:
    return {"dataset.path": str(dataset_path(value))}


def _declare(*declared: Option) -> dict[str, Option]:
    return {option.flag: option for option in declared}


OUT_DEFAULTS = {
    "run": (None, "runs/<name>, the config's run_dir"), "nightly": (None, "the config's run_dir; with "
    "--outputs runs/nightly-<series>"), "evaluate": (None, "runs/evaluate-<first file's stem>"),
    "index": (Path("runs/retrieval"), "runs/retrieval"),
    "retrieve": (Path("runs/retrieval"), "runs/retrieval"),
}

SHARED = _declare(
    Option("--config", "run config YAML (`index` and `retrieve` read its dataset, chunking, embedder, index "
           "and retrieval blocks; a YAML of only those blocks will do)", {"metavar": "YAML"},
           {ANY_COMMAND: (None, "configs/cpu-demo.yaml"), "index": (None, "each block's defaults"),
            "retrieve": (None, "each block's defaults"),
            "vera score": (None, "the run's own RUN_DIR/config.json"),
            "serve": (None, "infra/serve_configs/<profile>.yaml; a run config serves its serving: block")}),
    Option("--dataset", "BioASQ JSON file/folder or rag-mini-bioasq folder", {"metavar": "PATH"},
           {ANY_COMMAND: (None, "the config's dataset.path")}, lands=_dataset),
    Option("--limit", "use only the first N questions of the input (`meta-eval`: unit tests; `vera "
           "topicality`: queries of each set; the corpus stays whole)", {"type": int, "metavar": "N"},
           {ANY_COMMAND: (None, "the config's dataset.limit"), "evaluate": (None, "all"),
            "meta-eval": (None, "all"), "vera score": (None, "all")}, lands="dataset.limit"),
    Option("--out", "output folder", {"type": Path, "metavar": "DIR"},
           OUT_DEFAULTS, lands=_resolved("run_dir")),
    Option("--run", "an MLflow run id (`compare`: the run to check, `latest` its default; `report`: the run "
           "its goal report is logged into)", {"metavar": "ID"}, {"compare": ("latest", "latest")}),
    Option("--judges", "comma-separated judge suites, replacing the config's `judges` (see `ccrs metrics`), "
           "e.g. ccrs,grouse", {"type": comma_list, "metavar": "SUITES"}, lands="judges"),
    Option("--metrics", "CCRS metrics, comma-separated (or the option repeated), replacing "
           "judge.ccrs.metrics (e.g. QR for outputs without contexts or reference)",
           {"action": CommaList, "metavar": "M,M"},
           {ANY_COMMAND: (None, "the config's")}, lands="judge.ccrs.metrics"),
    Option("--hypotheses", "pre-registered hypotheses about the systems (YAML, see configs/hypotheses)",
           {"type": Path, "metavar": "YAML"}, {"evaluate": (None, "those of --config, none without it")},
           lands=_resolved("stats.hypotheses")),
    Option("--from-stage", "recompute this stage and all later ones", {"metavar": "STAGE"}),
    Option("--llm-base-url", "use this running OpenAI-compatible /v1 endpoint (readers and judge) instead of "
           "deploying the config's Serve app", {"metavar": "URL"}, lands=_endpoint),
    Option("--judge-base-url", "the judge's own OpenAI-compatible /v1 endpoint, apart from the readers' "
           "(key: "
           "$CCRS_JUDGE_API_KEY or the secrets file); sets judge.base_url", {"metavar": "URL"},
           lands=lambda url: {"judge.base_url": url.rstrip("/")}),
    Option("--judge-model", "the judge model id at its endpoint; sets judge.model", {"metavar": "NAME"},
           {ANY_COMMAND: (None, "the config's")}, lands="judge.model"),
    Option("--scoring", "judge.scoring: integer (the reply's mark) or expected (probability-weighted; needs "
           "token log-probabilities). With --judge-base-url and no --config the judge gets the defaults that "
           "fit an unknown endpoint (integer marks)", {"choices": ("integer", "expected")}),
    Option("--experiment", "MLflow experiment", {"metavar": "NAME"},
           {ANY_COMMAND: (None, "the config's mlflow.experiment")}, lands="mlflow.experiment"),
    Option("--tracking-uri", "MLflow tracking URI", {"metavar": "URI"},
           {ANY_COMMAND: (None, TRACKING_URI_DEFAULT)}, lands="mlflow.tracking_uri"),
    Option("--no-mlflow", "do not log to MLflow", {"action": "store_true"}),
    Option("--no-progress", "no progress bars", {"action": "store_true"}),
    Option("--series", "the run's nightly series (tag ccrs.series): `previous` finds its baseline among the "
           "series' runs; one per system whose nights share an experiment", {"metavar": "NAME"},
           {ANY_COMMAND: (None, "the experiment")}, lands="mlflow.series"),
    Option("--system", "the name of the one system the outputs hold: nights written to dated files keep one "
           "system", {"metavar": "NAME"},
           {ANY_COMMAND: (None, "their `system` column, else the file's stem")}),
    Option("--b", "randomization iterations of every test and resamples of every bootstrap interval",
           {"type": int, "metavar": "N", "action": RecordGiven},
           {ANY_COMMAND: (DEFAULT_B, f"{DEFAULT_B:,}"), "plan power": (1000, "1,000: the simulation runs the "
            "HSD hundreds of times, and B only sets each p-value's resolution")}, aliases=()),
    Option("--seed", "random seed: same seed, same output (question and answer orders, draws, resamples, "
           "the judge's sampling)", {"type": int, "metavar": "N"},
           {ANY_COMMAND: (DEFAULT_SEED, str(DEFAULT_SEED))}),
    Option("--alpha", "significance level (intervals at 1 - alpha)", {"type": float, "metavar": "A"},
           {ANY_COMMAND: (DEFAULT_ALPHA, str(DEFAULT_ALPHA))}),
    Option("--markdown", "print the verdict's Markdown source instead of rendered tables",
           {"action": "store_true"}),
    Option("--json", "print machine-readable JSON on stdout instead of the tables (`plan`'s old "
           "`--json FILE` "
           "writes FILE, one release)", {"nargs": "?", "const": True, "metavar": "FILE"}),
    Option("--top-k", "passages (chunks) per question's context", {"type": int, "metavar": "K"},
           {"retrieve": (None, "the config's retrieval.top_k; the paper's 20"),
            "vera score": (None, "the config's retrieval.top_k, the paper's 5 with --preset paper"),
            "vera topicality": (5, "5, the VERA paper's"), "vera qrels": (5, "5, the VERA paper's")}),
    Option("--scale", "the scores' scale, mapped onto [0, 1]: MIN MAX or MIN-MAX (e.g. 1 5 for a Likert "
           "mark, 0 100)", {"nargs": "+", "metavar": "MIN MAX"}, {ANY_COMMAND: (None, "already on [0, 1]")}),
    Option("--metric", "a metric by name (`ccrs metrics`; `label`: a judge metric or a human metric of its "
           "own); repeatable where a command takes several", {"metavar": "M", "action": "append"},
           {ANY_COMMAND: (None, "all"), "label": (None, "the run's first judged metric")}),
    Option("--pilot", "a run folder (its judge stages' scores) or a long-format scores file",
           {"type": Path, "metavar": "PATH"}),
    Option("--questions", "questions of the planned run", {"type": int, "metavar": "N"}),
    Option("--delta", "difference between two systems to detect, on the [0, 1] score scale",
           {"type": float, "metavar": "D"}, {"plan power": (0.05, "0.05, 5 points of a 0-100 judge")}),
    Option("--power", "target power of the test of --delta", {"type": float, "metavar": "P"},
           {"plan power": (0.8, "0.8"), "plan labels": (None, "0.8")}),
    Option("--replicates", "simulated data sets per plan row (0: no simulation)",
           {"type": int, "metavar": "R"},
           {"plan power": (400, "400"), "plan labels": (500, "500")}),
    Option("--host", "address to serve on (127.0.0.1: this machine only; 0.0.0.0 or a LAN address opens it "
           "to other machines)", {"metavar": "HOST"}, {ANY_COMMAND: ("127.0.0.1", "127.0.0.1")}),
    Option("--port", "port to serve on", {"type": int, "metavar": "PORT"},
           {"label": (0, "0: a free one, printed"), "serve": (None, "8000"), "meta-eval": (8000, "8000")}),
    Option("--max-concurrency", "the judge client's concurrent requests (client.max_concurrency)",
           {"type": int, "metavar": "N"}, {ANY_COMMAND: (None, "the config's")}),
    Option("--max-tokens", "reply budget of each request, in tokens", {"type": int, "metavar": "N"}),
    Option("--corpus", "the passages: a dataset (BioASQ JSON, rag-mini-bioasq), a TSV (id, text) or a folder "
           "of *.txt / *.md files, one passage each", {"metavar": "PATH"},
           {ANY_COMMAND: (None, "the config's dataset")}),
    Option("--force", "redo the work even where its result is ready", {"action": "store_true"}),
    Option("--sample", "a uniform random sample of N of the selected items (traces; `vera qrels`: contexts "
           "per "
           "condition), drawn with --seed", {"type": int, "metavar": "N"}, {ANY_COMMAND: (None, "all")}),
)


def add(parser: argparse.ArgumentParser, command: str, *flags: str, lands: bool = True,
        **local: Any) -> list[argparse.Action]:
    """The shared options `flags` on `command`'s parser, as declared in SHARED."""
    return [SHARED[flag].add(parser, command, lands=lands, **local) for flag in flags]


# `ccrs_eval.evaluate()`'s keyword arguments are these options' destinations (and the extensions' options
# of `evaluate`), with the meanings and config landings of `ccrs evaluate`.
EVALUATE_OPTIONS = ("--config", "--out", "--judges", "--metrics", "--limit", "--experiment", "--tracking-uri",
                    "--series", "--system", "--llm-base-url", "--judge-base-url", "--judge-model",
                    "--scoring",
                    "--hypotheses", "--from-stage")


# --- the groups ---------------------------------------------------------------------------------------

def add_config(parser: argparse.ArgumentParser, command: str = ANY_COMMAND) -> argparse.Action:
    """--config: the run config (its default named per command in SHARED)."""
    return SHARED["--config"].add(parser, command)


def add_endpoint(parser: argparse.ArgumentParser, aliases: tuple[str, ...] = (),
                 command: str = ANY_COMMAND) -> argparse.Action:
    action = SHARED["--llm-base-url"].add(parser, command)
    return _with_aliases(parser, action, aliases)


def add_judge(parser: argparse.ArgumentParser, model_aliases: tuple[str, ...] = (),
              scoring: bool = True, command: str = ANY_COMMAND) -> None:
    """--judge-base-url, --judge-model and (unless `scoring` is False) --scoring: the judge's settings."""
    SHARED["--judge-base-url"].add(parser, command)
    _with_aliases(parser, SHARED["--judge-model"].add(parser, command), model_aliases)
    if scoring:
        SHARED["--scoring"].add(parser, command)


def add_extensions(parser: argparse.ArgumentParser, command: str) -> None:
    """The options the run extensions add to `command` (pipelines/extensions/: each declares its own)."""
    from pipelines.extensions import add_command_options

    add_command_options(parser, command)


def extension_overrides(args: argparse.Namespace | Mapping[str, Any], command: str = "run") -> dict[str, Any]:
    """The dotted config overrides of the run extensions' options of `command` that `args` holds (a
    ConfigError where they do not go together)."""
    from pipelines.extensions import command_overrides

    return command_overrides(args, command)


def add_dataset(parser: argparse.ArgumentParser, command: str = ANY_COMMAND, limit: bool = True) -> None:
    SHARED["--dataset"].add(parser, command)
    if limit:
        SHARED["--limit"].add(parser, command)


def add_out(parser: argparse.ArgumentParser, command: str, holds: str = "", default: Path | None = None,
            shown: str | None = None, aliases: tuple[str, ...] = ()) -> argparse.Action:
    """--out DIR: a folder, never a file. Its default: `default` (runs/<command> unless `shown` names another,
    e.g. "RUN_DIR/gqm" for a report inside a run), what it holds named in the help. A run command's --out
    lands in the config's run_dir (RUN_FOLDER_COMMANDS)."""
    own = {}
    if command not in OUT_DEFAULTS:
        value = default if default is not None or shown else Path("runs") / command.replace(" ", "-")
        text = shown or str(value)
        own = {"default": (value, f"{text}: {holds}" if holds else text)}
    action = SHARED["--out"].add(parser, command, lands=command in RUN_FOLDER_COMMANDS, **own)
    return _with_aliases(parser, action, aliases)


def add_bootstrap(parser: argparse.ArgumentParser, command: str = ANY_COMMAND) -> None:
    """--b and --seed. `given(args, "b")` tells an explicit --b from the default."""
    add(parser, command, "--b", "--seed")


def add_tracking(parser: argparse.ArgumentParser, experiment: str | None = None,
                 optional: bool = False, command: str = ANY_COMMAND) -> None:
    """--experiment (default: `experiment`, a tool's own, else the config's mlflow.experiment) and
    --tracking-uri; `optional`: also --no-mlflow, for a command whose logging can be left out. A tool's own
    experiment is the tool's, not the run config's: it does not land."""
    own = {"default": (experiment, experiment)} if experiment else {}
    SHARED["--experiment"].add(parser, command, lands=not experiment, **own)
    SHARED["--tracking-uri"].add(parser, command)
    if optional:
        SHARED["--no-mlflow"].add(parser, command)


def add_series(parser: argparse.ArgumentParser, command: str = ANY_COMMAND) -> None:
    """--series and --system (`ccrs evaluate`, `ccrs nightly`): whose nights a run is, whatever its outputs
    file is named (docs/nightly.md)."""
    add(parser, command, "--series", "--system")


GATE = _declare(
    Option("--baseline", "previous (the latest accepted earlier run of the same series, not ad hoc), a run "
           "id, or tag:NAME", {}, {ANY_COMMAND: ("previous", "previous")}),
    Option("--max-failure-rate", "failed judgments above this share of the run's judgments: status "
           "failure_rate, exit 4", {"type": float}, {ANY_COMMAND: (0.05, "0.05")}),
    Option("--allow-judge-change", "compare even when the baseline was judged with another judge model, "
           "prompt version, scoring or metric set", {"action": "store_true"}),
    Option("--notify", "POST a JSON alert (Slack-compatible `text` and the outcome table) on every status "
           "but pass; env:NAME reads the URL from that variable (the secrets file), e.g. env:CCRS_NOTIFY_URL",
           {"metavar": "URL"}),
    Option("--show-moves", "list the N questions whose score moved most in every cell, with both nights' "
           "answers, judge replies and scores", {"type": int, "metavar": "N"},
           {ANY_COMMAND: (None, "the 5 of each regressed cell")}),
)


def add_gate(parser: argparse.ArgumentParser, command: str = ANY_COMMAND) -> None:
    """The nightly gate's options (`ccrs compare`, `ccrs nightly`; the gate in pipelines/tools/)."""
    for option in GATE.values():
        option.add(parser, command)
    add(parser, command, "--alpha", "--b", "--seed")


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option of `dest` was on the command line (for options added with a recording store)."""
    return dest in getattr(args, "_given", set())


def _with_aliases(parser: argparse.ArgumentParser, action: argparse.Action, aliases: Iterable[str]):
    for old in aliases:
        add_alias(parser, old, action)
    return action


# --- what the groups mean ------------------------------------------------------------------------------

def dataset_path(value: str) -> Path:
    """A relative path is read from the working directory when it exists there, else from the project's
    resources (configs/, data/)."""
    path = Path(value)
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (RESOURCE_ROOT / path).resolve()


def config_overrides(args: argparse.Namespace | Mapping[str, Any], command: str = "run") -> dict[str, Any]:
    """The run config overrides of the options `args` holds that land in a run config (each option's
    declaration says where), the judge defaults of an endpoint given with --judge-base-url, and the run
    extensions' options of `command`."""
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    overrides: dict[str, Any] = {}
    if "judge_base_url" in values:
        overrides.update(judge_overrides(values.get("config"), values.get("judge_base_url"),
                                         values.get("scoring")))
    return overrides | landing_overrides(values) | extension_overrides(values, command)


def overrides_of(values: Mapping[str, Any], flags: Iterable[str], command: str) -> dict[str, Any]:
    """config_overrides of keyword arguments named as the options `flags` of `command` (the Python API)."""
    landing = {SHARED[flag].dest: SHARED[flag] for flag in flags if SHARED[flag].lands is not None}
    return config_overrides({**values, "_lands": landing}, command)


def tracking_uri(args: argparse.Namespace, config=None) -> str:
    """--tracking-uri, else the config's mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else ./mlflow.db."""
    from pipelines.config import MlflowConfig

    mlflow = config.mlflow if config is not None else MlflowConfig()
    given_uri = getattr(args, "tracking_uri", None)
    chosen = mlflow.model_copy(update={"tracking_uri": given_uri or mlflow.tracking_uri})
    return chosen.resolved_uri(Path.cwd())


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
