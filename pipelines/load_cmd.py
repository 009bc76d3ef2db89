"""`ccrs load-test`: the judge stage's requests against the endpoint at several concurrency levels.

    ccrs load-test [--levels 1,2,4,8] [--requests 32] [--llm-base-url URL] [--judge-base-url URL]
                   [--judge-model NAME] [--out DIR] [--config configs/cpu-demo.yaml] [--max-concurrency K]
                   [--compare-unlimited]

Judge and client settings come from the run config (--max-concurrency overrides client.max_concurrency,
the client limit under test). The judge's endpoint is found as `ccrs run` finds it: the judge's own
(--judge-base-url, judge.base_url), else --llm-base-url, else the config's Serve app (the local CPU app:
found when already up, else started here and removed again afterwards). Prints one row per level and
writes load_test.json, load_test.csv, load_test_requests.csv, load_test.png and console.log (the log
records of Ray, Serve, vLLM and the HTTP client) to --out (default runs/load-test).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines import options
from pipelines.config import ConfigError, RunConfig, load_config


def add_arguments(parser: argparse.ArgumentParser, name: str = "load-test") -> None:
    parser.add_argument("--levels", type=_levels, default=[1, 2, 4, 8],
                        help="offered concurrency levels (caller threads), comma separated (default 1,2,4,8)")
    parser.add_argument("--requests", type=int, default=32, help="requests per level (default 32)")
    options.add_endpoint(parser, command=name)
    options.add_judge(parser, model_aliases=("--model",), command=name)
    options.add_out(parser, name)
    options.add_config(parser, name)
    options.add(parser, name, "--max-concurrency")  # the client limit under test
    parser.add_argument("--compare-unlimited", action="store_true",
                        help="also run every level with the client limit raised to the level")
    parser.add_argument("--warmup", type=int, default=1,
                        help="warm-up requests before the levels (default 1)")
    options.add_dataset(parser, name, limit=False)
    parser.add_argument("--chunks-per-sample", type=int, default=5, help="gold snippets per judge context")


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels must be comma-separated integers, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"levels must be integers >= 1, got {text!r}")
    return levels


def console_log(args: argparse.Namespace) -> Path:
    from infra.console import log_file_in

    return log_file_in(args.out)


def main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from pipelines.tools.load import LoadTestConfig, LoadTestError, run_load_test, write_outputs

    try:
        config = _run_config(args)
        test = LoadTestConfig(levels=args.levels, requests_per_level=args.requests,
                              compare_unlimited=args.compare_unlimited, warmup_requests=args.warmup,
                              dataset=_dataset(args, config), chunks_per_sample=args.chunks_per_sample)
    except (ConfigError, ValidationError) as exc:
        say(f"ccrs load-test: {exc}", err=True)
        return 2
    from pipelines.tools.endpoint import fitted_judge, judge_client, judge_endpoint

    try:
        with judge_endpoint(config, shutdown_ray=True,
                            announce=lambda text: say(f"{text}...", err=True)) as base_url:
            judge = fitted_judge(config, ["ccrs"], base_url).model_copy(update={"cache": False})
            say(f"load test of {judge.model} at {base_url}: levels {test.levels}, "
                f"{test.requests_per_level} requests each, client limit {config.client.max_concurrency}",
                err=True)
            result = run_load_test(test, judge, judge_client(config), base_url, on_level=_progress)
    except (TimeoutError, LoadTestError) as exc:
        say(f"ccrs load-test: {type(exc).__name__}: {exc}", err=True)
        return 1
    paths = write_outputs(result, args.out)
    say(format_table(result.levels))
    say(f"{result.environment['cpu_cores']} CPU cores, {result.distinct_requests} distinct judge requests, "
          f"{result.seconds:.0f} s")
    say("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _run_config(args: argparse.Namespace) -> RunConfig:
    overrides = options.config_overrides(args)
    if args.max_concurrency is not None:
        overrides["client.max_concurrency"] = args.max_concurrency
    return load_config(args.config, overrides)


def _dataset(args: argparse.Namespace, config: RunConfig) -> str:
    """--dataset, else the config's; a relative path from the working directory, else from the project."""
    return str(options.dataset_path(args.dataset or config.dataset.path))


def _progress(report) -> None:
    say(f"  {report.mode:9s} L={report.level:<3d} {report.requests} requests, {report.errors} errors, "
        f"{report.throughput_rps:.2f} req/s, p90 {_seconds(report.latency.p90_s)}", err=True)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(levels) -> str:
    from tabulate import tabulate

    headers = ["mode", "level", "limit", "requests", "errors", "error rate", "retries", "req/s",
               "compl tok/s", "p50 s", "p90 s", "p99 s", "max s"]
    rows = [[r.mode, r.level, r.client_limit, r.requests, r.errors, f"{100 * r.error_rate:.1f}%", r.retries,
             f"{r.throughput_rps:.2f}", f"{r.completion_tokens_per_s:.1f}", _seconds(r.latency.p50_s),
             _seconds(r.latency.p90_s), _seconds(r.latency.p99_s), _seconds(r.latency.max_s)] for r in levels]
    table = tabulate(rows, headers=headers, tablefmt="github")
    kinds = [f"  {r.mode} L={r.level}: {r.errors_by_kind}" for r in levels if r.errors_by_kind]
    return table + ("\nerrors by kind:\n" + "\n".join(kinds) if kinds else "")
