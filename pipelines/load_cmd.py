"""`ccrs load-test`: the judge stage's requests against the endpoint at several concurrency levels.

    ccrs load-test [--levels 1,2,4,8] [--requests 32] [--llm-base-url URL] [--out DIR]
                   [--config configs/cpu-demo.yaml] [--max-concurrency K] [--compare-unlimited]

Judge and client settings come from the run config (--max-concurrency overrides client.max_concurrency,
the client limit under test). Without --llm-base-url the config's Serve app is used like `ccrs run` does
(the local CPU app: found when already up, else started here and removed again afterwards). Prints one
row per level and writes load_test.json, load_test.csv, load_test_requests.csv, load_test.png and
console.log (the log records of Ray, Serve, vLLM and the HTTP client).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from infra.console import say
from pipelines.config import RESOURCE_ROOT, ConfigError, RunConfig, load_config


def add_arguments(parser: argparse.ArgumentParser, name: str = "load-test") -> None:
    parser.add_argument("--levels", type=_levels, default=[1, 2, 4, 8],
                        help="offered concurrency levels (caller threads), comma separated (default 1,2,4,8)")
    parser.add_argument("--requests", type=int, default=32, help="requests per level (default 32)")
    parser.add_argument("--llm-base-url", help="use this running OpenAI-compatible endpoint instead of the "
                        "config's Serve app")
    parser.add_argument("--model", help="judge model name (default: judge.model of the config)")
    parser.add_argument("--out", type=Path, default=Path("load-test"),
                        help="output folder (default load-test)")
    parser.add_argument("--config", help="run config YAML for judge and client settings "
                        "(default: configs/cpu-demo.yaml)")
    parser.add_argument("--max-concurrency", type=int, help="the client limit under test "
                        "(default: client.max_concurrency of the config)")
    parser.add_argument("--compare-unlimited", action="store_true",
                        help="also run every level with the client limit raised to the level")
    parser.add_argument("--warmup", type=int, default=1,
                        help="warm-up requests before the levels (default 1)")
    parser.add_argument("--dataset", help="BioASQ JSON file/folder (default: dataset.path of the config)")
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

    from pipelines.tools.load_test import LoadTestConfig, LoadTestError, run_load_test, write_outputs

    try:
        config = _run_config(args)
        test = LoadTestConfig(levels=args.levels, requests_per_level=args.requests,
                              compare_unlimited=args.compare_unlimited, warmup_requests=args.warmup,
                              dataset=_dataset(args, config), chunks_per_sample=args.chunks_per_sample)
    except (ConfigError, ValidationError) as exc:
        say(f"ccrs load-test: {exc}", err=True)
        return 2
    judge = config.judge.model_copy(update={"model": args.model or config.judge.model, "cache": False})
    try:
        with _endpoint(config) as base_url:
            say(f"load test of {judge.model} at {base_url}: levels {test.levels}, "
                f"{test.requests_per_level} requests each, client limit {config.client.max_concurrency}",
                err=True)
            result = run_load_test(test, judge, config.client, base_url, on_level=_progress)
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
    overrides = {}
    if args.llm_base_url:
        overrides["serving"] = {"profile": "external", "base_url": args.llm_base_url}
    if args.max_concurrency is not None:
        overrides["client.max_concurrency"] = args.max_concurrency
    return load_config(args.config, overrides)


def _dataset(args: argparse.Namespace, config: RunConfig) -> str:
    """--dataset as given; the config's relative path from the working directory, else from the repo."""
    if args.dataset:
        return str(Path(args.dataset).resolve())
    path = Path(config.dataset.path)
    if path.is_absolute() or path.exists():
        return str(path)
    return str(RESOURCE_ROOT / path)


def _endpoint(config: RunConfig):
    """The config's endpoint, as `ccrs run` gets it (infra.serving.llm_endpoint); Ray is shut down after
    an app deployed here."""
    from infra.serving import llm_endpoint

    return llm_endpoint(config.serving, shutdown_ray=True, announce=lambda text: say(f"{text}...", err=True))


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
