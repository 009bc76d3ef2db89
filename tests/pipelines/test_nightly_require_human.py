"""`ccrs nightly --require-human` on the real CPU stack against the session's `mlflow server`: a drop the
judge sees is held (exit 7, awaiting_labels, tonight named) until both nights are labeled, then the human
scale decides it (exit 3). The labels are written through the labeling page's store (what `ccrs label`
serves), into the series' one run folder, night after night; a night run again reuses its stages and its
reduce stage reads the labels."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from judges.readers import extractive_answer
from pipelines.tools import labeling
from tasks.runtime.layout import RunLayout
from tests.pipelines.test_nightly_cmd import night, nightly_config

pytestmark = [pytest.mark.llm, pytest.mark.slow]
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "bioasq-sample" / "12B1_golden_sample.json"
QUESTIONS = 12  # at least 10 labels a system: below that no human-calibrated mean is claimed


def _field(value):
    return ast.literal_eval(value) if isinstance(value, str) and value[:1] in "[{" else value


def production_outputs(path: Path, broken: bool = False) -> Path:
    """One system ("prod") answering 12 BioASQ questions with the extractive reader over their first three
    gold snippets; `broken`: every answer empty (a release that broke the generator)."""
    rows = []
    for question in json.loads(SAMPLE.read_text())["questions"][:QUESTIONS]:
        contexts = [snippet["text"] for snippet in _field(question["snippets"])][:3]
        answer = "" if broken else extractive_answer(question["body"], contexts, 3)
        rows.append({"system": "prod", "user_input": question["body"], "response": answer,
                     "retrieved_contexts": contexts})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def label_every_answer(run_dir: Path, marks: tuple[int, ...]) -> int:
    """An annotator labels every answer the page serves on QR's scale, the i-th question marks[i % len]."""
    layout = RunLayout(run_dir)
    metric = labeling.resolve_metric(layout, "QR", None, None, None)
    questions = labeling.load_questions(layout)
    order = labeling.question_order(layout, [q.query_id for q in questions], 0)
    labeling.record_metric(layout, metric)
    store = labeling.LabelStore(layout, metric, questions, order, 0)
    served = 0
    while (shown := store.state("ann")["question"]) is not None:
        mark = marks[served % len(marks)]
        store.label("ann", shown["query_id"], {str(a["slot"]): mark for a in shown["answers"]})
        served += 1
    return served


def test_a_drop_is_held_until_both_nights_labels_decide_it(llm_endpoint, mlflow_server, tmp_path,
                                                           monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    run = tmp_path / "run"
    common = ["--config", str(nightly_config(tmp_path / "nightly.yaml")), "--llm-base-url",
              llm_endpoint.base_url, "--out", str(run), "--experiment", "nightly-human", "--b", "1000",
              "--require-human"]
    good = production_outputs(tmp_path / "good.jsonl")
    broken = production_outputs(tmp_path / "broken.jsonl", broken=True)

    assert night("--outputs", str(good), *common) == 0  # night one: the baseline, no labels yet
    assert label_every_answer(run, (4, 5, 3)) == QUESTIONS
    assert night("--outputs", str(good), *common) == 0  # labeled, run again: stages reused, a pass
    printed = capsys.readouterr().out
    assert '"status": "pass"' in printed
    assert json.loads(RunLayout(run).stats_json.read_text())["per_metric"]["QR"]["human_calibrated"]

    assert night("--outputs", str(broken), *common) == 7  # judge-only drop, tonight unlabeled: held
    printed = capsys.readouterr().out
    assert '"status": "awaiting_labels"' in printed and "| unconfirmed |" in printed
    assert "| tonight " in printed and "unconfirmed cells (--require-human)" in printed

    assert label_every_answer(run, (1, 2)) == QUESTIONS  # the changed answers are served again
    assert night("--outputs", str(broken), *common) == 3  # both nights labeled: the human scale decides
    printed = capsys.readouterr().out
    assert '"status": "regression"' in printed and "| human " in printed
