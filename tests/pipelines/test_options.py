"""One command vocabulary (pipelines/options.py): every subcommand spells a shared option the same way (one
name, one meaning, one default), old spellings are hidden aliases that say so in one line, the groups'
values reach the run config, and no command module imports another."""
import argparse
import ast
import importlib
import re
from pathlib import Path

import pytest

from pipelines import cli, options
from pipelines.config import DEFAULT_CONFIG, load_config

PIPELINES = Path(cli.__file__).resolve().parent


def _parsers():
    """(command, parser) of every subcommand and sub-subcommand, built as the CLI builds them."""
    for name, (module_name, _) in cli.SUBCOMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"ccrs {name}")
        importlib.import_module(module_name).add_arguments(parser, name)
        yield from _walk(name, parser)


def _walk(name, parser):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _walk(f"{name} {sub_name}", sub)


def _visible(parser):
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


# What each shared option is, wherever it appears: its attribute values.
VOCABULARY = {
    "--config": {"dest": "config"},
    "--llm-base-url": {"dest": "llm_base_url", "default": None},
    "--judge-base-url": {"dest": "judge_base_url", "default": None},
    "--judge-model": {"dest": "judge_model", "default": None},
    "--scoring": {"dest": "scoring", "default": None},
    "--dataset": {"dest": "dataset", "default": None},
    "--out": {"dest": "out", "type": Path, "metavar": "DIR"},
    "--b": {"dest": "b", "type": int, "default": options.DEFAULT_B},
    "--seed": {"dest": "seed", "type": int, "default": options.DEFAULT_SEED},
    "--experiment": {"dest": "experiment"},
    "--tracking-uri": {"dest": "tracking_uri", "default": None},
}
# Old spellings: never visible, wherever they are.
RETIRED = {"--model", "--base-url"}


def _differences():
    found = set()
    for command, parser in _parsers():
        for action in _visible(parser):
            for option in set(action.option_strings) & set(VOCABULARY):
                if any(getattr(action, k) != v for k, v in VOCABULARY[option].items()):
                    found.add((command, option))
    return found


def test_every_command_spells_a_shared_option_the_same_way():
    assert _differences() == set()


def test_no_command_shows_a_retired_spelling():
    shown = {(command, option) for command, parser in _parsers() for action in _visible(parser)
             for option in action.option_strings if option in RETIRED}
    assert shown == set()


def test_out_is_a_folder_and_b_has_one_default_everywhere():
    outs = [a for _, p in _parsers() for a in _visible(p) if "--out" in a.option_strings]
    assert outs and all(a.type is Path for a in outs)
    assert {a.default for _, p in _parsers() for a in _visible(p) if "--b" in a.option_strings} == {
        options.DEFAULT_B}


@pytest.mark.parametrize("argv,dest,value", [
    (["meta-eval", "--model", "m"], "judge_model", "m"),
    (["meta-eval", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["load-test", "--model", "m"], "judge_model", "m"),
    (["vera", "topicality", "--model", "m"], "judge_model", "m"),
    (["vera", "score", "r", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["serve", "status", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["plan", "power", "--pilot", "p", "--b", "200"], "sim_b", 200),
])
def test_an_old_spelling_stores_into_the_new_option_and_says_so_in_one_line(argv, dest, value, capsys):
    parser = argparse.ArgumentParser(prog="ccrs")
    sub = parser.add_subparsers(dest="command")
    module = importlib.import_module(cli.SUBCOMMANDS[argv[0]][0])
    module.add_arguments(sub.add_parser(argv[0], prog=f"ccrs {argv[0]}"), argv[0])
    args = parser.parse_args(argv)
    assert getattr(args, dest) == value
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"ccrs .+: --\S+ is deprecated, use --\S+ \(the old spelling goes in the next "
                        r"release\)", line)


def test_the_groups_reach_the_run_config(tmp_path):
    parser = argparse.ArgumentParser()
    options.add_config(parser)
    options.add_dataset(parser)
    options.add_endpoint(parser)
    options.add_judge(parser)
    options.add_tracking(parser)
    args = parser.parse_args(["--dataset", "data/bioasq-sample", "--limit", "3", "--llm-base-url", "http://l/v1",
                              "--judge-model", "j", "--judge-base-url", "http://j/v1/", "--tracking-uri",
                              f"sqlite:///{tmp_path}/m.db", "--experiment", "e"])
    config = load_config(args.config, {**options.config_overrides(args), **options.experiment_override(args)})
    assert Path(config.dataset.path).is_absolute() and config.dataset.limit == 3
    assert (config.serving.profile, config.serving.base_url) == ("external", "http://l/v1")
    assert (config.judge.model, config.judge.base_url) == ("j", "http://j/v1")
    assert (config.mlflow.tracking_uri, config.mlflow.experiment) == (f"sqlite:///{tmp_path}/m.db", "e")
    assert options.tracking_uri(args, config) == f"sqlite:///{tmp_path}/m.db"
    assert options.config_overrides(parser.parse_args([])) == {}


def test_sequential_options_reach_the_config_as_the_python_apis_option_does():
    from pipelines.config import ConfigError, judge_sequential_overrides

    parser = argparse.ArgumentParser()
    options.add_extensions(parser, "run")  # the sequential extension declares them (pipelines/extensions/)
    args = parser.parse_args(["--sequential", "--margin", "0.05", "--look-every", "3"])
    cli_config = load_config(DEFAULT_CONFIG, options.extension_overrides(args))
    api_config = load_config(DEFAULT_CONFIG, judge_sequential_overrides({"margin": 0.05, "look_every": 3}))
    assert cli_config.judge.sequential == api_config.judge.sequential
    assert (cli_config.judge.sequential.margin, cli_config.judge.sequential.look_every) == (0.05, 3)
    assert options.extension_overrides(parser.parse_args([])) == {}
    assert options.config_overrides(args) == options.extension_overrides(args)
    with pytest.raises(ConfigError, match="--margin and --look-every need --sequential"):
        options.extension_overrides(parser.parse_args(["--margin", "0.05"]))


def test_tracking_uri_falls_back_to_the_config_then_the_environment(monkeypatch, tmp_path):
    parser = argparse.ArgumentParser()
    options.add_tracking(parser, "ccrs-probes")
    args = parser.parse_args([])
    assert args.experiment == "ccrs-probes"
    config = load_config(DEFAULT_CONFIG, {"mlflow.tracking_uri": "sqlite:///c.db"})
    assert options.tracking_uri(args, config) == "sqlite:///c.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert options.tracking_uri(args) == "http://mlflow:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)
    assert options.tracking_uri(args) == f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_a_relative_dataset_is_read_from_the_working_directory_else_from_the_project(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert options.dataset_path("data/bioasq-sample") == (PIPELINES.parent / "data" / "bioasq-sample")
    (tmp_path / "data" / "bioasq-sample").mkdir(parents=True)
    assert options.dataset_path("data/bioasq-sample") == tmp_path / "data" / "bioasq-sample"


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_command_module_imports_another():
    commands = {path.stem for path in PIPELINES.glob("*_cmd.py")}
    found = {(path.stem, name.split(".")[1]) for path in PIPELINES.glob("*_cmd.py")
             for name in _imported_modules(path)
             if name.startswith("pipelines.") and name.split(".")[1] in commands - {path.stem}}
    assert found == set()


def test_index_and_retrieve_take_a_whole_run_config_too():
    from pipelines.retrieval_cmd import load_command_config

    blocks = load_command_config(DEFAULT_CONFIG)
    run_config = load_config(DEFAULT_CONFIG)
    assert (blocks.chunking, blocks.retrieval) == (run_config.chunking, run_config.retrieval)


def test_a_nights_series_and_run_folder_do_not_depend_on_its_outputs_files_name(monkeypatch, tmp_path):
    """`ccrs nightly --outputs`: dated files of one series share its folder runs/nightly-<series>; --series
    gives another system's nights their own; --series reaches a config's night as mlflow.series."""
    from pipelines import nightly_cmd
    from tests.tasks.test_outputs import EXAMPLE

    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    nightly_cmd.add_arguments(parser)

    def run_folder(*argv: str) -> Path | None:
        log = nightly_cmd.console_log(parser.parse_args(list(argv)))
        return log and log.parents[1]

    for day in (28, 29):
        (tmp_path / f"outputs-2026-11-{day}.jsonl").write_text(EXAMPLE.read_text())
    nights = [run_folder("--outputs", f"outputs-2026-11-{day}.jsonl", "--experiment", "prod nightly")
              for day in (28, 29)]
    assert nights == [tmp_path / "runs" / "nightly-prod-nightly"] * 2
    assert run_folder("--outputs", "outputs-2026-11-28.jsonl", "--experiment", "prod nightly", "--series",
                      "staging") == tmp_path / "runs" / "nightly-staging"
    assert run_folder("--outputs", "outputs-2026-11-28.jsonl", "--run-dir", "mine") == tmp_path / "mine"
    assert run_folder("--system", "prod") is None  # --system names the system of --outputs only
    args = parser.parse_args(["--series", "staging"])
    assert load_config(args.config, options.series_override(args)).mlflow.resolved_series() == "staging"
    assert not (tmp_path / "runs").exists()  # nothing written before a night starts
