"""`ccrs run` killed with SIGKILL (its whole process group: driver and local Ray) inside the judging stage,
after its earlier stages finished; the rerun reuses the finished stages, resumes the judging stage from its
checkpoint and ends with the results of an uninterrupted run of the same config and seeds (the uninterrupted
run and the rerun in this process, on the session's Ray: only the killed run needs a process and a Ray of its
own; a rerun's own `ccrs` process and Ray start cost about 12 s on 2 cores and add nothing to what resumes:
the run folder)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipelines.config import DEFAULT_CONFIG
from tasks.runtime.layout import RunLayout
from tests.conftest import copy_empty_mlflow_db, write_bioasq_subset

pytestmark = pytest.mark.llm
JUDGE = RunLayout.judge_stage("ccrs")
COMPARED = ["query_id", "system", "metric", "status", "llm_score", "score"]


def _write_config(path: Path, llm_base_url: str, corpus: Path) -> Path:
    config = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    config.update({"name": "resume", "run_dir": str(path.parent / "run")})
    # the first 2 questions over the snippets of the sample's first 4 (CI time: the whole sample's 685
    # passages were chunked and indexed in each run)
    config["dataset"].update({"path": str(corpus), "limit": 2})
    # the LLM reader (its generations must resume identically; 32 new tokens, not 96: shorter answers in the
    # judge prompts) and two extractive readers over BM25 alone (no embedding model to load in each
    # process), judged on 3 metrics, not 5 (AC: the EM + LLM score): 3 systems, 18 judgments, not 30
    config["readers"] = config["readers"][:3]
    config["readers"][0]["max_tokens"] = 32
    config["judge"]["ccrs"]["metrics"] = ["CC", "QR", "AC"]
    config["retrieval"].update({"retrievers": ["bm25"], "top_k": 3})
    config["stats"].update({"b": 200, "hypotheses": None})  # the demo's hypotheses name systems E and F
    config["gqm_goals"] = None  # CI time: the GQM report's four plots in each run's track stage
    config["serving"] = {"profile": "external", "base_url": llm_base_url}
    config["mlflow"]["tracking_uri"] = f"sqlite:///{path.parent / 'mlflow.db'}"
    # small shards, one at a time, so the judging stage checkpoints 4 units at a time, seconds apart, and
    # the kill lands inside the stage (two shards in flight came back together, in bursts)
    config["client"].update({"shard_size": 4, "max_shards_in_flight": 1})
    config["judge"]["scoring"] = "integer"  # CI time: the demo's expected marks cost 3x (tested in e2e)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def _start(workdir: Path, config: Path, cache: Path) -> subprocess.Popen:
    # MLflow settings of the calling process are not inherited: the run logs where its config says
    env = {name: value for name, value in os.environ.items() if not name.startswith("MLFLOW_")}
    env.update({"CCRS_JUDGE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    env.pop("RAY_ADDRESS", None)
    with open(workdir / "ccrs-run.log", "ab") as log:
        return subprocess.Popen([str(Path(sys.executable).with_name("ccrs")), "run", "--config", str(config)],
                                cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _run_here(config: Path, cache: Path, monkeypatch) -> None:
    from pipelines.config import load_config
    from pipelines.pipeline import run_pipeline

    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(cache))
    run_pipeline(load_config(config), keep_serving=True)


def _kill_when(workdir: Path, config: Path, cache: Path, ready, what: str) -> None:
    process = _start(workdir, config, cache)
    deadline = time.monotonic() + 900
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"the run ended (rc={process.returncode}) before {what}: "
                        f"{(workdir / 'ccrs-run.log').read_text()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _checkpointed_judgments(run_dir: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (run_dir / f".{JUDGE}.partial").glob("**/*.jsonl"))


def _results(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    judgments = pd.read_parquet(RunLayout(run_dir).judgments("ccrs"))[COMPARED]
    generations = pd.read_parquet(run_dir / "generate" / "generations.parquet")[
        ["query_id", "system", "answer"]
    ]
    stats = json.loads((run_dir / "reduce" / "stats.json").read_text())
    return judgments, generations, {m: block["means"] for m, block in stats["per_metric"].items()}


def test_a_killed_run_resumes_between_and_inside_stages_with_identical_results(tmp_path, llm_endpoint,
                                                                               monkeypatch, empty_mlflow_db,
                                                                               capsys):
    baseline_dir, killed_dir = tmp_path / "baseline", tmp_path / "killed"
    corpus = write_bioasq_subset(tmp_path / "bioasq-corpus", 4)
    baseline_cfg = _write_config(baseline_dir / "config.yaml", llm_endpoint.base_url, corpus)
    killed_cfg = _write_config(killed_dir / "config.yaml", llm_endpoint.base_url, corpus)
    # each run's new store (its config's tracking_uri), copied from the session's empty one as the process
    # that opens it first would make it: this one for the baseline, `ccrs run` in killed_dir for the other
    copy_empty_mlflow_db(empty_mlflow_db, baseline_dir / "mlflow.db")
    copy_empty_mlflow_db(empty_mlflow_db, killed_dir / "mlflow.db", killed_dir / "mlruns")
    _run_here(baseline_cfg, tmp_path / "cache-baseline", monkeypatch)

    run_dir = killed_dir / "run"
    cache = tmp_path / "cache-killed"
    # killed inside the judging stage, once some shards are checkpointed (generation has landed before it)
    _kill_when(killed_dir, killed_cfg, cache, lambda: _checkpointed_judgments(run_dir) >= 8,
               "8 checkpointed judgments")
    assert not (RunLayout(run_dir).judge_dir("ccrs") / "_STAGE.json").exists()
    generate_manifest = (run_dir / "generate" / "_STAGE.json").stat().st_mtime_ns
    saved = _checkpointed_judgments(run_dir)
    partial_keys = sorted(p.name for p in (run_dir / f".{JUDGE}.partial").iterdir())
    # the rerun reuses the finished stages and asks the judge only about what the checkpoint lacks
    capsys.readouterr()
    _run_here(killed_cfg, cache, monkeypatch)
    assert (run_dir / "generate" / "_STAGE.json").stat().st_mtime_ns == generate_manifest
    manifest = json.loads((RunLayout(run_dir).judge_dir("ccrs") / "_STAGE.json").read_text())
    judge_summary = manifest["summary"]
    said = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("judge ccrs:", "generate:", "retrieve:"))]
    why = {"saved": saved, "partial keys": partial_keys, "rerun key": manifest["key"], "log": said,
           **{k: judge_summary.get(k) for k in ("cache_hits", "resumed", "judge_requests")}}
    assert 8 <= judge_summary["resumed"] <= saved, why  # a line torn by the kill is not counted
    assert judge_summary["judge_requests"] > 0 and judge_summary["cache_hits"] == 0, why
    assert not (run_dir / f".{JUDGE}.partial").exists()

    expected, resumed = _results(baseline_dir / "run"), _results(run_dir)
    pd.testing.assert_frame_equal(resumed[0], expected[0])
    pd.testing.assert_frame_equal(resumed[1], expected[1])
    assert resumed[2] == expected[2]
