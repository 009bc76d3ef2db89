"""A judge's meta-evaluation: the GroUSE unit tests (their conditions checked by tasks/calibration.py,
shared with a run's calibration gate) and the CCRS calibration, and its files: results.json,
failures.jsonl and matrix.png.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from judges.client import LLMClient
from judges.config import ClientConfig, JudgeConfig
from judges.grouse_unit_tests import UnitTest
from pipelines.reporting.calibration import plot_matrix
from tasks.calibration import (
    PROTOCOLS,
    TestOutcome,
    failing_cases,
    failure_mode_table,
    pass_rates,
    run_grouse_tests,
)
from pipelines.tools.meta_eval.calibration import run_ccrs_calibration


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
