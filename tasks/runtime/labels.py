"""A run's human labels as the statistics read them (docs/human-labels.md): the files `ccrs label` writes
into RUN_DIR/labels/ or a labels file given to a command, read into stats.labels' typed LabelSet. The
labels extension (pipelines/extensions/labels.py) hands them to the reduce stage and `ccrs stats`; the
labeling page writes each label with the fingerprint of the answer it marks (ANSWER_DIGEST)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from stats.errors import StatsInputError
from stats.labels import LabelSet, validate_labels, validate_skips
from tasks.runtime.layout import RunLayout
from tasks.runtime.stage import file_fingerprint
from tasks.runtime.tables import read_table

ANSWER_DIGEST = "answer_sha1"  # a label's fingerprint of the answer it marks (`ccrs label` writes it)


def answer_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def read_labels_file(path: str | Path) -> pd.DataFrame:
    """Human labels (`ccrs label`'s labels.jsonl, or the user's CSV/JSONL/Parquet), unchecked: see
    stats.labels.validate_labels."""
    return read_table(path, "labels")


def read_run_labels(run_dir: Path) -> LabelSet | None:
    """The human labels of a run (RUN_DIR/labels/, written by `ccrs label`), None where it has none: the
    marks with each metric's scale and judge metric from labels/metrics.json, and the questions skipped
    (labels/skips.jsonl). A label whose answer has changed since it was given (a night rerun in the same
    folder) is left out and counted (`stale`)."""
    layout = RunLayout(run_dir)
    if not layout.labels_file.is_file():
        return None
    try:
        declared = json.loads(layout.labels_metrics.read_text()) if layout.labels_metrics.is_file() else {}
    except (OSError, ValueError) as error:
        raise StatsInputError(f"cannot read {layout.labels_metrics}: {error}") from error
    scales = {metric: tuple(entry["scale"]) for metric, entry in declared.items()}
    predicted_by = {metric: entry.get("predicted_by", metric) for metric, entry in declared.items()}
    frame, stale = _current_labels(read_labels_file(layout.labels_file), layout)
    labels = validate_labels(frame, scales or None, predicted_by)
    skipped = layout.labels_skips.is_file() and layout.labels_skips.stat().st_size > 0
    skips = read_table(layout.labels_skips, "skips") if skipped else pd.DataFrame()
    return replace(labels, stale=stale, skips=validate_skips(skips))


def _current_labels(frame: pd.DataFrame, layout: RunLayout) -> tuple[pd.DataFrame, int]:
    """The labels of the answers the run holds now (those without a fingerprint are kept)."""
    if ANSWER_DIGEST not in frame.columns or not layout.generations.is_file():
        return frame, 0
    answers = pd.read_parquet(layout.generations, columns=["query_id", "system", "answer"])
    now = {(str(q), str(s)): answer_digest(a if isinstance(a, str) else "")  # a failed generation: None
           for q, s, a in answers.itertuples(index=False)}
    key = "question_id" if "question_id" in frame.columns else "query_id"
    digest = frame[ANSWER_DIGEST]
    current = [d is None or d != d or now.get((str(q), str(s))) == d
               for q, s, d in zip(frame[key], frame["system"], digest)]
    return frame[current].drop(columns=[ANSWER_DIGEST]), int(len(frame) - sum(current))


def labels_fingerprint(run_dir: Path) -> list:
    """What the reduce stage's key covers of a run's labels (nothing when it has none), an active design's
    record with them (it weights them)."""
    layout = RunLayout(run_dir)
    files = (layout.labels_file, layout.labels_metrics, layout.labels_skips, layout.labels_design)
    return [file_fingerprint(path) for path in files if path.is_file()]
