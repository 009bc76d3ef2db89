"""The `ccrs` CLI's quiet console: a command that declares `console_log(args)` runs with third-party log
records in its log file and its own lines on the terminal; --verbose keeps everything on the terminal; an
error is one line on the terminal, its traceback in the log file. The command runs in a child process, whose
stdout and stderr are plain file descriptors as on a terminal (pytest replaces them in this process); its
work is replaced by a stand-in that writes what Serve, httpx and the raylet write."""
import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import logging, os, sys
import pipelines.load_cmd as command
from infra.console import say
from pipelines import cli

def stand_in(args):
    serve = logging.getLogger("ray.serve")
    serve.setLevel(logging.INFO)
    serve.addHandler(logging.StreamHandler())  # added while the command runs, as Serve does on deploy
    serve.info("INFO serve: Deployed app 'llm' successfully.")
    print('{"message": "HTTP Request: POST http://127.0.0.1:8011/v1/chat/completions"}')
    os.write(2, b"raylet: a C++ message\\n")
    say("serving smollm2-135m-instruct")
    if sys.argv[1] == "raise":
        raise RuntimeError("endpoint gone\\nsecond line of the message")
    return int(sys.argv[1])

command.main = stand_in
sys.exit(cli.main(["load-test", "--out", sys.argv[2], *sys.argv[3:]]))
"""
THEIRS = ("Deployed app 'llm' successfully.", "HTTP Request: POST", "raylet: a C++ message")


def _ccrs(tmp_path: Path, outcome: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CCRS_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-c", SCRIPT, outcome, str(tmp_path / "out"), *flags], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_third_party_records_go_to_the_log_file_and_the_commands_lines_to_the_terminal(tmp_path):
    done = _ccrs(tmp_path, "0")
    log_file = tmp_path / "out" / "console.log"
    assert done.returncode == 0, done.stderr
    assert done.stdout == "serving smollm2-135m-instruct\n"
    assert done.stderr.splitlines() == [
        f"log records of Ray, Serve, vLLM, HTTP clients and MLflow: {log_file} (--verbose shows them here)"]
    logged = log_file.read_text()
    assert all(record in logged for record in THEIRS)


def test_verbose_shows_everything_on_the_terminal_and_writes_no_log_file(tmp_path):
    done = _ccrs(tmp_path, "0", "--verbose")
    assert done.returncode == 0, done.stderr
    assert "serving smollm2-135m-instruct" in done.stdout and "HTTP Request: POST" in done.stdout
    assert "Deployed app 'llm' successfully." in done.stderr and "raylet: a C++ message" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_exception_is_one_line_on_the_terminal_and_its_traceback_goes_to_the_log_file(tmp_path):
    done = _ccrs(tmp_path, "raise")
    log_file = tmp_path / "out" / "console.log"
    assert done.returncode == 1
    assert done.stdout == "serving smollm2-135m-instruct\n"
    assert done.stderr.splitlines()[1:] == ["ccrs load-test: RuntimeError: endpoint gone",
                                            f"traceback and log records: {log_file}"]
    logged = log_file.read_text()
    assert "Traceback (most recent call last)" in logged and "second line of the message" in logged


def test_a_failing_exit_code_names_the_log_file_again(tmp_path):
    done = _ccrs(tmp_path, "3")
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1] == f"log records: {tmp_path / 'out' / 'console.log'}"


COMMANDS_THAT_START_RAY_SERVE_OR_AN_LLM_CLIENT = {"run", "index", "retrieve", "serve", "meta-eval", "vera",
                                                  "injection-eval", "probe", "load-test"}


def test_commands_that_start_ray_serve_or_an_llm_client_declare_a_log_file_and_take_verbose():
    declared = {name for name, (module, _) in cli.SUBCOMMANDS.items()
                if hasattr(importlib.import_module(module), "console_log")}
    assert COMMANDS_THAT_START_RAY_SERVE_OR_AN_LLM_CLIENT <= declared
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run")
    importlib.import_module("pipelines.run_cmd").add_arguments(run, "run")
    assert not any("--verbose" in action.option_strings for action in run._actions)  # one definition: cli's


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "--check-config"], None),
    (["serve", "status"], None),
    (["meta-eval", "--agreement", "a.json", "b.json"], None),
    (["vera", "bootstrap", "scores.parquet"], None),
    (["load-test", "--out", "lt"], Path("lt") / "console.log"),
    (["index", "--out", "r"], Path("r") / "logs" / "console.log"),
    (["vera", "score", "r", "--llm-base-url", "http://x/v1"], Path("r") / "vera" / "console.log"),
])
def test_where_each_invocation_logs(argv, expected):
    module = importlib.import_module(cli.SUBCOMMANDS[argv[0]][0])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser, argv[0])
    args = parser.parse_args(argv[1:])
    args.command = argv[0]
    assert module.console_log(args) == expected


def test_a_command_without_an_output_folder_logs_under_ccrs_home(monkeypatch, tmp_path):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path))
    module = importlib.import_module("pipelines.serve_cmd")
    parser = argparse.ArgumentParser()
    module.add_arguments(parser, "serve")
    path = module.console_log(parser.parse_args(["up"]))
    assert path.parent == tmp_path / "logs" and path.name.startswith("serve-up-") and path.suffix == ".log"
