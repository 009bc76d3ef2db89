"""A run of the CPU demo (the session's e2e run: real SmolLM2 judge, 2 questions x 6 systems) labeled through
`ccrs label`'s server by a scripted annotator, then reduced again as `ccrs run --from-stage reduce` does:
the verdict (`ccrs show`), stats.json and `ccrs stats RUN_DIR` carry the Human-calibrated section. Two
questions are below the 10-label floor, so the section names that gap instead of claiming an interval (the
intervals themselves: tests/stats/test_labels.py, tests/pipelines/test_stats_cmd.py)."""
from __future__ import annotations

import json
import re
import shutil
import threading
import urllib.request

import pytest

from pipelines.cli import main
from tasks.runtime.layout import RunLayout

pytestmark = pytest.mark.llm


def _scripted_mark(answer: str, reference: str) -> int:
    """80 when the answer shares a content word (5+ letters) with the reference answer, else 20."""
    words = lambda text: set(re.findall(r"[a-z]{5,}", text.lower()))  # noqa: E731
    return 80 if words(answer) & words(reference) else 20


def _call(url: str, token: str, body: dict | None = None) -> dict:
    """A GET (no body) or a JSON POST to the page's API, with the server's token as the page sends it."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json", "X-CCRS-Token": token})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _label_every_question(layout: RunLayout, metric: str) -> int:
    """The scripted annotator labels the run through the page's HTTP API, question by question."""
    from pipelines.tools.labeling import (LabelStore, load_questions, make_server, question_order,
                                          record_metric, resolve_metric)

    label_metric = resolve_metric(layout, metric, None, None, None)
    record_metric(layout, label_metric)
    questions = load_questions(layout)
    order = question_order(layout, [question.query_id for question in questions], 0)
    store = LabelStore(layout, label_metric, questions, order, 0)
    server = make_server(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        state = _call(f"{base}/api/state?annotator=script", server.token)
        labeled = 0
        while state["question"] is not None:
            shown = state["question"]
            marks = {str(a["slot"]): _scripted_mark(a["text"], shown["reference"]) for a in shown["answers"]}
            body = {"annotator": "script", "question_id": shown["query_id"], "marks": marks}
            state = _call(f"{base}/api/label", server.token, body)
            labeled += len(marks)
        return labeled
    finally:
        server.shutdown()
        server.server_close()


def test_a_demo_run_labeled_by_a_scripted_annotator_shows_the_human_calibrated_section(e2e_run, tmp_path,
                                                                                      capsys):
    from judges.suite import metric_order, suite_membership
    from pipelines.extensions import statistics_contributors, verdict_sections
    from pipelines.reporting.verdict import write_summary
    from tasks.reduce import run_reduce

    config, _ = e2e_run
    run = tmp_path / "run"
    shutil.copytree(config.resolved_run_dir(), run, ignore=shutil.ignore_patterns("logs", "track"))
    layout = RunLayout(run)
    labeled = _label_every_question(layout, "CC")
    assert labeled == len(json.loads((run / "labels" / "order.json").read_text())["question_ids"]) * 6

    run_reduce(run, [layout.scores(suite) for suite in layout.judged_suites()], 200, 0, 0.05,
               metric_order=metric_order(), suites=suite_membership(),
               contributors=statistics_contributors())  # as `--from-stage reduce`
    write_summary(run, verdict_sections())
    entry = json.loads(layout.stats_json.read_text())["per_metric"]["CC"]["human_calibrated"]
    assert sum(entry["n_labels"].values()) == labeled and entry["n_annotators"] == 1
    assert entry["too_few_labels"] == sorted(entry["n_labels"]) and entry["means"] == {}
    assert set(entry["judge_bias"]) == set(entry["n_labels"])

    assert main(["show", str(run)]) == 0
    shown = capsys.readouterr().out
    assert "Human-calibrated (PPI++)" in shown and f"CC: {labeled} labels, 1 annotator" in shown
    assert "Too few labels:" in shown and "fewer than 10 labels" in shown

    assert main(["stats", str(run), "--out", str(tmp_path / "stats"), "--b", "200", "--no-progress"]) == 0
    assert "human-calibrated (CC)" in capsys.readouterr().out
