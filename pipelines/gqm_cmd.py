"""`ccrs gqm testset`: the GQM thesis' test set (Table 5.1's six question types) generated from a corpus
by the run's LLM, written as a dataset `ccrs run --dataset` reads.

    ccrs gqm testset [--config YAML] [--corpus PATH] [--per-type N] [--types T ...] [--temperature T]
                     [--max-tokens N] [--seed S] [--llm-base-url URL] [--judge-base-url URL]
                     [--judge-model NAME] [--out DIR]

The corpus: --corpus (a dataset in any layout `ccrs run` reads, or a folder of *.txt / *.md files, one
passage each), else the config's dataset. The LLM: the config's judge model at the judge's endpoint, found
as `ccrs run` finds it (judge.base_url, else --llm-base-url, else the config's Serve app). Writes to --out
(default runs/gqm/testset): text-corpus.parquet, question-answer-passages.parquet (with `question_type`)
and testset.json (settings, counts per type, every failed question with its reason). Exit 0 when at least
one question was generated (failures are counted and listed), 1 when none, 2 on a bad corpus or config.
"""
from __future__ import annotations

import argparse
import itertools
import threading
from pathlib import Path

from infra.console import say
from pipelines import options
from pipelines.options import UsageError

DEFAULT_OUT = Path("runs") / "gqm" / "testset"


def add_arguments(parser: argparse.ArgumentParser, name: str = "gqm") -> None:
    from pipelines.reporting.gqm_types import QUESTION_TYPES
    from pipelines.tools.gqm import Sampling

    sub = parser.add_subparsers(dest="gqm_command", required=True)
    testset = sub.add_parser("testset", help="questions of the thesis' six types (Table 5.1) from a corpus, "
                             "by the run's LLM, as a dataset `ccrs run --dataset` reads")
    command = "gqm testset"
    options.add_config(testset, command)
    options.add(testset, command, "--corpus")
    testset.add_argument("--per-type", type=int, default=5, metavar="N",
                         help="questions of each type (default 5: the thesis' 30 over six types)")
    testset.add_argument("--types", nargs="+", choices=list(QUESTION_TYPES), default=list(QUESTION_TYPES),
                         help="question types (default: all six)")
    testset.add_argument("--temperature", type=float, default=Sampling.temperature, metavar="T",
                         help=f"sampling temperature of the generator (default {Sampling.temperature})")
    options.add(testset, command, "--max-tokens", default=(Sampling.max_tokens, str(Sampling.max_tokens)))
    options.add(testset, command, "--seed")
    options.add_endpoint(testset, command=command)
    options.add_judge(testset, scoring=False, command=command)
    options.add_out(testset, command, "a dataset folder", default=Path(DEFAULT_OUT))


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import log_file_in

    return log_file_in(args.out)


def main(args: argparse.Namespace) -> int:
    from retrievers.schema import DatasetError

    return options.exit_2_on_usage_error("gqm testset", lambda: testset(args), DatasetError)


def testset(args: argparse.Namespace) -> int:
    from judges.client import LLMClient
    from pipelines.tools import gqm as tool
    from pipelines.tools.endpoint import judge_client, judge_endpoint

    if args.per_type < 1 or args.max_tokens < 1 or args.temperature < 0:
        raise UsageError("--per-type and --max-tokens must be at least 1, --temperature at least 0")
    types = tuple(dict.fromkeys(args.types))
    config = _config(args)
    corpus = options.dataset_path(args.corpus) if args.corpus else Path(config.dataset.path)
    passages = tool.read_corpus(corpus)
    draws = tool.draw_sources(passages, args.per_type, args.seed, types)
    sampling = tool.Sampling(config.judge.model, args.temperature, args.max_tokens, args.seed)
    say(f"gqm testset: {len(draws)} questions ({args.per_type} x {', '.join(types)}) from "
        f"{len(passages)} passages of {corpus}, model {sampling.model}", err=True)
    with judge_endpoint(config, announce=lambda text: say(f"{text}...", err=True)) as base_url:
        with LLMClient(judge_client(config), base_url) as client:
            outcomes = tool.generate(client, draws, sampling, on_done=_progress(len(draws)))
    meta = {"corpus": str(corpus), "model": sampling.model, "temperature": sampling.temperature,
            "max_tokens": sampling.max_tokens, "seed": args.seed, "per_type": args.per_type}
    manifest = tool.write_testset(args.out, passages, draws, outcomes, meta)
    _verdict(manifest, args.out)
    return 0 if manifest["n_generated"] else 1


def _config(args: argparse.Namespace):
    from pipelines.config import ConfigError, load_config

    try:
        config = load_config(args.config, options.config_overrides(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config.model_copy(update={"dataset": config.dataset.model_copy(
        update={"path": str(options.dataset_path(config.dataset.path))})})


def _progress(total: int):
    """One line per finished question (the client answers from several threads)."""
    done, lock = itertools.count(1), threading.Lock()

    def show(outcome) -> None:
        what = "ok" if hasattr(outcome, "question") else f"FAILED: {outcome.reason}"
        with lock:
            say(f"  [{next(done)}/{total}] {outcome.query_id}: {what}", err=True)

    return show


def _verdict(manifest: dict, out: Path) -> None:
    say(f"{'type':16s} {'asked':>5s} {'generated':>9s} {'failed':>6s}")
    for question_type, counts in manifest["by_type"].items():
        say(f"{question_type:16s} {counts['requested']:5d} {counts['generated']:9d} {counts['failed']:6d}")
    say(f"{manifest['n_generated']} questions generated, {manifest['n_failed']} failed (reasons in "
        f"{out / 'testset.json'}); dataset: {out} (ccrs run --dataset {out})")
