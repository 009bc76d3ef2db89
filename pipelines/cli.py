"""The `ccrs` command. Each subcommand lives in its own module exposing `add_arguments(parser)` and
`main(args) -> int`; modules are imported only when their subcommand runs, so `ccrs --help` stays fast.

A module that starts Ray, Ray Serve, vLLM or an HTTP client also exposes `console_log(args) -> Path | None`:
the file its third-party log records go to (`infra.console.log_file_in(its output folder)`, else
`infra.console.home_log_file(name)`),
or None where this invocation starts none of them. That declaration is the only one: the command gets
`--verbose` and runs inside `infra.console.quiet_console()`, which keeps its `say()` output, progress
bars and errors on the terminal; an exception is one line there, its traceback goes to the log file."""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

from infra.process import configure_process

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "setup": ("pipelines.setup_cmd", "prepare local models (GGUF -> HF folder) for the CPU stack"),
    "evaluate": ("pipelines.evaluate_cmd",
                 "judge YOUR systems' outputs (JSONL/CSV/Parquet): statistics, verdict, MLflow"),
    "run": ("pipelines.run_cmd", "run the whole pipeline: ingest -> ... -> statistics -> MLflow"),
    "show": ("pipelines.show_cmd",
             "print a run's verdict again: means, CIs, HSD groups, hypotheses, failures"),
    "index": ("pipelines.retrieval_cmd", "ingest, chunk, embed and index a dataset"),
    "retrieve": ("pipelines.retrieval_cmd", "retrieve top-k contexts for every question and score them"),
    "serve": ("pipelines.serve_cmd", "start/stop/inspect the Ray Serve LLM app (readers + judge)"),
    "metrics": ("pipelines.metrics_cmd",
                "list every registered judge metric: suite, scale, inputs, prompt version"),
    "stats": ("pipelines.stats_cmd", "statistics of per-sample scores (HSD, Holm, bootstrap, ...)"),
    "compare": ("pipelines.compare_cmd", "the nightly gate: a run against its accepted baseline run"),
    "nightly": ("pipelines.nightly_cmd",
                "one night: run (or evaluate your outputs) + compare + alert, one exit code"),
    "plan": ("pipelines.plan_cmd",
             "plan a run: questions needed (power analysis) and compute cost (tokens, GPU-hours)"),
    "meta-eval": ("pipelines.meta_eval_cmd",
                  "test a judge on GroUSE unit tests / CCRS calibration; judge agreement"),
    "report": ("pipelines.report_cmd",
               "GQM goal/question/metric report of a run (JSON, radar, heatmaps, MLflow)"),
    "gqm": ("pipelines.gqm_cmd",
            "GQM thesis tools: `gqm testset` generates the six question types of Table 5.1 as a dataset"),
    "vera": ("pipelines.vera_cmd",
             "VERA metrics, bootstrap convergence, cross-encoder aggregate, topicality"),
    "probe": ("pipelines.probe_cmd",
              "judge bias probes (verbosity, order, injection): per-metric paired shifts with CIs and flags"),
    "injection-eval": ("pipelines.probe_cmd",
                       "deprecated alias of `ccrs probe --kind injection` (goes in the next release)"),
    "load-test": ("pipelines.load_cmd", "load test of the judge stage at several concurrency levels"),
    "label": ("pipelines.label_cmd",
              "a local page to label a run's answers by hand (blind, seeded order); annotator agreement"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="ccrs")
    parser.add_argument("--secrets-file", type=Path, help="dotenv file of secrets, chmod 600 (default: "
                        "$CCRS_SECRETS_FILE, else $CCRS_HOME/secrets.env when it exists)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        sub_parser.set_defaults(_module=module_name)
        if name == _command(argv):
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser, name)
            if hasattr(module, "console_log"):
                sub_parser.add_argument("--verbose", action="store_true", help="show the log records of "
                                        "Ray, Serve, vLLM and HTTP clients here too (by default they go to "
                                        "a log file, named at the start)")
    args = parser.parse_args(argv)
    configure_process()
    try:
        _load_secrets(args.secrets_file)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"ccrs: {exc}", file=sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        return run_command(args.command, module, args)
    except KeyboardInterrupt:
        print("interrupted; finished stages are kept and a rerun resumes", file=sys.stderr)
        return 130


def run_command(name: str, module, args: argparse.Namespace) -> int:
    """The command's main(), inside the quiet console when the command declares a log file for this
    invocation (and --verbose is not given)."""
    quiet = hasattr(module, "console_log") and not args.verbose
    log_file = module.console_log(args) if quiet else None
    if log_file is None:
        return int(module.main(args) or 0)
    from infra.console import quiet_console, say

    with quiet_console(log_file):
        say(f"log records of Ray, Serve, vLLM, HTTP clients and MLflow: {log_file} "
            "(--verbose shows them here)", err=True)
        try:
            code, failed = int(module.main(args) or 0), None
        except Exception as exc:  # noqa: BLE001 - one line on the terminal, the traceback in the log file
            traceback.print_exc()
            sys.stderr.flush()
            code, failed = 1, exc
        if failed is not None:
            say(f"ccrs {name}: {_one_line(failed)}", err=True)
            say(f"traceback and log records: {log_file}", err=True)
        elif code and log_file.stat().st_size:
            say(f"log records: {log_file}", err=True)
    return code


def _one_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _command(argv: list[str]) -> str | None:
    """The subcommand word (global options such as --secrets-file may come first)."""
    words = iter(argv)
    for word in words:
        if word == "--secrets-file":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _load_secrets(path: Path | None) -> None:
    from infra.secrets import install_log_redaction, load_secrets, register_env_secrets

    load_secrets(path)
    register_env_secrets()
    install_log_redaction()


if __name__ == "__main__":
    sys.exit(main())
