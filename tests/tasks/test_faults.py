"""The judge stage under real faults, against the real CPU stack: a fault-injecting proxy (HTTP 500,
hangs, dropped connections, garbage) in front of Serve, an outage long enough to open the client's
circuit, and the vLLM replica killed by pid mid-run. Each run must end with exactly one judgment or
recorded failure per (query, system, metric) and the same judgments as an undisturbed run."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.fault_proxy import FaultPlan, FaultProxy
from infra.readiness import wait_until_ready
from judges.config import ClientConfig, JudgeConfig, ReaderConfig
from tasks.generate import run_generation
from tasks.judge import run_judging

pytestmark = pytest.mark.llm
COMPARED = ["query_id", "system", "metric", "status", "llm_score", "score"]
QUESTIONS = 2
JUDGMENTS = QUESTIONS * 2 * 5  # x 2 retrievers (one extractive reader) x 5 CCRS metrics
KILL_AFTER_FORWARDED = 10  # the first requests answered, half of the run still to come


@pytest.fixture(scope="module")
def judged_inputs(tmp_path_factory):
    from tests.conftest import write_bioasq_inputs

    root = tmp_path_factory.mktemp("faults")
    # 2 questions x 2 retrievers: 4 samples, 20 judgments (CI time; every fault below still lands mid-run)
    inputs = write_bioasq_inputs(root / "inputs", limit=QUESTIONS)
    readers = [ReaderConfig(name="extractive", kind="extractive", max_sentences=2)]
    gens = run_generation(root / "gen", *inputs, readers, ClientConfig(), "http://unused/v1", top_k=3,
                          progress=False).path
    return (*inputs, gens)


def _judge(run_dir: Path, inputs, base_url: str, judge_model: str, **client) -> tuple[pd.DataFrame, dict]:
    cfg = ClientConfig(**{"max_concurrency": 4, **client})
    judge = JudgeConfig(model=judge_model, cache=False, structured_output=True)
    out = run_judging(run_dir, "ccrs", *inputs, judge, cfg, base_url, top_k=3, progress=False)
    return pd.read_parquet(out.judgments_path), {**out.summary, "scores_path": out.scores_path}


def _final_stats(run_dir: Path, scores_path: Path) -> dict:
    """The reducer's statistics (HSD, bootstrap CIs, ... with B=500 and a fixed seed) per metric."""
    import json

    from judges.suite import metric_order, suite_membership
    from tasks.reduce import run_reduce

    result = run_reduce(run_dir, [scores_path], b=500, seed=0, alpha=0.05,
                        metric_order=metric_order(), suites=suite_membership())
    return json.loads((result.out_dir / "stats.json").read_text())["per_metric"]


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, judged_inputs, llm_endpoint):
    run_dir = tmp_path_factory.mktemp("undisturbed")
    frame, summary = _judge(run_dir, judged_inputs, llm_endpoint.base_url, llm_endpoint.judge_model)
    assert len(frame) == JUDGMENTS and (frame["status"] == "ok").sum() >= 15  # real scores, not failures
    frame.attrs["stats"] = _final_stats(run_dir, summary["scores_path"])
    return frame


def _same_judgments(frame: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert not frame.duplicated(["query_id", "system", "metric"]).any()
    pd.testing.assert_frame_equal(frame[COMPARED], expected[COMPARED])


def test_mixed_faults_change_nothing_in_the_judgments(tmp_path, judged_inputs, llm_endpoint, undisturbed):
    plan = FaultPlan(http_500=0.1, timeout=0.03, drop=0.1, garbage=0.07, hang_s=8.0, seed=11)
    with FaultProxy(llm_endpoint.base_url, plan) as proxy:
        frame, summary = _judge(tmp_path, judged_inputs, proxy.base_url, llm_endpoint.judge_model,
                                max_retries=6, backoff_base_s=0.05, backoff_max_s=0.5, timeout_s=5.0,
                                circuit_failure_threshold=50)
    _same_judgments(frame, undisturbed)
    client = summary["requests"]["client"]
    assert sum(proxy.stats.injected.values()) >= 5
    assert client["retries"] >= sum(proxy.stats.injected.values())
    assert set(client["errors"]) <= {"http_500", "timeout", "connection", "invalid_body"}


def test_an_outage_opens_the_circuit_and_the_stage_requeues_after_it(tmp_path, judged_inputs, llm_endpoint,
                                                                     undisturbed):
    with FaultProxy(llm_endpoint.base_url, FaultPlan(outage=6, outage_kind="drop")) as proxy:
        frame, summary = _judge(tmp_path, judged_inputs, proxy.base_url, llm_endpoint.judge_model,
                                max_retries=2, backoff_base_s=0.01, backoff_max_s=0.02,
                                circuit_failure_threshold=2, circuit_cooldown_s=60.0, requeue_wait_s=60.0)
    _same_judgments(frame, undisturbed)
    report = summary["requests"]
    assert report["client"]["circuit_opens"] >= 1 and report["client"]["short_circuited"] > 0
    assert report["requeued"] and report["requeued"][0] > 0
    # the circuit kept the dead endpoint from seeing (calls x attempts) requests
    assert proxy.stats.injected["drop"] == 6


def _llm_replica_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmdline.startswith("ray::ServeReplica:") and ":LLMServer:" in cmdline:
                pids.append(int(entry.name))
    return pids


def test_killing_the_vllm_replica_mid_run_loses_nothing(tmp_path, judged_inputs, llm_endpoint, undisturbed):
    pids = _llm_replica_pids()
    if len(pids) != 1:
        pytest.skip(f"need exactly one local LLMServer replica process to kill, found {pids}")
    killed = threading.Event()
    with FaultProxy(llm_endpoint.base_url) as proxy:

        def kill_when_half_done() -> None:
            while proxy.stats.forwarded < KILL_AFTER_FORWARDED:
                time.sleep(0.05)
            os.kill(pids[0], signal.SIGKILL)
            killed.set()

        threading.Thread(target=kill_when_half_done, daemon=True).start()
        frame, summary = _judge(tmp_path, judged_inputs, proxy.base_url, llm_endpoint.judge_model,
                                max_retries=3, backoff_base_s=0.5, backoff_max_s=2.0, timeout_s=120.0,
                                circuit_failure_threshold=3, circuit_cooldown_s=10.0, requeue_wait_s=600.0)
    assert killed.is_set()
    wait_until_ready(llm_endpoint.base_url, 600, [llm_endpoint.judge_model])
    new_pids = _llm_replica_pids()
    assert new_pids and pids[0] not in new_pids  # Serve replaced the replica
    _same_judgments(frame, undisturbed)
    assert _final_stats(tmp_path, summary["scores_path"]) == undisturbed.attrs["stats"]
    print("replica kill:", summary["requests"])
