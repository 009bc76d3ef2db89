"""A run in which every judgment failed (issue 33 item 6) is a verdict, not a crash: the reduce stage writes
a stats.json with nothing in it, the verdict is the failure table, the most common reasons and the judge's
replies, the track stage logs the MLflow run, and `ccrs run` / `ccrs evaluate` end with one line and exit 4.
The judge is tests/fakes.py's FakeLLMClient answering in prose, through a `JudgeSession`;
the MLflow store is a local SQLite file (the real-stack run of the same path: test_prose_judge.py)."""
from __future__ import annotations

import json

import pandas as pd

from judges.config import CcrsOptions, JudgeConfig
from judges.suite import Sample, metric_order, suite_membership
from pipelines.extensions import track_payloads
from pipelines.tools.run_outcome import outcome_code
from pipelines.tools.gqm_report import DEFAULT_GOALS
from pipelines.tools.gate.decide import STATUSES
from pipelines.reporting.failures import write_failure_report
from tasks.judge import judgments_frame, judging_summary, write_judgments
from tasks.runtime.judge_session import JudgeSession
from tasks.runtime.layout import RunLayout
from tasks.reduce import run_reduce
from pipelines.reporting.track import RunRecord, run_track
from pipelines.reporting.verdict import write_summary
from tests.conftest import REPO
from tests.fakes import FakeLLMClient

PROSE = "I think this answer is quite relevant to the question asked."
QUESTIONS = ["q0", "q1"]


def judged_in_prose(root) -> tuple[RunLayout, dict]:
    """One system (prod), two questions, QR judged by a judge that never gives a mark."""
    layout = RunLayout(root)
    layout.judge_dir("ccrs").mkdir(parents=True)
    (root / "outputs").mkdir()
    pd.DataFrame({"query_id": QUESTIONS, "text": ["What is X?", "What is Y?"], "answer": "a",
                  "qtype": "summary"}).to_parquet(root / "outputs" / "queries.parquet")
    pd.DataFrame({"query_id": QUESTIONS, "system": "prod", "retriever": "outputs", "reader": "prod.jsonl",
                  "answer": "An answer.", "chunk_ids": [["c1"]] * 2, "status": "ok", "error": None,
                  "tagged": True}).to_parquet(root / "outputs" / "generations.parquet")
    layout.config_json.write_text(json.dumps({"name": "prose-judge", "judges": ["ccrs"]}))
    samples = [Sample(q, "prod", text, "An answer.", "gt", ["c"]) for q, text in zip(QUESTIONS, "XY")]
    judge = JudgeConfig(max_reasks=0, ccrs=CcrsOptions(metrics=["QR"]))
    judgments, counts = JudgeSession.of("ccrs", judge, llm=FakeLLMClient(PROSE)).judge_samples(samples)
    frame = judgments_frame(judgments)
    write_judgments(frame, layout.judge_dir("ccrs"))
    return layout, judging_summary(frame, counts, 1.0, "ccrs", "v1", "smollm2-135m-instruct")


def test_every_judgment_failed_is_a_verdict_an_mlflow_run_and_exit_4_with_one_line(tmp_path, mlflow_db,
                                                                                   capsys):
    from mlflow.tracking import MlflowClient

    layout, summary = judged_in_prose(tmp_path / "run")
    # the demo's hypotheses name systems A-F: with nothing scored they are not tested, and no crash
    reduce = run_reduce(layout.root, [layout.scores("ccrs")], 100, 0, 0.05,
                        str(REPO / "configs" / "hypotheses" / "cpu-demo.yaml"),
                        metric_order=metric_order(), suites=suite_membership())
    stats = json.loads(layout.stats_json.read_text())
    assert (stats["systems"], stats["per_metric"], stats["hypotheses"]) == ([], {}, {})
    assert stats["notes"][0].startswith("no judgment has a score")
    assert reduce.summary["files"] == ["stats.json"]
    write_failure_report(layout.root, {"judge_ccrs": summary})
    verdict = write_summary(layout.root).read_text()
    reason = "invalid after 0 re-asks: no number in reply"
    assert verdict.startswith(f"# Verdict: prose-judge\n\n**Every one of the 2 judgments failed ({reason}: "
                              "2): no scores, so no statistics.**")
    assert f"| judge_ccrs | 2 | 2 | 0 | {reason} (2) |" in verdict  # the failure table
    assert f"## Most common reasons\n\n| reason | judgments |\n| --- | --- |\n| {reason} | 2 |" in verdict
    assert f"| q0 | prod | QR | {reason} | {PROSE} |" in verdict  # the judge's own reply

    uri = mlflow_db
    record = RunRecord(run_name="prose-judge", config={"name": "prose-judge",
                                                       "dataset": {"path": str(tmp_path)}},
                       provenance={"git_commit": "abc"}, tags={"ccrs.config_name": "prose-judge"},
                       queries_path=layout.root / "outputs" / "queries.parquet",
                       generations_path=layout.root / "outputs" / "generations.parquet",
                       judgments_paths={"ccrs": layout.judgments("ccrs")},
                       stage_summaries={"judge_ccrs": summary}, retrieval_metrics={},
                       failures_path=layout.failures_json)
    goals = track_payloads({"gqm_goals": str(DEFAULT_GOALS)})
    tracked = run_track(layout.root, record, reduce, uri, "prose-judge", goals).summary
    client = MlflowClient(uri)
    assert client.get_run(tracked["run_id"]).info.status == "FINISHED"
    assert {"summary.md", "failures", "stats", "samples"} <= {a.path for a in
                                                             client.list_artifacts(tracked["run_id"])}

    capsys.readouterr()
    assert outcome_code("ccrs evaluate", layout) == STATUSES["failure_rate"] == 4
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"ccrs evaluate: every one of the 2 judgments failed ({reason}: 2): no scores, so no "
                    f"statistics; the failure table, reasons and the judge's replies: {layout.summary_md}")
