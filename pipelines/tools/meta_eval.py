"""Meta-evaluation of a judge (GroUSE paper, section 4.2): run it on unit tests, check every expected
condition, report pass rates, a pass/fail matrix plot and every failing case with the judge's raw output;
the CCRS calibration on the same variants (paired comparisons); agreement between two judges' results.
Checking the GroUSE unit tests (conditions, pass rates, failure modes, the matrix) is tasks/calibration.py's,
shared with a run's calibration gate (`judge.preflight`).

Outputs in `out_dir`: results.json (everything below), failures.jsonl, matrix.png; optionally logged to
MLflow (one run per meta-evaluation, metrics = pass rates, artifacts = the files).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from judges.ccrs import SUITE as SUITE_CCRS
from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.grouse_unit_tests import UnitTest
from judges.suite import Judgment, Sample
from pipelines.config import REPO_ROOT
from tasks.runtime.judge_session import JudgeSession
from pipelines.reporting.calibration import plot_matrix
from tasks.calibration import (
    PROTOCOLS,
    TestOutcome,
    failing_cases,
    failure_mode_table,
    pass_rates,
    run_grouse_tests,
)

EXPERIMENT = "ccrs-meta-eval"
# Judge agreement (GroUSE paper, Table 4): Spearman on the 1-5 marks, macro F1 on the nullable 0/1 ones.
LIKERT_METRICS = ("answer_relevancy", "completeness")
BINARY_METRICS = ("usefulness", "faithfulness", "positive_acceptance", "negative_rejection")

# CCRS calibration (paired): test type -> CCRS metrics expected strictly lower than for type 1 (the
# correct answer) of the same set, which sees the same references and the same ground truth.
CCRS_EXPECTATIONS: dict[int, tuple[str, ...]] = {
    16: ("AC", "CC"),          # a distorted fact: less correct, less supported by the context
    8: ("QR", "ID"),           # irrelevant content added: less relevant, less focused
    10: ("IR",),               # relevant information missing: less informative
    11: ("AC", "IR", "QR"),    # wrongly says there is no answer
    12: ("AC", "IR"),          # wrongly says there is no answer, adds related information
}


@dataclass
class MetaEvalResult:
    judge: str
    model: str
    tests_path: str
    n_tests: int
    pass_rates: dict[str, float]
    outcomes: list[TestOutcome] = field(default_factory=list)
    ccrs: dict[str, Any] | None = None
    seconds: float = 0.0
    grouse_prompt_version: str | None = None  # judge.grouse.prompt_version when the GroUSE tests ran
    protocol: str = PROTOCOLS[0]  # whose outcomes `outcomes` and `pass_rates` are
    protocol_pass_rates: dict[str, dict[str, float]] = field(default_factory=dict)  # every protocol measured
    failure_modes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # protocol -> FM -> row


# --- CCRS calibration ------------------------------------------------------------------------------------

def ccrs_pairs(tests: list[UnitTest]) -> list[tuple[UnitTest, UnitTest, str]]:
    """(correct answer test, variant test, metric) for every expectation whose two tests exist."""
    by_set: dict[str, dict[int, UnitTest]] = {}
    for test in tests:
        by_set.setdefault(test.set_id, {})[test.test_type] = test
    pairs = []
    for set_tests in by_set.values():
        base = set_tests.get(1)
        for test_type, metrics in CCRS_EXPECTATIONS.items():
            if base is not None and test_type in set_tests:
                pairs += [(base, set_tests[test_type], metric) for metric in metrics]
    return pairs


def _ccrs_input(test: UnitTest, ground_truth: str) -> Sample:
    return Sample(test.test_id, "unit-test", test.question, test.answer, ground_truth, list(test.references))


def run_ccrs_calibration(tests: list[UnitTest], judge: JudgeConfig, client: LLMClient,
                         client_cfg: ClientConfig | None = None) -> dict[str, Any]:
    """Score each needed (test, metric) once, then check every pair: variant strictly below the correct
    answer. A tie or a failed judgment fails the pair."""
    pairs = ccrs_pairs(tests)
    judged = judge_needed(pairs, tests, judge, client, client_cfg)
    checks = []
    for base, variant, metric in pairs:
        b, v = judged[(base.test_id, metric)], judged[(variant.test_id, metric)]
        ok = b.score is not None and v.score is not None and v.score < b.score
        checks.append({"set": base.set_id, "test_type": variant.test_type, "metric": metric,
                       "correct_score": b.score, "variant_score": v.score, "passed": bool(ok),
                       "correct_raw": b.raw, "variant_raw": v.raw,
                       "reason": v.reason or b.reason})
    return {"pairs": checks, **ccrs_rates(checks),
            "judgments_failed": sum(j.status == "failed" for j in judged.values()), "judgments": len(judged)}


def judge_needed(pairs: list[tuple[UnitTest, UnitTest, str]], tests: list[UnitTest], judge: JudgeConfig,
                 client: LLMClient, client_cfg: ClientConfig | None) -> dict[tuple[str, str], Judgment]:
    """{(test_id, metric): judgment} for every test and metric the pairs compare, through a CCRS
    `JudgeSession` asking in this process, one call per metric with that metric selected: each needed
    judgment is asked once, and no other."""
    ground_truth = {t.set_id: t.answer for t in tests if t.test_type == 1}
    by_id = {t.test_id: t for t in tests}
    needed: dict[str, set[str]] = {}
    for base, variant, metric in pairs:
        needed.setdefault(metric, set()).update((base.test_id, variant.test_id))
    judged = {}
    for metric, test_ids in needed.items():
        samples = [_ccrs_input(by_id[i], ground_truth[by_id[i].set_id]) for i in sorted(test_ids)]
        one_metric = judge.model_copy(update={"ccrs": judge.ccrs.model_copy(update={"metrics": [metric]})})
        session = JudgeSession.of(SUITE_CCRS, one_metric, client_cfg, llm=client)
        for test_id, [judgment] in session.by_sample(samples)[0].items():
            judged[(test_id, metric)] = judgment
    return judged


def ccrs_rates(checks: list[dict]) -> dict[str, Any]:
    if not checks:
        return {"pass_rate": None, "per_metric": {}, "per_test_type": {}}
    per_metric: dict[str, list[bool]] = {}
    per_type: dict[str, list[bool]] = {}
    for c in checks:
        per_metric.setdefault(c["metric"], []).append(c["passed"])
        per_type.setdefault(str(c["test_type"]), []).append(c["passed"])
    def mean(xs):
        return sum(xs) / len(xs)

    return {"pass_rate": mean([c["passed"] for c in checks]),
            "per_metric": {k: mean(v) for k, v in sorted(per_metric.items())},
            "per_test_type": {k: mean(v) for k, v in sorted(per_type.items(), key=lambda kv: int(kv[0]))}}


# --- outputs -------------------------------------------------------------------------------------------

def result_dict(result: MetaEvalResult) -> dict:
    data = asdict(result)
    for outcome, row in zip(result.outcomes, data["outcomes"]):
        row["passed"] = outcome.passed
    return data


def write_outputs(result: MetaEvalResult, tests: list[UnitTest], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"results": out_dir / "results.json", "failures": out_dir / "failures.jsonl"}
    paths["results"].write_text(json.dumps(result_dict(result), indent=2, default=str))
    failures = failing_cases(result.outcomes, tests) if result.outcomes else []
    if result.ccrs:
        failures += [{"ccrs_pair": True, **c} for c in result.ccrs["pairs"] if not c["passed"]]
    paths["failures"].write_text("".join(json.dumps(f, default=str) + "\n" for f in failures))
    if result.outcomes:
        paths["matrix"] = plot_matrix(result.outcomes, out_dir / "matrix.png",
                                      f"GroUSE unit tests: {result.model}, prompts "
                                      f"{result.grouse_prompt_version}")
    return paths


def marks_by_test(results: dict) -> dict[str, dict[str, float | None]]:
    """{test_id: {metric: mark}} from a results.json; failed judgments are left out of the metric."""
    marks: dict[str, dict[str, float | None]] = {}
    for outcome in results.get("outcomes", []):
        marks[outcome["test_id"]] = {m: c["value"] for m, c in outcome["checks"].items()
                                     if c["status"] != "failed"}
    return marks


def agreement_between(path_a: Path, path_b: Path) -> dict:
    """Agreement of two judges' results.json (GroUSE paper, Table 4): Spearman on the Likert metrics,
    three-class macro F1 on the nullable binary ones."""
    from stats.agreement import agreement

    a = marks_by_test(json.loads(Path(path_a).read_text()))
    b = marks_by_test(json.loads(Path(path_b).read_text()))
    return agreement(a, b, LIKERT_METRICS, BINARY_METRICS).as_dict()


# --- MLflow -----------------------------------------------------------------------------------------------

def log_meta_eval(result: MetaEvalResult, paths: dict[str, Path], tracking_uri: str, params: dict,
                  experiment: str = EXPERIMENT) -> str:
    import mlflow

    from pipelines.reporting.tracking import git_commit, log_params_redacted, open_experiment

    open_experiment(tracking_uri, experiment)
    with mlflow.start_run(run_name=f"meta-eval-{result.judge}-{result.model}") as run:
        mlflow.set_tags({"ccrs.kind": "meta-eval", "judge": result.judge, "judge_model": result.model,
                         "git_commit": git_commit(REPO_ROOT)})
        log_params_redacted(mlflow, params)
        metrics = {f"pass_rate_{k}": v for k, v in result.pass_rates.items()}
        for protocol, rates in result.protocol_pass_rates.items():
            metrics.update({f"{protocol.replace('-', '_')}_pass_rate_{k}": v for k, v in rates.items()})
        for protocol, modes in result.failure_modes.items():
            metrics.update({f"{protocol.replace('-', '_')}_{mode}_tests_all_passed": row["tests_all_passed"]
                            for mode, row in modes.items() if row["tests_all_passed"] is not None})
        if result.ccrs and result.ccrs.get("pass_rate") is not None:
            metrics["ccrs_calibration_pass_rate"] = result.ccrs["pass_rate"]
            metrics.update({f"ccrs_calibration_{k}": v for k, v in result.ccrs["per_metric"].items()})
        metrics["seconds"] = result.seconds
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        for path in paths.values():
            mlflow.log_artifact(str(path), artifact_path="meta_eval")
        return run.info.run_id


def run_meta_eval(tests: list[UnitTest], tests_path: str, judge_kind: str, judge: JudgeConfig,
                  client_cfg: ClientConfig, base_url: str, progress: Any = None,
                  protocol: str = PROTOCOLS[0]) -> MetaEvalResult:
    """judge_kind: grouse (unit-test conditions), ccrs (paired calibration), or both. One judge config
    for both: GroUSE's prompt version and reply budget are under `judge.grouse`, CCRS's under `judge.ccrs`;
    its window (`judge.context_window`, with the token count of `judge.tokenizer` or the model's) fits the
    references and the reply budgets. `progress`: a bar of the GroUSE tests, advanced by judgments;
    `protocol`: the GroUSE tests' (PROTOCOLS; all-calls also reports the pipeline's pass rates)."""
    started = time.perf_counter()
    by_protocol, ccrs = {}, None
    with LLMClient(client_cfg, base_url) as client:
        if judge_kind in ("grouse", "both"):
            by_protocol = run_grouse_tests(tests, judge, client, client_cfg, progress, protocol)
        if judge_kind in ("ccrs", "both"):
            ccrs = run_ccrs_calibration(tests, judge, client, client_cfg)
    version = judge.grouse.prompt_version if judge_kind in ("grouse", "both") else None
    outcomes = by_protocol.get(protocol, [])
    return MetaEvalResult(judge_kind, judge.model, tests_path, len(tests), pass_rates(outcomes), outcomes,
                          ccrs, round(time.perf_counter() - started, 2), version, protocol,
                          {name: pass_rates(found) for name, found in by_protocol.items()},
                          {name: failure_mode_table(found) for name, found in by_protocol.items()})
