"""What the gate's tests share: planted per-question scores, judgments as the judge stage writes them, and
pipeline runs logged to a real (local SQLite) MLflow store the way pipelines/reporting/tracking.py logs
them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd


def planted_scores(rng, shift_cell=None, shift=0.0):
    rows = []
    base = rng.uniform(0.2, 0.8, size=(60, 2, 2))
    for q in range(60):
        for s, system in enumerate("AB"):
            for m, metric in enumerate(["CC", "IR"]):
                score = base[q, s, m]
                if (system, metric) == shift_cell:
                    score = np.clip(score + shift, 0, 1)
                rows.append({"query_id": f"q{q}", "system": system, "metric": metric, "score": score})
    return pd.DataFrame(rows)


SETTINGS = {"ccrs.judge_model": "smollm2-135m-instruct", "ccrs.scoring": "expected",
            "ccrs.prompt_versions": '{"ccrs": "v1"}', "ccrs.metrics": "CC,IR", "ccrs.config_name": "nightly"}


class Store:
    """Pipeline runs logged the way pipelines/reporting/tracking.py logs them: the parent run's tags, the
    judgments
    artifact the gate reads (samples/judgments.parquet) and, with `answers`, the per-sample table."""

    def __init__(self, root):
        from mlflow.tracking import MlflowClient

        self.uri = f"sqlite:///{root / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        self.experiment_id = self.client.create_experiment("gate", artifact_location=(root / "art").as_uri())
        self.root = root

    def log(self, scores: pd.DataFrame, failed: int = 0, answers: bool = False, stats: dict | None = None,
            **tags) -> str:
        judgments = scores.assign(status="ok")
        if failed:
            judgments.loc[judgments.index[:failed], ["status", "score"]] = ["failed", None]
        run = self.client.create_run(self.experiment_id, tags={"ccrs.kind": "pipeline", **SETTINGS, **tags})
        path = self.root / f"{run.info.run_id}.parquet"
        judgments.to_parquet(path)
        folder = self.root / run.info.run_id
        folder.mkdir()
        (folder / "judgments.parquet").write_bytes(path.read_bytes())
        self.client.log_artifact(run.info.run_id, str(folder / "judgments.parquet"), "samples")
        if answers:
            self._log_answers(run.info.run_id, scores)
        if stats is not None:  # stats.json where the track stage logs it (fetch.STATS_ARTIFACT)
            (folder / "stats.json").write_text(json.dumps(stats))
            self.client.log_artifact(run.info.run_id, str(folder / "stats.json"), "stats")
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    def _log_answers(self, run_id: str, scores: pd.DataFrame) -> None:
        import mlflow

        from pipelines.reporting.tracking import PER_SAMPLE_TABLE_ARTIFACT

        samples = scores[["query_id", "system"]].drop_duplicates()
        mlflow.set_tracking_uri(self.uri)
        table = samples.assign(question="question " + samples["query_id"],
                               answer="answer of " + samples["system"] + " to " + samples["query_id"])
        mlflow.log_table(table, artifact_file=PER_SAMPLE_TABLE_ARTIFACT, run_id=run_id)

    def tags(self, run_id: str) -> dict:
        return self.client.get_run(run_id).data.tags


def gate_of(store, **options):
    from pipelines.tools.gate import gate
    from pipelines.tools.gate.decide import GateOptions

    return gate(store.uri, "gate", options.pop("run", "latest"), options.pop("baseline", "previous"),
                GateOptions(b=500, **options))


def judged(rows) -> pd.DataFrame:
    """Judgments as the judge stage writes them: (query, system, metric, score, status, raw, reason)."""
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score", "status", "raw", "reason"])


BASELINE_NIGHT = judged([
    ("q1", "P", "QR", 1.0, "ok", "5", None), ("q2", "P", "QR", 0.5, "ok", "3", None),
    ("q3", "P", "QR", 0.25, "ok", "2", None), ("q4", "P", "QR", 0.5, "ok", "3", None),
    ("q1", "P", "CC", 0.5, "ok", "3", None)])
TONIGHT = judged([
    ("q1", "P", "QR", 0.25, "ok", "2", None), ("q2", "P", "QR", 0.5, "ok", "3", None),
    ("q3", "P", "QR", 0.75, "ok", "4", None),
    ("q4", "P", "QR", 0.0, "empty_response", None, "empty response scores 0 without calling the judge"),
    ("q1", "P", "CC", 0.75, "ok", "4", None)])
ANSWERS = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "system": "P",
                        "answer": ["Aspirin inhibits COX.", "b", "c", "d"],
                        "question": ["What does aspirin inhibit?", "Q2?", "Q3?", "Q4?"]})

