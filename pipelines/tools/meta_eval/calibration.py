"""The CCRS calibration on the GroUSE unit tests (paired): each variant of a set must score strictly below
the set's correct answer on the CCRS metrics its defect should lower.
"""
from __future__ import annotations

from typing import Any

from judges.ccrs import SUITE as SUITE_CCRS
from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.grouse_unit_tests import UnitTest
from judges.suite import Judgment, Sample
from tasks.runtime.judge_session import JudgeSession

# CCRS calibration (paired): test type -> CCRS metrics expected strictly lower than for type 1 (the
# correct answer) of the same set, which sees the same references and the same ground truth.
CCRS_EXPECTATIONS: dict[int, tuple[str, ...]] = {
    16: ("AC", "CC"),          # a distorted fact: less correct, less supported by the context
    8: ("QR", "ID"),           # irrelevant content added: less relevant, less focused
    10: ("IR",),               # relevant information missing: less informative
    11: ("AC", "IR", "QR"),    # wrongly says there is no answer
    12: ("AC", "IR"),          # wrongly says there is no answer, adds related information
}


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
