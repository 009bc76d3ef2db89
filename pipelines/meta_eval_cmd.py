"""`ccrs meta-eval`: test a judge's calibration before trusting it.

    ccrs meta-eval [--tests FILE] [--judge grouse|ccrs|both] [--llm-base-url URL] [--judge-base-url URL]
                   [--judge-model NAME] [--out DIR] [--settings cpu|paper]
                   [--grouse-prompt-version paper|v1|... | --ablation no-ground-truth|no-justification|
                    no-cot|one-prompt] [--protocol all-calls|pipeline]
    ccrs meta-eval --agreement RESULTS_A.json RESULTS_B.json

The judge is asked at --judge-base-url (its own endpoint, key $CCRS_JUDGE_API_KEY), else at --llm-base-url;
without either, the local CPU model (the Serve app of `ccrs serve up`, started here when it is not already
up, and stopped again afterwards), with settings that fit it (`--settings cpu`: short replies, JSON-schema
constrained, one re-ask; named in the output; `--settings paper` gives GroUSE's own). Prints pass rates
per metric and overall (all-calls, the paper's protocol, beside what the conditional pipeline records),
the table of the paper's seven failure modes, and every failing case with the judge's raw output; writes
results.json, failures.jsonl and matrix.png (and console.log, the log records of Ray, Serve, vLLM and the
HTTP client) to --out (default runs/meta-eval); logs to MLflow (experiment ccrs-meta-eval) unless
--no-mlflow.
"""
from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from infra.console import say
from pipelines import options
from pipelines.options import UsageError
from pipelines.config import BUILTIN_UNIT_TESTS as DEFAULT_TESTS


def add_arguments(parser: argparse.ArgumentParser, name: str = "meta-eval") -> None:
    parser.add_argument("--tests", type=Path, default=DEFAULT_TESTS,
                        help="unit tests, GroUSE JSON lines (default data/grouse-bioasq/test.jsonl)")
    judges = options.add(parser, name, "--judges", default=(["grouse"], "grouse: its unit-test conditions; "
                         "ccrs: the paired CCRS calibration; grouse,ccrs: both"))[0]
    options.add_alias(parser, "--judge", judges)
    options.add_endpoint(parser, aliases=("--base-url",))
    options.add_judge(parser, model_aliases=("--model",), scoring=False)
    options.add(parser, name, "--port")
    options.add(parser, name, "--limit", lands=False)
    parser.add_argument("--sets", nargs="+", help="only these test sets (metadata.set; without it set1, "
                        "set2, ... by question, in file order)")
    options.add_out(parser, "meta-eval")
    options.add(parser, name, "--max-concurrency", default=(16, "16"))
    parser.add_argument("--settings", choices=sorted(SETTINGS),
                        help="the judge's GroUSE settings by name: " + "; ".join(
                            f"{name}: {describe(values)}, {values.why}" for name, values in SETTINGS.items())
                        + " (default: cpu for the local CPU model, paper for an endpoint given); the four "
                        "options below each replace one")
    parser.add_argument("--max-reasks", type=int, help="re-asks of an invalid reply (default: --settings')")
    options.add(parser, name, "--max-tokens", default=(None, "--settings'; a GroUSE faithfulness call has "
                "--faithfulness-max-tokens"))
    parser.add_argument("--faithfulness-max-tokens", type=int,
                        help="reply budget of a GroUSE faithfulness call (default: --settings')")
    parser.add_argument("--context-window", type=int,
                        help="judge window in tokens; replies are shortened to fit (local model: 2048)")
    parser.add_argument("--structured-output", action=argparse.BooleanOptionalAction,
                        help="ask the server for JSON-schema constrained replies (vLLM response_format; "
                        "default: --settings')")
    parser.add_argument("--grouse-prompt-version", "--prompt-version", dest="prompt_version",
                        help="GroUSE prompt version: a folder of judges/prompts/grouse/ (default paper; v1)")
    from judges.grouse import ABLATIONS

    parser.add_argument("--ablation", choices=sorted(ABLATIONS),
                        help="a GroUSE paper ablation of the paper prompts: Table 5's no-ground-truth, "
                        "no-justification, no-cot, or Table 3's one-prompt (all four metrics in one call); "
                        "the same as --grouse-prompt-version paper-<ablation>")
    parser.add_argument("--protocol", choices=["all-calls", "pipeline"], default="all-calls",
                        help="all-calls (default): every GroUSE metric asked on every test, as in the "
                        "paper's unit-test figures, and the pipeline's pass rates read off the same replies; "
                        "pipeline: only the calls a run makes (a skipped call's ==None condition holds)")
    options.add(parser, name, "--seed")
    from pipelines.tools.meta_eval import EXPERIMENT

    options.add_tracking(parser, EXPERIMENT, optional=True)
    options.add(parser, name, "--no-progress")
    agreement = parser.add_argument("--agreement-of", nargs=2, type=Path, metavar=("RESULTS_A", "RESULTS_B"),
                                    help="only compute agreement between two results.json files (no judge "
                                    "calls)")
    options.add_alias(parser, "--agreement", agreement)


def suites_judged(judges: list[str]) -> str:
    """--judges as the meta-evaluation it asks for: grouse, ccrs or both (`--judge both`, the old form)."""
    chosen = {"grouse", "ccrs"} if judges == ["both"] else set(judges)
    if not chosen or chosen - {"grouse", "ccrs"}:
        raise UsageError(f"--judges: meta-eval tests the grouse and ccrs judges, got {','.join(judges)}")
    return "both" if len(chosen) == 2 else chosen.pop()


class Settings(NamedTuple):
    """What the judge's GroUSE calls get: reply budgets, JSON-schema constrained replies, re-asks."""

    max_tokens: int
    faithfulness_max_tokens: int
    structured_output: bool
    max_reasks: int
    why: str = ""


# The judge's GroUSE settings by name. paper: judge.grouse's budgets (the room GroUSE's prompts ask for),
# free-text JSON as the paper's judges wrote it, two re-asks. cpu: the local 135M judge fills whatever
# budget it gets (81.75 s a judgment at the paper's, --limit 2 stopped after 15 minutes) and rarely writes
# valid JSON unconstrained (200-token free text: all 12 judgments of --limit 2 invalid after two re-asks,
# 358 s); 200 tokens is what docs/grouse.md's 112-test figure used, with structured output.
SETTINGS = {"cpu": Settings(200, 200, True, 1, "what fits the local CPU model"),
            "paper": Settings(512, 2048, False, 2, "GroUSE's own (judge.grouse's budgets, free-text JSON)")}


def describe(values: Settings) -> str:
    return (f"replies of {values.max_tokens} tokens, faithfulness {values.faithfulness_max_tokens}, "
            f"structured output {'on' if values.structured_output else 'off'}, at most {values.max_reasks} "
            f"re-ask{'s' * (values.max_reasks != 1)}")


def settings_name(args: argparse.Namespace) -> str:
    """--settings, else cpu where the judge is the local CPU model (no endpoint given), else paper."""
    local = not (args.judge_base_url or args.llm_base_url)
    return args.settings or ("cpu" if local else "paper")


def resolved_settings(args: argparse.Namespace) -> Settings:
    """The named settings, each replaced by its own option where given."""
    named = SETTINGS[settings_name(args)]
    given = {field: getattr(args, field) for field in Settings._fields[:4]
             if getattr(args, field) is not None}
    return named._replace(**given)


def settings_line(args: argparse.Namespace) -> str:
    """The settings the GroUSE calls get, by name, and the option that gives the others."""
    name = settings_name(args)
    other = next(other for other in SETTINGS if other != name)
    values = resolved_settings(args)
    changed = " (changed by its options)" if values[:4] != SETTINGS[name][:4] else ""
    return f"settings {name}{changed}: {describe(values)}; {other}'s: --settings {other}"


def console_log(args: argparse.Namespace) -> Path | None:
    from infra.console import log_file_in

    return None if args.agreement_of else log_file_in(args.out)


def main(args: argparse.Namespace) -> int:
    if args.agreement_of:
        return _agreement(args)
    try:
        suites_judged(args.judges)
    except UsageError as exc:
        say(f"ccrs meta-eval: error: {exc}", err=True)
        return 2
    from judges.grouse_unit_tests import UnitTestFormatError, load_unit_tests

    try:
        tests = _select(load_unit_tests(args.tests), args)
    except (OSError, UnitTestFormatError) as exc:
        say(f"ccrs meta-eval: error: {exc}", err=True)
        return 2
    if not tests:
        say("ccrs meta-eval: error: no tests selected", err=True)
        return 2
    from pydantic import ValidationError

    try:  # checked before a local judge is started
        grouse = _grouse_options(args)
    except ValidationError as exc:
        say("ccrs meta-eval: error: --grouse-prompt-version/--max-tokens/--faithfulness-max-tokens: "
            f"{exc}", err=True)
        return 2
    except ValueError as exc:
        say(f"ccrs meta-eval: error: {exc}", err=True)
        return 2
    say(f"ccrs meta-eval: {settings_line(args)}", err=True)
    try:
        with _endpoint(args) as (base_url, model, local):
            result, paths = _run(args, grouse, tests, base_url, model, local)
    except TimeoutError as exc:
        say(f"ccrs meta-eval: error: judge endpoint not ready: {exc}", err=True)
        return 1
    _print_report(result, paths, settings_line(args))
    return _log(args, grouse, result, paths)


def _grouse_options(args):
    """GroUSE's settings from the flags: the reply budgets of --settings (each replaced by its own flag
    where given); any other flag left out keeps GrouseOptions' default."""
    from judges.config import GrouseOptions

    from judges.grouse import ABLATIONS

    if args.ablation and args.prompt_version:
        raise ValueError("--ablation and --grouse-prompt-version both name a prompt version: give one")
    version = ABLATIONS[args.ablation] if args.ablation else args.prompt_version
    values = resolved_settings(args)
    given = {"prompt_version": version, "max_tokens": values.max_tokens,
             "faithfulness_max_tokens": values.faithfulness_max_tokens}
    return GrouseOptions(**{key: value for key, value in given.items() if value is not None})


def _select(tests, args):
    if args.sets:
        tests = [t for t in tests if t.set_id in set(args.sets)]
    return tests[: args.limit] if args.limit else tests


def _run(args, grouse, tests, base_url, model, local):
    from judges.config import ClientConfig, JudgeConfig
    from judges.grouse import METRIC_ORDER
    from pipelines.tools.meta_eval import run_meta_eval, write_outputs
    from tasks.judge import judge_client_config

    window = args.context_window or (2048 if local else UNKNOWN_WINDOW)
    # The prompt version and reply budgets are GroUSE's (judge.grouse); CCRS keeps its own defaults.
    values = resolved_settings(args)
    judge = JudgeConfig(model=model, base_url=args.judge_base_url, max_reasks=values.max_reasks,
                        structured_output=values.structured_output, context_window=window, cache=False,
                        grouse=grouse)
    client = judge_client_config(judge, ClientConfig(max_concurrency=args.max_concurrency, seed=args.seed))
    which = suites_judged(args.judges)
    bar = _bar(len(tests) * len(METRIC_ORDER), args.no_progress or which == "ccrs")
    result = run_meta_eval(tests, str(args.tests), which, judge, client, base_url, bar, args.protocol)
    bar.close()
    return result, write_outputs(result, tests, args.out)


# The window of an endpoint of the user's without --context-window: not known, so nothing is fitted to it
# (references as given, whole reply budgets).
UNKNOWN_WINDOW = 1_000_000_000


def _bar(total: int, disabled: bool):
    from tqdm import tqdm

    from infra.console import progress_stream

    return tqdm(total=total, desc="meta-eval", unit="judgment", disable=disabled, file=progress_stream())


@contextmanager
def _endpoint(args):
    """(base_url, model, local): the judge's own endpoint or the given one, else the local CPU Serve app
    (infra.serving.llm_endpoint: started if needed and then removed again; an app that was already up is
    left alone)."""
    given = args.judge_base_url or args.llm_base_url
    if given:
        yield given.rstrip("/"), args.judge_model or "smollm2-135m-instruct", False
        return
    from infra.serving import ServingConfig, llm_endpoint

    cfg = ServingConfig.for_profile("cpu", port=args.port)
    with llm_endpoint(cfg, shutdown_ray=True, announce=lambda text: say(f"{text}...", err=True)) as url:
        yield url, args.judge_model or cfg.model_ids()[0], True


def _print_report(result, paths, settings: str | None = None) -> None:
    say(f"judge {result.model} on {result.n_tests} tests ({result.tests_path}), {result.seconds:.0f}s"
        + (f"; {settings}" if settings else ""))
    if result.outcomes:
        _print_pass_rates(result)
        _print_failure_modes(result.failure_modes[result.protocol])
        failures = [(o, m, c) for o in result.outcomes for m, c in o.checks.items() if not c["passed"]]
        say(f"failing checks: {len(failures)}")
        for outcome, metric, check in failures:
            raw = (check["raw"] or "").replace("\n", " ")
            say(f"  FAIL {outcome.test_id} {metric}: expected {check['condition']}, got {check['value']} "
                  f"[{check['status']}{': ' + check['reason'] if check['reason'] else ''}] raw={raw[:300]!r}")
    if result.ccrs:
        ccrs = result.ccrs
        rate = ccrs["pass_rate"]
        say(f"CCRS calibration (paired, variant < correct answer): "
              f"{'n/a' if rate is None else f'{100 * rate:.2f}%'} of {len(ccrs['pairs'])} pairs; "
              f"failed judgments {ccrs['judgments_failed']}/{ccrs['judgments']}")
        for metric, value in ccrs["per_metric"].items():
            say(f"  {metric:4s} {100 * value:6.2f}%")
        for pair in ccrs["pairs"]:
            if not pair["passed"]:
                say(f"  FAIL {pair['set']} type {pair['test_type']} {pair['metric']}: variant "
                      f"{pair['variant_score']} vs correct {pair['correct_score']} "
                      f"raw={pair['variant_raw']!r}")
    say("wrote " + ", ".join(str(p) for p in paths.values()))


def _print_pass_rates(result) -> None:
    protocols = list(result.protocol_pass_rates)
    say(f"GroUSE unit tests (prompt version {result.grouse_prompt_version}), pass rate per metric "
        f"({result.protocol} is what the checks below show):")
    say(f"  {'':22s} " + " ".join(f"{name:>10s}" for name in protocols))
    for metric in result.pass_rates:
        say(f"  {metric:22s} " + " ".join(f"{100 * result.protocol_pass_rates[name][metric]:9.2f}%"
                                          for name in protocols))


def _print_failure_modes(table) -> None:
    say("failure modes (paper section 4.1; tests of Table 6's types): tests passing all six conditions")
    for mode, row in table.items():
        share = "n/a" if row["tests_all_passed"] is None else f"{100 * row['tests_all_passed']:.0f}%"
        say(f"  {mode} {share:>5s} of {row['tests']:3d} tests (types {row['test_types']}): "
            f"{row['description']}")


def _log(args, grouse, result, paths) -> int:
    if args.no_mlflow:
        return 0
    from pipelines.tools.meta_eval import log_meta_eval
    from pipelines.reporting.tracking import TrackingError

    uri = options.tracking_uri(args)
    params = {"tests": str(args.tests), "n_tests": result.n_tests, "judge": suites_judged(args.judges),
              "model": result.model,
              "base_url": args.judge_base_url or args.llm_base_url or "local-cpu",
              "prompt_version": grouse.prompt_version,
              "max_reasks": resolved_settings(args).max_reasks, "settings": settings_name(args),
              "max_tokens": grouse.max_tokens,
              "faithfulness_max_tokens": grouse.faithfulness_max_tokens,
              "structured_output": resolved_settings(args).structured_output, "seed": args.seed,
              "protocol": args.protocol}
    try:
        run_id = log_meta_eval(result, paths, uri, params, args.experiment)
    except TrackingError as exc:
        say(f"ccrs meta-eval: warning: {exc}; results are kept in {args.out}", err=True)
        return 1
    say(f"MLflow run {run_id} ({uri})")
    return 0


def _agreement(args) -> int:
    from pipelines.tools.meta_eval import agreement_between

    try:
        result = agreement_between(*args.agreement_of)
    except (OSError, ValueError, KeyError) as exc:
        say(f"ccrs meta-eval: error: {exc}", err=True)
        return 2
    say(json.dumps(result, indent=2))
    return 0
