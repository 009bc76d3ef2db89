"""Behaviour kept (issue 46): a small recorded run with a sequential judge stage and human labels, concluded
as the pipeline concludes a run after its judge stages (pipelines.pipeline._conclude: the reduce stage, the
verdict, the track stage into a local SQLite MLflow store), gives the stats.json, the summary.md and the
MLflow params, metrics, tags and artifacts recorded in tests/pipelines/data/recorded_run/ before the
features moved onto the extension hooks. `CCRS_RECORD_GOLDEN=1` records them again (only when a change of
contents is meant)."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.config import load_config
from pipelines.pipeline import Answers, _conclude
from tasks.judge import JudgingOutputs
from tasks.runtime.layout import OUTPUTS_STAGE, RunLayout
from tasks.runtime.stage import run_stage
from tests.conftest import REPO

DATA = Path(__file__).parent / "data" / "recorded_run"
RECORD = os.environ.get("CCRS_RECORD_GOLDEN") == "1"
SEQUENTIAL = {"look_every": 8, "margin": 0.2}




def recorded_run(root: Path, tracking_uri: str, overrides: dict | None = None):
    """The run folder after its judge stage: 24 questions x 3 systems' answers (a `ccrs evaluate` run), CCRS's
    CC and QR judged sequentially (its sequential.json as the judge stage wrote it), 16 human CC labels per
    system on a 1-5 scale; with its config (and `overrides`), answers and judge stage as the pipeline holds
    them."""
    layout = RunLayout(root)
    scores = pd.read_parquet(DATA / "scores.parquet")
    questions = sorted(scores["query_id"].unique())
    config = load_config(None, {"name": "recorded", "judges": ["ccrs"], "judge.sequential": SEQUENTIAL,
                                "gqm_goals": None, "stats.hypotheses": None, "stats.b": 200,
                                "run_dir": str(root), "mlflow.tracking_uri": tracking_uri,
                                "mlflow.experiment": "recorded", **(overrides or {})})
    (root / OUTPUTS_STAGE).mkdir(parents=True)
    layout.config_json.write_text(json.dumps(config.model_dump(mode="json")))
    pd.DataFrame({"query_id": questions, "text": "t", "answer": "a", "exact_answer": "[]", "qtype": "factoid",
                  "relevant_doc_ids": [["d"]] * len(questions)}).to_parquet(layout.queries)
    pd.DataFrame({"query_id": questions, "system": "A", "chunk_ids": [["c1"]] * len(questions)}).to_parquet(
        layout.retrieved)
    pd.DataFrame([{"query_id": q, "system": s, "retriever": "bm25", "reader": f"reader-{s}",
                   "answer": f"{q}{s}", "chunk_ids": ["c1"], "status": "ok", "error": None, "tagged": True}
                  for q in questions for s in "ABC"]).to_parquet(layout.generations)
    record = json.loads((DATA / "sequential.json").read_text())
    summary = {"judgments": len(scores), "judge_model": config.judge.model, "prompt_version": "ccrs-v1",
               "sequential": {key: record[key] for key in ("stopped_at", "n_questions",
                                                           "judge_calls_not_sent", "judge_calls_total")}}

    def judged(out_dir: Path) -> dict:
        scores.to_parquet(out_dir / "scores.parquet")
        scores.assign(status="ok", raw="r", reason=None).to_parquet(out_dir / "judgments.parquet")
        shutil.copy(DATA / "sequential.json", out_dir / "sequential.json")
        return summary

    run_stage(root, layout.judge_stage("ccrs"), "recorded", judged)
    _labels(layout, scores)
    answers = Answers(OUTPUTS_STAGE, layout.queries, layout.retrieved, layout.generations, 3,
                      {"rows": 72, "sources": ["recorded"], "systems": {"A": 24, "B": 24, "C": 24}}, False)
    outputs = JudgingOutputs("ccrs", layout.judgments("ccrs"), layout.scores("ccrs"), summary)
    return config, answers, {"ccrs": outputs}


def _labels(layout: RunLayout, scores: pd.DataFrame) -> None:
    rng = np.random.default_rng(7)
    cc = scores[(scores["metric"] == "CC") & (scores["query_id"] < "q16")]
    marks = np.clip(np.round(cc["score"] * 4 + 1 + rng.normal(0, 0.5, len(cc))), 1, 5).astype(int)
    layout.labels_dir.mkdir()
    pd.DataFrame({"question_id": cc["query_id"], "system": cc["system"], "metric": "CC", "label": marks,
                  "annotator": "ann"}).to_json(layout.labels_file, orient="records", lines=True)
    layout.labels_metrics.write_text(json.dumps({"CC": {"scale": [1, 5], "predicted_by": "CC"}}))


# The run config is logged as params whole: of it, what the run's features and statistics read (the rest of
# its schema is other features' to change).
CONFIG_PARAMS = ("name", "judges", "judge.model", "judge.sequential.", "stats.", "mlflow.experiment")


def mlflow_contents(uri: str, run_id: str, scrub, config: dict) -> dict:
    """The parent run's and each system run's params, metrics and tags (MLflow's own tags, the packages'
    versions, the git commit and the config's params outside CONFIG_PARAMS left out) and the parent's
    artifact paths, with what differs between two loggings (ids, folders) scrubbed."""
    from mlflow.tracking import MlflowClient

    from pipelines.reporting.tracking import flatten

    client = MlflowClient(uri)
    volatile = ("mlflow.", "provenance.packages", "provenance.git_commit", "git_commit")
    volatile += tuple(key for key in flatten(config) if not key.startswith(CONFIG_PARAMS))

    def contents(run) -> dict:
        def kept(items):
            return {key: scrub(value) for key, value in sorted(items)
                    if not key.startswith(volatile) and key not in volatile}

        return {"params": kept(run.data.params.items()), "metrics": dict(sorted(run.data.metrics.items())),
                "tags": kept(run.data.tags.items())}

    def artifacts(path: str | None) -> list[str]:
        found = []
        for item in client.list_artifacts(run_id, path):
            found += artifacts(item.path) if item.is_dir else [item.path]
        return found

    parent = client.get_run(run_id)
    # logs/: the session logs of a Ray this process started, copied into every run: there only where an
    # earlier test of the session started one
    kept_artifacts = sorted(path for path in artifacts(None) if not path.startswith("logs/"))
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
    return {"parent": contents(parent), "artifacts": kept_artifacts,
            "systems": {child.data.tags["system"]: contents(child)
                        for child in sorted(children, key=lambda run: run.data.tags["system"])}}


def test_a_recorded_runs_statistics_verdict_and_mlflow_contents_stay_as_recorded(tmp_path, mlflow_db):
    uri = mlflow_db
    root = tmp_path / "run"
    config, answers, judged = recorded_run(root, uri)
    result = _conclude(config, root, answers, judged, None, started_at=1_800_000_000.0)
    run_id, layout = result.tracked["run_id"], RunLayout(root)

    def scrub(text: str) -> str:
        text = text.replace(run_id, "<run>").replace(str(tmp_path), "<tmp>").replace(str(REPO), "<repo>")
        return re.sub(r"/#/experiments/\d+/", "/#/experiments/<id>/", text)

    found = {"stats.json": layout.stats_json.read_text(), "summary.md": layout.summary_md.read_text(),
             "mlflow.json": json.dumps(mlflow_contents(uri, run_id, scrub, config.model_dump(mode="json")),
                                       indent=1, sort_keys=True) + "\n"}
    if RECORD:
        for name, text in found.items():
            (DATA / name).write_text(text)
    for name, text in found.items():
        assert text == (DATA / name).read_text(), name
    stats = json.loads(found["stats.json"])
    assert "sequential" in stats and stats["per_metric"]["CC"]["human_calibrated"]["means"]  # both features
