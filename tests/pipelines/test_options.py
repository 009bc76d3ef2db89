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
from pipelines.option_schema import meaning_of

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
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction)]


def _options():
    """(command, option name, action) of every visible option of every command."""
    return [(command, flag, action) for command, parser in _parsers() for action in _visible(parser)
            for flag in action.option_strings]


def _meaning(action) -> tuple:
    return action.dest, action.type, meaning_of(action.help)


# Names a concept had before it got one: never visible, wherever they are (a hidden alias at most).
RETIRED = {"--model", "--base-url", "--run-dir", "--run-id", "--k", "--sim-b", "--sequential-margin",
           "--judge",
           "--plot"}


def test_one_option_name_has_one_meaning_on_every_command():
    """Type, destination and help (without its default clause) of a name are the same wherever it is."""
    meanings: dict[str, dict[tuple, list[str]]] = {}
    for command, flag, action in _options():
        meanings.setdefault(flag, {}).setdefault(_meaning(action), []).append(command)
    two = {flag: found for flag, found in meanings.items() if len(found) > 1}
    assert not two, "\n".join(f"{flag}: {len(found)} meanings: {list(found.values())}"
                               for flag, found in two.items())


def test_an_option_of_two_commands_is_declared_once_in_the_schema():
    """An option more than one command module takes comes from its one declaration (pipelines/options.py
    SHARED, or an extension's ExtensionOption), never spelled again by a command."""
    modules: dict[str, set[str]] = {}
    undeclared = set()
    for command, flag, action in _options():
        modules.setdefault(flag, set()).add(cli.SUBCOMMANDS[command.split()[0]][0])
        if not hasattr(action, "schema"):
            undeclared.add((flag, command))
    shared = {flag for flag, found in modules.items() if len(found) > 1}
    assert sorted(pair for pair in undeclared if pair[0] in shared) == []


def test_a_concept_has_one_name():
    """One name per destination (a concept), and the retired names only as hidden aliases."""
    names: dict[str, set[str]] = {}
    for _, flag, action in _options():
        names.setdefault(action.dest, set()).update(action.option_strings)
    assert {dest: found for dest, found in names.items() if len(found) > 1} == {
        "structured_output": {"--structured-output", "--no-structured-output"},  # one boolean, both ways
        "prompt_version": {"--grouse-prompt-version", "--prompt-version"}}
    assert {(command, flag) for command, flag, _ in _options() if flag in RETIRED} == set()
    declared = [option.dest for option in options.SHARED.values()] + [
        option.dest for option in command_options_of_every_extension()]
    assert len(declared) == len(set(declared)) or _same_declarations(declared)


def command_options_of_every_extension():
    from pipelines.extensions import extensions

    return [option.option for extension in extensions().values() if extension.options
            for option in extension.options.options]


def _same_declarations(dests: list[str]) -> bool:
    """A dest declared twice must be the same declaration (an extension's option on several commands)."""
    by_dest: dict[str, set[int]] = {}
    for option in list(options.SHARED.values()) + command_options_of_every_extension():
        by_dest.setdefault(option.dest, set()).add(id(option))
    return all(len(ids) == 1 for ids in by_dest.values())


def test_out_is_a_folder_and_b_has_one_default_but_in_simulations():
    outs = [a for _, flag, a in _options() if flag == "--out"]
    assert outs and all(a.type is Path for a in outs)
    defaults = {(command, a.default) for command, flag, a in _options() if flag == "--b"}
    assert {default for _, default in defaults} == {options.DEFAULT_B, 1000}
    assert {command for command, default in defaults if default == 1000} == {"plan power"}


@pytest.mark.parametrize("argv,dest,value", [
    (["meta-eval", "--model", "m"], "judge_model", "m"),
    (["meta-eval", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["meta-eval", "--judge", "both"], "judges", ["both"]),
    (["meta-eval", "--agreement", "a.json", "b.json"], "agreement_of", [Path("a.json"), Path("b.json")]),
    (["load-test", "--model", "m"], "judge_model", "m"),
    (["vera", "topicality", "--model", "m"], "judge_model", "m"),
    (["vera", "topicality", "--sets", "s.yaml"], "query_sets", "s.yaml"),
    (["vera", "qrels", "--qrels", "q", "--k", "3"], "top_k", 3),
    (["vera", "qrels", "--qrels", "q", "--limit", "4"], "sample", 4),
    (["vera", "score", "r", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["serve", "status", "--base-url", "http://x/v1"], "llm_base_url", "http://x/v1"),
    (["plan", "power", "--pilot", "p", "--sim-b", "200"], "b", 200),
    (["plan", "power", "--pilot", "p", "--max-questions", "30"], "questions", 30),
    (["plan", "power", "--pilot", "p", "--sequential-margin", "0.05"], "margin", 0.05),
    (["run", "--run-dir", "x"], "out", Path("x")),
    (["evaluate", "a.jsonl", "--run-dir", "x"], "out", Path("x")),
    (["nightly", "--run-dir", "x"], "out", Path("x")),
    (["retrieve", "--run-dir", "x"], "out", Path("x")),
    (["report", "r", "--run-id", "abc"], "run", "abc"),
    (["label", "r", "--scale", "1", "5"], "label_scale", ["1", "5"]),
])
def test_an_old_spelling_stores_into_the_new_option_and_says_so_in_one_line(argv, dest, value, capsys):
    parser = argparse.ArgumentParser(prog="ccrs")
    sub = parser.add_subparsers(dest="command")
    module = importlib.import_module(cli.SUBCOMMANDS[argv[0]][0])
    module.add_arguments(sub.add_parser(argv[0], prog=f"ccrs {argv[0]}"), argv[0])
    args = parser.parse_args(argv)
    assert getattr(args, dest) == value
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"ccrs .+: --\S+ is deprecated, use \S+( \(an argument\))? \(the old spelling goes "
                        r"in "
                        r"the next release\)", line)


def test_evaluate_takes_the_names_of_ccrs_evaluate():
    """`ccrs_eval.evaluate()`'s keyword arguments are `ccrs evaluate`'s options by destination."""
    import inspect

    from pipelines.evaluate import evaluate, option_names

    parser = argparse.ArgumentParser()
    importlib.import_module("pipelines.evaluate_cmd").add_arguments(parser, "evaluate")
    command = {action.dest for action in _visible(parser)}
    assert command == set(option_names())
    named = set(inspect.signature(evaluate).parameters) - {"data", "verbose", "extension_options"}
    assert named == {options.SHARED[flag].dest for flag in options.EVALUATE_OPTIONS}


def test_evaluate_refuses_a_name_it_has_no_option_for():
    from pipelines.evaluate import prepare_evaluation

    with pytest.raises(TypeError, match="unexpected keyword arguments \\['run_folder'\\]"):
        prepare_evaluation([], run_folder="x")


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
    config = load_config(args.config, options.config_overrides(args))
    assert Path(config.dataset.path).is_absolute() and config.dataset.limit == 3
    assert (config.serving.profile, config.serving.base_url) == ("external", "http://l/v1")
    assert (config.judge.model, config.judge.base_url) == ("j", "http://j/v1")
    assert (config.mlflow.tracking_uri, config.mlflow.experiment) == (f"sqlite:///{tmp_path}/m.db", "e")
    assert options.tracking_uri(args, config) == f"sqlite:///{tmp_path}/m.db"
    assert options.config_overrides(parser.parse_args([])) == {}


def test_sequential_options_reach_the_config_as_the_python_apis_option_does():
    from pipelines.config import ConfigError
    from pipelines.extensions import command_overrides

    parser = argparse.ArgumentParser()
    options.add_extensions(parser, "run")  # the sequential extension declares them (pipelines/extensions/)
    args = parser.parse_args(["--sequential", "--margin", "0.05", "--look-every", "3"])
    cli_config = load_config(DEFAULT_CONFIG, options.extension_overrides(args))
    api = command_overrides({"sequential": {"margin": 0.05, "look_every": 3}}, "evaluate")
    api_config = load_config(DEFAULT_CONFIG, api)
    sequential = cli_config.extension_block("judge.sequential")  # the sequential extension's block
    assert sequential == api_config.extension_block("judge.sequential")
    assert (sequential.margin, sequential.look_every) == (0.05, 3)
    assert options.extension_overrides(parser.parse_args([])) == {}
    assert options.config_overrides(args) == options.extension_overrides(args)
    off = load_config(DEFAULT_CONFIG, command_overrides({"sequential": False}, "evaluate"))
    assert off.extension_block("judge.sequential") is None
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
    assert run_folder("--outputs", "outputs-2026-11-28.jsonl", "--out", "mine") == tmp_path / "mine"
    assert run_folder("--system", "prod") is None  # --system names the system of --outputs only
    args = parser.parse_args(["--series", "staging"])
    night = load_config(args.config, options.config_overrides(args, "nightly"))
    assert night.mlflow.resolved_series() == "staging"
    assert not (tmp_path / "runs").exists()  # nothing written before a night starts


def test_evaluates_old_run_dir_name_warns_and_lands_as_out():
    from pipelines.evaluate import checked_options

    with pytest.warns(DeprecationWarning, match="use out="):
        assert checked_options({"run_dir": "x"})["out"] == "x"
