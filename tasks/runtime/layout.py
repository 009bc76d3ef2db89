"""Where every stage's outputs live in a run directory: the one declaration that writers and readers share.

    runs/<name>/
      config.json  failures.json  summary.md  logs/
      ingest/ chunk/ embed/ index/ retrieve/ retrieval_metrics/     retrieval stages
      generate/generations.parquet                                  3 readers x 2 retrievers
      outputs/queries.parquet, retrieved.parquet, generations.parquet  `ccrs evaluate`: the user's
                                                                    systems' answers (instead of the
                                                                    retrieval stages and generate)
      preflight/results.json, failures.jsonl, matrix.png           the judge's calibration gate
                                                                    (`judge.preflight`, tasks/calibration.py)
      judge_<suite>/judgments.parquet, scores.parquet               one folder per judge suite (and the
                                                                    files of its loop's policy)
      probes/probe_report.json, ...                                 judge bias probes (`probes:`)
      reduce/stats.json, tables/, plots/                            statistics over every suite's scores
      track/                                                        MLflow run ids (and gqm/ when asked)
      labels/labels.jsonl, metrics.json, order.json, skips.jsonl,   human labels (`ccrs label`)
             design.json

Stages write through tasks/runtime/stage.py into `run_dir/<stage>/`; everything that reads a run (reduce,
tracking, `ccrs report`, `ccrs compare`, `ccrs vera`) finds files through `RunLayout`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PIPELINE_STAGES = ("retrieve", "generate", "judge", "reduce", "track")  # --from-stage choices, in order
JUDGE_PREFIX = "judge_"
OUTPUTS_STAGE = "outputs"  # `ccrs evaluate`: the user's systems' outputs stand for retrieve + generate
# The retrieval stages (tasks/retrieval_stages.py), in order, and their files.
INGEST_STAGE, CHUNK_STAGE, EMBED_STAGE, INDEX_STAGE = "ingest", "chunk", "embed", "index"
RETRIEVE_STAGE, RETRIEVAL_METRICS_STAGE = "retrieve", "retrieval_metrics"
PASSAGES_FILE = "passages.parquet"
CHUNKS_FILE = "chunks.parquet"
VECTORS_FILE = "vectors.npy"
QUERY_VECTORS_FILE = "query_vectors.npy"  # the retrieve stage's query embeddings, in its queries' order
RETRIEVAL_METRICS_FILE = "retrieval_metrics.parquet"
QUERIES_FILE = "queries.parquet"
RETRIEVED_FILE = "retrieved.parquet"
GENERATIONS_FILE = "generations.parquet"
STATS_FILE = "stats.json"
# beside stats.json in reduce/, written after the stage (pipelines/reporting/report.py)
TABLES_DIR, PLOTS_DIR = "tables", "plots"
JUDGMENTS_FILE = "judgments.parquet"
SCORES_FILE = "scores.parquet"
SUMMARY_FILE = "summary.md"
LABELS_DIR, LABELS_FILE = "labels", "labels.jsonl"  # `ccrs label`: human marks of the run's answers
PREFLIGHT_STAGE = "preflight"  # the judge's unit tests before the judge stage (`judge.preflight`)
PROBES_STAGE = "probes"  # the judge bias probes of a run that asks for them (tasks/bias_probes.py)
PROBE_FILES = {"judgments": "probe_judgments.parquet", "report": "probe_report.json",
               "table": "probe_report.csv", "plot": "probe_shift.png"}


@dataclass(frozen=True)
class RunLayout:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    def stage_dir(self, stage: str) -> Path:
        return self.root / stage

    # --- retrieval
    @property
    def passages(self) -> Path:
        return self.stage_dir(INGEST_STAGE) / PASSAGES_FILE

    @property
    def chunks(self) -> Path:
        return self.stage_dir(CHUNK_STAGE) / CHUNKS_FILE

    @property
    def index_dir(self) -> Path:
        return self.stage_dir(INDEX_STAGE)

    @property
    def retrieval_metrics(self) -> Path:
        return self.stage_dir(RETRIEVAL_METRICS_STAGE) / RETRIEVAL_METRICS_FILE

    # --- the answers: retrieval and generation (or the user's outputs)
    @property
    def evaluates_outputs(self) -> bool:
        """A `ccrs evaluate` run: the answers come from the user's systems, not from retrieve + generate."""
        return self.stage_dir(OUTPUTS_STAGE).is_dir()

    @property
    def queries(self) -> Path:
        return self.stage_dir(OUTPUTS_STAGE if self.evaluates_outputs else RETRIEVE_STAGE) / QUERIES_FILE

    @property
    def retrieved(self) -> Path:
        return self.stage_dir(OUTPUTS_STAGE if self.evaluates_outputs else RETRIEVE_STAGE) / RETRIEVED_FILE

    @property
    def generations(self) -> Path:
        return self.stage_dir(OUTPUTS_STAGE if self.evaluates_outputs else "generate") / GENERATIONS_FILE

    # --- judging
    @staticmethod
    def judge_stage(suite: str) -> str:
        return f"{JUDGE_PREFIX}{suite}"

    def judge_dir(self, suite: str) -> Path:
        return self.stage_dir(self.judge_stage(suite))

    def judgments(self, suite: str) -> Path:
        return self.judge_dir(suite) / JUDGMENTS_FILE

    def scores(self, suite: str) -> Path:
        return self.judge_dir(suite) / SCORES_FILE

    def judged_suites(self) -> list[str]:
        """Suites with a finished judge stage in this run, sorted by name: of those its config.json names
        (a suite judged under an earlier config of the same folder is not this run's), or every one
        where no config names them (a pilot folder)."""
        finished = {path.parent.name.removeprefix(JUDGE_PREFIX)
                    for path in self.root.glob(f"{JUDGE_PREFIX}*/{SCORES_FILE}")}
        named = json.loads(self.config_json.read_text()).get("judges") if self.config_json.exists() else None
        return sorted(finished if named is None else finished & set(named))

    @property
    def probe_report(self) -> Path:
        """The probe stage's report (`probes:` in the run config), read by the verdict and the track stage."""
        return self.stage_dir(PROBES_STAGE) / PROBE_FILES["report"]

    @property
    def preflight_dir(self) -> Path:
        """The calibration gate's stage (tasks/calibration.py): the judge's unit-test results."""
        return self.stage_dir(PREFLIGHT_STAGE)

    # --- reduce, tracking, reports
    @property
    def reduce_dir(self) -> Path:
        return self.stage_dir("reduce")

    @property
    def stats_json(self) -> Path:
        return self.reduce_dir / STATS_FILE

    @property
    def track_pending(self) -> Path:
        """Holds the id of an MLflow run being logged (a half-logged run is superseded by the next)."""
        return self.root / ".track.pending"

    @property
    def track_dir(self) -> Path:
        return self.stage_dir("track")

    @property
    def config_json(self) -> Path:
        return self.root / "config.json"

    @property
    def failures_json(self) -> Path:
        return self.root / "failures.json"

    @property
    def summary_md(self) -> Path:
        """The verdict (pipelines/reporting/verdict.py): printed by `ccrs run` and `ccrs show`, logged to
        MLflow."""
        return self.root / SUMMARY_FILE

    @property
    def logs_dir(self) -> Path:
        """Third-party log records of the run (Ray, Serve, vLLM, HTTP clients), kept off the console."""
        return self.root / "logs"

    @property
    def console_log(self) -> Path:
        """Everything the driver process wrote to stdout/stderr besides the progress and the verdict."""
        return self.logs_dir / "console.log"

    @property
    def ray_logs_dir(self) -> Path:
        """A copy of the Ray session's log files (Serve controller, proxy, replicas with vLLM, workers)."""
        return self.logs_dir / "ray"

    @property
    def gqm_dir(self) -> Path:
        """`ccrs report` output (the pipeline writes its GQM report under track/gqm)."""
        return self.root / "gqm"

    @property
    def vera_dir(self) -> Path:
        """`ccrs vera bootstrap` output (bootstrap.json) beside the run's stages."""
        return self.root / "vera"

    @property
    def labels_dir(self) -> Path:
        """Human labels of the run's answers (`ccrs label`), read by the reduce stage and `ccrs stats RUN_DIR`
        for the human-calibrated (PPI++) statistics (docs/human-labels.md)."""
        return self.root / LABELS_DIR

    @property
    def labels_file(self) -> Path:
        """One JSON line per mark, appended as given: question_id, system, metric, label, annotator, time."""
        return self.labels_dir / LABELS_FILE

    @property
    def labels_metrics(self) -> Path:
        """{metric: {"scale": [low, high], "predicted_by": judge metric}}: each labeled metric's mark scale
        and the judge metric that predicts it (itself, for a judge metric)."""
        return self.labels_dir / "metrics.json"

    @property
    def labels_order(self) -> Path:
        """The seeded random order of the run's questions the page shows (seed and question ids)."""
        return self.labels_dir / "order.json"

    @property
    def labels_design(self) -> Path:
        """{metric: its active labeling design}: the rule, floor, budget, seed and each question's
        uncertainty, probability and draw (`ccrs label --design active`), checked by `ccrs stats`."""
        return self.labels_dir / "design.json"

    @property
    def labels_skips(self) -> Path:
        """One JSON line per question an annotator skipped (question_id, metric, annotator, time)."""
        return self.labels_dir / "skips.jsonl"
