"""A sequential run on the real CPU stack (the session's SmolLM2 judge): `ccrs evaluate --sequential` on
BioASQ questions answered by a system that gives the reference answer and one that answers nothing (AC =
0.7 EM + 0.3 LLM: a difference of 0.7 or more on every question). It stops before its last question, and a
run killed with SIGKILL between two looks resumes to the same judgments and decisions as an uninterrupted
one.

CI time: 6 questions with the config's judge.sequential target `questions` (about these 6: the difference
settles after the second look, at 4 of 6, whatever the judge adds to 0.7), not 16 about the population
(settled at 14: 14 judgments in each of the two runs, looks of 2 questions)."""
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

from tasks.runtime.layout import RunLayout
from tests.conftest import bioasq_questions, sample_field

pytestmark = pytest.mark.llm
REPO = Path(__file__).resolve().parents[2]
QUESTIONS = 6
COMPARED = ["query_id", "system", "metric", "status", "llm_score", "score"]


def _outputs(path: Path) -> Path:
    rows = []
    for question in bioasq_questions(QUESTIONS):
        ideal = sample_field(question["ideal_answer"])
        reference = ideal[0] if isinstance(ideal, list) else str(ideal)
        common = {"question_id": question["id"], "question": question["body"], "reference": reference,
                  "contexts": [s["text"] for s in sample_field(question["snippets"])][:2]}
        rows += [{**common, "system": "exact", "answer": reference},  # EM 1: AC >= 0.7
                 {**common, "system": "silent", "answer": ""}]  # scores 0, no judge call
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _config(path: Path) -> Path:
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"]["scoring"] = "integer"
    config["stats"] = {**config["stats"], "b": 200, "hypotheses": None}
    # the block --sequential turns on; the options given (--look-every, --margin) set its other fields
    config["judge"]["sequential"] = {"target": "questions"}
    config["gqm_goals"] = None  # CI time: the GQM report's four plots in each run's track stage
    path.write_text(yaml.safe_dump(config))
    return path


def _arguments(tmp_path: Path, run: str, base_url: str) -> list[str]:
    return ["evaluate", str(tmp_path / "outputs.jsonl"), "--config", str(tmp_path / "config.yaml"),
            "--metrics", "AC", "--sequential", "--look-every", "2", "--margin", "0.1",
            "--llm-base-url", base_url, "--out", str(tmp_path / run),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]


def _start(tmp_path: Path, arguments: list[str], cache: Path, log_name: str) -> subprocess.Popen:
    """`ccrs evaluate` in a process (and a Ray) of its own: the CLI's end would stop the session's Ray,
    which serves the judge."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MLFLOW_")}
    env.update({"CCRS_JUDGE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    env.pop("RAY_ADDRESS", None)
    with open(tmp_path / log_name, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "pipelines.cli", *arguments], cwd=tmp_path, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_after_first_look(process: subprocess.Popen, run: Path, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not list(run.rglob("part-00000.parquet")):
        assert process.poll() is None, "the run ended before its first look was written"
        assert time.monotonic() < deadline, "no look written in time"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _judgments(run: Path) -> pd.DataFrame:
    frame = pd.read_parquet(RunLayout(run).judgments("ccrs"))[COMPARED]
    return frame.sort_values(COMPARED[:3]).reset_index(drop=True)


def _run_here(tmp_path: Path, run: str, base_url: str, cache: Path, monkeypatch) -> None:
    """The same evaluation in this process, on the session's Ray (only the killed run needs its own)."""
    from pipelines.evaluate import prepare_evaluation
    from pipelines.pipeline import run_evaluation
    from tests.conftest import process_state_restored

    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(cache))
    config, outputs = prepare_evaluation(
        [tmp_path / "outputs.jsonl"], config=tmp_path / "config.yaml", metrics=["AC"], llm_base_url=base_url,
        out=tmp_path / run, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        sequential={"look_every": 2, "margin": 0.1})  # ccrs_eval.evaluate()'s option
    with process_state_restored():
        run_evaluation(config, outputs)


def test_a_sequential_run_stops_early_and_resumes_exactly_after_a_kill(llm_endpoint, tmp_path, monkeypatch,
                                                                       mlflow_db):
    # mlflow_db: the runs' store, tmp_path/mlflow.db, a copy of the session's empty one (first opened here)
    _outputs(tmp_path / "outputs.jsonl")
    _config(tmp_path / "config.yaml")
    _run_here(tmp_path, "whole", llm_endpoint.base_url, tmp_path / "cache-whole", monkeypatch)
    whole = json.loads(RunLayout(tmp_path / "whole").stats_json.read_text())["sequential"]
    assert whole["stopped_at"] < whole["n_questions"] == QUESTIONS
    (decision,) = whole["decisions"]
    assert (decision["metric"], decision["a"], decision["b"], decision["decision"]) == \
        ("AC", "exact", "silent", "different")
    assert _judgments(tmp_path / "whole")["query_id"].nunique() == whole["stopped_at"]  # the rest never sent

    arguments = _arguments(tmp_path, "killed", llm_endpoint.base_url)
    _kill_after_first_look(_start(tmp_path, arguments, tmp_path / "cache-killed", "killed.log"),
                           tmp_path / "killed")
    _run_here(tmp_path, "killed", llm_endpoint.base_url, tmp_path / "cache-killed", monkeypatch)
    again = json.loads(RunLayout(tmp_path / "killed").stats_json.read_text())["sequential"]
    assert {key: again[key] for key in ("stopped_at", "decisions", "looks")} == \
        {key: whole[key] for key in ("stopped_at", "decisions", "looks")}
    pd.testing.assert_frame_equal(_judgments(tmp_path / "killed"), _judgments(tmp_path / "whole"))
