"""A run's human labels as the statistics read them (tasks/runtime/labels.py): stale labels left out and
counted, skips read beside them, the reduce stage's key over their files."""
import pandas as pd

from tasks.runtime.labels import ANSWER_DIGEST, answer_digest, labels_fingerprint, read_run_labels
from tasks.runtime.layout import RunLayout


def test_labels_of_answers_that_changed_since_they_were_labeled_are_left_out_and_counted(tmp_path):
    """A night rerun in the same folder: a mark whose answer fingerprint no longer matches is stale."""
    from tests.pipelines.conftest import write_labeled_run

    layout = RunLayout(write_labeled_run(tmp_path / "run"))
    answers = pd.read_parquet(layout.generations)
    answers = answers[answers["answer"].fillna("") != ""]
    layout.labels_dir.mkdir()
    rows = [{"question_id": q, "system": s, "metric": "CC", "label": 1, ANSWER_DIGEST: answer_digest(a)}
            for q, s, a in answers[["query_id", "system", "answer"]].itertuples(index=False)]
    rows[0][ANSWER_DIGEST] = answer_digest("an answer of an earlier night")
    rows.append({"question_id": rows[1]["question_id"], "system": rows[1]["system"], "metric": "CC",
                 "label": 0, "annotator": "unfingerprinted"})  # a label brought without a fingerprint counts
    pd.DataFrame(rows).to_json(layout.labels_file, orient="records", lines=True)
    labels = read_run_labels(layout.root)
    assert labels.stale == 1 and len(labels.frame) == len(rows) - 1


def test_a_runs_skips_are_read_beside_its_labels_and_keyed(tmp_path):
    """labels/skips.jsonl (`ccrs label`'s `s`) reaches the statistics and the reduce stage's key."""
    layout = RunLayout(tmp_path / "run")
    layout.labels_dir.mkdir(parents=True)
    pd.DataFrame([{"question_id": "q0", "system": "A", "metric": "CC", "label": 1}]).to_json(
        layout.labels_file, orient="records", lines=True)
    layout.labels_skips.write_text("")  # a server started and nothing skipped yet
    assert read_run_labels(layout.root).skips.empty
    before = labels_fingerprint(layout.root)
    layout.labels_skips.write_text('{"question_id": "q1", "metric": "CC", "annotator": "ann", '
                                   '"time": "2026-11-28T10:00:00Z"}\n')
    skips = read_run_labels(layout.root).skips
    assert skips.to_dict("records") == [{"query_id": "q1", "metric": "CC", "annotator": "ann"}]
    assert labels_fingerprint(layout.root) != before
