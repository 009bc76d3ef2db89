"""A judge's calibration on GroUSE unit tests (GroUSE paper, section 4.2), and the calibration gate of a run.

The checking core serves `ccrs meta-eval` (pipelines/tools/meta_eval/) and the gate alike: every test goes
through a GroUSE `JudgeSession` (tasks/runtime/judge_session.py), each expected condition is checked on the
judge's
raw mark, pass rates per metric and overall, the failure modes of the paper's Table 6, the pass/fail matrix.

The gate (`judge.preflight`, docs/judge-trust.md "Calibration gate"): before the judge stage of `ccrs run` /
`ccrs evaluate`, the run's own judge answers a unit-test file in the `preflight` stage of the run folder
(RunLayout.preflight_dir: results.json, failures.jsonl, matrix.png). Its judgments go through the judgment
cache like every judgment, so a second run with the same judge model, prompt version and settings sends no
request. The number held to `min_pass_rate` is the overall pass rate (the mean over the six metrics, the
paper's test pass rate) under the gate's protocol; below it, `on_fail: stop` ends the run before the main
judge stage sends a request (exit code STOP_EXIT_CODE), `warn` lets it go on and the verdict says so.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from judges.caching import judgment_settings
from judges.client import ChatRequest, LLMClient
from judges.config import ClientConfig, JudgeConfig, PreflightOptions
from judges.grouse import GROUSE_METRICS, JUDGED_METRICS, METRIC_ORDER, as_pipeline, build_request
from judges.grouse import SUITE as SUITE_GROUSE
from judges.grouse import layout_of, one_prompt_request
from judges.grouse_unit_tests import FAILURE_MODE_NAMES, FAILURE_MODES, UnitTest, check_condition
from judges.repeats import planned_judge_units
from judges.suite import Judgment, get_suite
from judges.templates import PROMPTS_ROOT
from tasks.runtime.judge_session import JudgeSession, judge_counter, load_samples
from tasks.runtime.layout import PREFLIGHT_STAGE, RunLayout
from tasks.runtime.stage import code_version, file_fingerprint, read_manifest, run_stage, stage_key
from tasks.runtime.stops import RunStopped

# all-calls: every metric asked on every test (the paper's unit-test figures, its hatched squares included);
# pipeline: what a run records (Figure 4's gates: a skipped call is not asked, and `==None` then holds).
PROTOCOLS = ("all-calls", "pipeline")
# the pass/fail matrix (outcomes, path, title) -> path: a plot, drawn by the caller's reporting
DrawMatrix = Callable[[list["TestOutcome"], Path, str], Path]
STOP_EXIT_CODE = 6  # `ccrs run`, `ccrs evaluate` and `ccrs nightly` when the gate stops a run
RESULTS_FILE, FAILURES_FILE, MATRIX_FILE = "results.json", "failures.jsonl", "matrix.png"


@dataclass
class TestOutcome:
    test_id: str
    set_id: str
    test_type: int
    checks: dict[str, dict[str, Any]]  # metric -> value, condition, passed, status, reason, raw
    calls: int = 0

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks.values())


# --- checking the unit tests --------------------------------------------------------------------------------

def justification(judgment: Judgment) -> str | None:
    """The judge's justification, kept in the judgment's `detail` (judges/suite.py `detail_json`)."""
    return json.loads(judgment.detail).get("justification") if judgment.detail else None


def check_test(test: UnitTest, judgments: list[Judgment]) -> TestOutcome:
    """Conditions hold on the judge's raw mark (`llm_score`: 1-5, 0/1 or None for null). A failed
    judgment (no usable reply) fails its condition whatever the condition is."""
    by_metric = {j.metric: j for j in judgments}
    checks = {}
    for metric in METRIC_ORDER:
        judgment = by_metric[metric]
        condition = test.conditions[metric]
        ok = judgment.status != "failed" and check_condition(judgment.llm_score, condition)
        checks[metric] = {"value": judgment.llm_score, "condition": condition, "passed": bool(ok),
                          "status": judgment.status, "reason": judgment.reason, "raw": judgment.raw,
                          "justification": justification(judgment)}
    calls = sum(j.attempts for j in judgments)
    return TestOutcome(test.test_id, test.set_id, test.test_type, checks, calls)


def pass_rates(outcomes: list[TestOutcome]) -> dict[str, float]:
    """Per metric: share of tests whose condition holds; `overall`: mean over the six metrics (the
    paper's test pass rate); `tests_all_passed`: share of tests passing all six conditions."""
    if not outcomes:
        return {}
    rates = {m: sum(o.checks[m]["passed"] for o in outcomes) / len(outcomes) for m in METRIC_ORDER}
    rates["overall"] = sum(rates[m] for m in METRIC_ORDER) / len(METRIC_ORDER)
    rates["tests_all_passed"] = sum(o.passed for o in outcomes) / len(outcomes)
    return rates


def run_grouse_tests(tests: list[UnitTest], judge: JudgeConfig, client: LLMClient,
                     client_cfg: ClientConfig | None = None, progress: Any = None,
                     protocol: str = PROTOCOLS[0]) -> dict[str, list[TestOutcome]]:
    """{protocol: outcomes} of `grouse_outcomes` (without its request counts)."""
    return grouse_outcomes(tests, judge, client, client_cfg, progress, protocol)[0]


def grouse_outcomes(tests: list[UnitTest], judge: JudgeConfig, client: LLMClient,
                    client_cfg: ClientConfig | None = None, progress: Any = None,
                    protocol: str = PROTOCOLS[0], identity: dict[str, Any] | None = None
                    ) -> tuple[dict[str, list[TestOutcome]], dict[str, Any]]:
    """Every test through a GroUSE `JudgeSession` (the suite's plan fits the references to
    the judge window, its evaluate runs the Figure-4 calls), asked through `client` in this process (the
    judgment cache when judge.cache is on, keyed with the endpoint's `identity`); `progress`: a bar
    advanced by judgments (six a test). ({protocol: outcomes}, the stage's counts plus `judge_calls`, the
    requests sent now, re-asks included): all-calls asks every metric (judge.grouse.ask_all) and also
    gives the pipeline's outcomes, read off the same replies (`judges.grouse.as_pipeline`); pipeline asks
    what a run asks, and gives only its own."""
    ask_all = protocol == "all-calls"
    judge = judge.model_copy(update={"grouse": judge.grouse.model_copy(update={"ask_all": ask_all})})
    session = JudgeSession.of(SUITE_GROUSE, judge, client_cfg, llm=client, identity=identity)
    judgments, stats = session.by_sample([test.sample() for test in tests], progress)
    outcomes = {protocol: [check_test(test, judgments[test.test_id]) for test in tests]}
    if ask_all:
        outcomes["pipeline"] = [check_test(test, as_pipeline(judgments[test.test_id], test.sample(), judge))
                                for test in tests]
    return outcomes, stats


def failure_mode_table(outcomes: list[TestOutcome]) -> dict[str, dict[str, Any]]:
    """Per failure mode of the paper (FM1-FM7, Table 6's column): its tests, the share passing all six
    conditions and the share of their conditions that hold."""
    table = {}
    for mode, name in FAILURE_MODE_NAMES.items():
        probing = [o for o in outcomes if mode in FAILURE_MODES.get(o.test_type, ())]
        checks = [c["passed"] for o in probing for c in o.checks.values()]
        table[mode] = {"description": name, "test_types": sorted({o.test_type for o in probing}),
                       "tests": len(probing),
                       "tests_all_passed": sum(o.passed for o in probing) / len(probing) if probing else None,
                       "checks_passed": sum(checks) / len(checks) if checks else None}
    return table


def failing_cases(outcomes: list[TestOutcome], tests: list[UnitTest]) -> list[dict]:
    by_id = {t.test_id: t for t in tests}
    rows = []
    for outcome in outcomes:
        for metric, check in outcome.checks.items():
            if check["passed"]:
                continue
            test = by_id[outcome.test_id]
            rows.append({"test_id": outcome.test_id, "test_type": outcome.test_type, "metric": metric,
                         "condition": check["condition"], "value": check["value"], "status": check["status"],
                         "reason": check["reason"], "raw": check["raw"], "question": test.question,
                         "answer": test.answer})
    return rows


# --- the calibration gate of a run --------------------------------------------------------------------------

class JudgeCalibrationStop(RunStopped):
    """The gate stopped the run (`on_fail: stop`): the message is the one line to print; `run_id` the
    MLflow run that records it (None where the store could not be reached)."""

    status = "judge_calibration"
    exit_code = STOP_EXIT_CODE
    headline = "the judge failed its calibration unit tests (judge.preflight): the run stopped before judging"


@dataclass(frozen=True)
class Preflight:
    """The preflight stage's summary (what the judge scored) held to its options (what it must reach)."""

    summary: dict[str, Any]
    options: PreflightOptions
    reused: bool = False

    @property
    def pass_rate(self) -> float:
        return float(self.summary["pass_rate_overall"])

    @property
    def passed(self) -> bool:
        return self.pass_rate >= self.options.min_pass_rate

    @property
    def status(self) -> str:
        """pass, warn (below the threshold, on_fail warn) or stop (below it, on_fail stop)."""
        return "pass" if self.passed else self.options.on_fail

    def line(self, planned_calls: int | None = None) -> str:
        """`judge calibration 0.34 < 0.60: stopped before 141,570 judge calls` (`before the judge stage`
        where the planned calls are not known), `...: judging anyway ...` (warn), or `... >= ...: judging`."""
        rate, threshold = f"{self.pass_rate:.2f}", f"{self.options.min_pass_rate:.2f}"
        if self.passed:
            return f"judge calibration {rate} >= {threshold}: judging"
        below = f"judge calibration {rate} < {threshold}"
        if self.status == "stop":
            before = "the judge stage" if planned_calls is None else f"{planned_calls:,} judge calls"
            return f"{below}: stopped before {before}"
        return f"{below}: judging anyway (on_fail: warn); the verdict says so"

    def measured(self) -> str:
        """What was measured and what it cost: the console line before the decision."""
        s = self.summary
        per_metric = ", ".join(f"{m} {s[f'pass_rate_{m}']:.2f}" for m in METRIC_ORDER)
        asked = ("finished stage reused" if self.reused else
                 f"{s['judge_calls']} judge requests, {s['cache_hits']} tests from the judgment cache")
        return (f"judge preflight: {s['tests']} GroUSE unit tests ({s['tests_path']}), protocol "
                f"{s['protocol']}, prompt version {s['prompt_version']}: overall {self.pass_rate:.2f} "
                f"({per_metric}); {asked}")


def load_preflight_tests(path: Path) -> list[UnitTest]:
    """The gate's unit tests; an unreadable file, a bad line (UnitTestFormatError) or no test at all is a
    ValueError naming the file."""
    from judges.grouse_unit_tests import load_unit_tests

    try:
        tests = load_unit_tests(path)
    except OSError as exc:
        raise ValueError(f"cannot read the unit tests {path}: {exc.strerror or exc}") from exc
    if not tests:
        raise ValueError(f"{path}: no unit test in the file")
    return tests


def preflight_key(tests_path: Path, options: PreflightOptions, judge: JudgeConfig, seed: int,
                  identity: dict[str, Any] | None, draw: DrawMatrix | None = None) -> str:
    """The stage's key: the tests file, what can change a GroUSE judgment (judges.caching: the model, the
    grouse block, window, re-asks, ...), the protocol, the seed, what the endpoint serves, the code. The
    threshold and on_fail are not in it: they are applied to the stored pass rates. `draw`'s module (the
    plot of the caller's, pipelines/reporting/) is code of the stage too."""
    config = {"judge": judgment_settings(judge, get_suite(SUITE_GROUSE)), "protocol": options.protocol,
              "seed": seed, "endpoint": identity or None}
    plot = (draw.__module__,) if draw is not None else ()
    code = code_version(__name__, *plot, data_dirs=(PROMPTS_ROOT / SUITE_GROUSE,))
    return stage_key(PREFLIGHT_STAGE, config, [file_fingerprint(tests_path)], code)


def run_preflight(run_dir: Path, options: PreflightOptions, tests_path: Path, judge: JudgeConfig,
                  client: ClientConfig, base_url: str, identity: dict[str, Any] | None = None,
                  llm: LLMClient | None = None, force: bool = False,
                  draw: DrawMatrix | None = None) -> Preflight:
    """The preflight stage: the run's judge (`judge`, its endpoint `base_url`) on the unit tests at
    `tests_path`, through the judgment cache; writes results.json, failures.jsonl and (with the caller's
    plot `draw`, pipelines.reporting.calibration.plot_matrix) matrix.png into RunLayout.preflight_dir.
    `llm`: a client of the caller's (a test's fake) instead of one to `base_url`."""
    tests = load_preflight_tests(tests_path)

    def compute(out_dir: Path) -> dict[str, Any]:
        started = time.perf_counter()
        if llm is not None:
            outcomes, stats = grouse_outcomes(tests, judge, llm, client, None, options.protocol, identity)
        else:
            with LLMClient(client, base_url) as own:
                outcomes, stats = grouse_outcomes(tests, judge, own, client, None, options.protocol, identity)
        summary = preflight_summary(tests_path, tests, judge, options.protocol, outcomes, stats)
        write_preflight_outputs(out_dir, tests, outcomes, summary, draw)
        return {**summary, "seconds": round(time.perf_counter() - started, 2)}

    key = preflight_key(tests_path, options, judge, client.seed, identity, draw)
    result = run_stage(run_dir, PREFLIGHT_STAGE, key, compute, force=force)
    return Preflight(result.summary, options, result.reused)


def preflight_summary(tests_path: Path, tests: list[UnitTest], judge: JudgeConfig, protocol: str,
                      outcomes: dict[str, list[TestOutcome]], stats: dict[str, Any]) -> dict[str, Any]:
    """Flat numbers (MLflow logs each as preflight_<key>) and the pass rates of every protocol measured."""
    rates = {name: pass_rates(found) for name, found in outcomes.items()}
    failed = sum(c["status"] == "failed" for o in outcomes[protocol] for c in o.checks.values())
    return {"tests_path": str(tests_path), "tests": len(tests), "protocol": protocol,
            "prompt_version": judge.grouse.prompt_version, "judge_model": judge.model,
            **{f"pass_rate_{name}": value for name, value in rates[protocol].items()},
            "pass_rates": rates, "failed_judgments": failed,
            "cache_hits": stats["cache_hits"], "judge_requests": stats["judge_requests"],
            "judge_calls": stats["judge_calls"]}


def write_preflight_outputs(out_dir: Path, tests: list[UnitTest], outcomes: dict[str, list[TestOutcome]],
                            summary: dict[str, Any], draw: DrawMatrix | None = None) -> None:
    """results.json, failures.jsonl and, where the caller gives its plot (`draw`), matrix.png."""
    protocol = summary["protocol"]
    modes = {name: failure_mode_table(found) for name, found in outcomes.items()}
    results = {**summary, "failure_modes": modes,
               "outcomes": [{**asdict(o), "passed": o.passed} for o in outcomes[protocol]]}
    (out_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2, default=str))
    rows = failing_cases(outcomes[protocol], tests)
    (out_dir / FAILURES_FILE).write_text("".join(json.dumps(row, default=str) + "\n" for row in rows))
    if draw is not None:
        title = (f"judge preflight: {summary['judge_model']}, GroUSE prompts {summary['prompt_version']}, "
                 f"{protocol}")
        draw(outcomes[protocol], out_dir / MATRIX_FILE, title)


def read_preflight(run_dir: Path, options: PreflightOptions | dict | None) -> Preflight | None:
    """The run folder's finished preflight held to `options` (a run config's judge.preflight), or None
    (the gate is off, or the stage has not finished)."""
    if options is None:
        return None
    manifest = read_manifest(RunLayout(run_dir).preflight_dir)
    if not manifest or "pass_rate_overall" not in manifest.get("summary", {}):
        return None
    return Preflight(manifest["summary"], PreflightOptions.model_validate(options), True)


def planned_judge_calls(suites: list[str], queries_path: Path, retrieved_path: Path, generations_path: Path,
                        judge: JudgeConfig, seed: int, top_k: int) -> int:
    """The judge calls the main judge stage plans: per suite, the units it asks of one judged sample
    (`planned_judge_units`, judge.repeats included, as `ccrs plan cost` counts them; one call each at least,
    a GroUSE unit asks two to four) times the samples it judges (generations with a non-empty answer).
    Re-asks are not counted, judgments the cache holds not taken off."""
    import pandas as pd

    generations = pd.read_parquet(generations_path)
    judged = generations[(generations["status"] == "ok")
                         & generations["answer"].fillna("").astype(str).str.strip().ne("")]
    if judged.empty:
        return 0
    first = judged.head(1)
    retrieved = pd.read_parquet(retrieved_path, filters=[("query_id", "==", first["query_id"].iloc[0])])
    samples, _ = load_samples(pd.read_parquet(queries_path), retrieved, first, top_k)
    count = judge_counter(judge)
    per_sample = sum(len(planned_judge_units(get_suite(name), samples[0], judge, seed, count))
                     for name in suites)
    return per_sample * len(judged)


def preflight_requests(tests: list[UnitTest], judge: JudgeConfig, seed: int) -> list[ChatRequest]:
    """The first request of every call the preflight can make (every judged metric of every test, or one
    call a test under a one-prompt version), with the references fitted as the stage fits them: what
    `ccrs plan cost` counts (an upper bound under the pipeline protocol, whose gates skip some)."""
    suite = get_suite(SUITE_GROUSE)
    count = judge_counter(judge)
    one_prompt = layout_of(judge.grouse.prompt_version).one_prompt
    requests = []
    for test in tests:
        (unit,) = suite.plan(test.sample(), judge, seed, count)
        fitted = replace(unit.sample, context=list(unit.plan.references))
        if one_prompt:
            requests.append(one_prompt_request(fitted, judge))
        else:
            requests += [build_request(GROUSE_METRICS[name], fitted, judge) for name in JUDGED_METRICS]
    return requests


