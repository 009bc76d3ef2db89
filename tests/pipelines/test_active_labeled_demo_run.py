"""A run of the CPU demo (the session's e2e run: real SmolLM2 judge, 2 questions x 6 systems) labeled through
`ccrs label --design active`'s page by a scripted annotator in headless Chromium: the page serves the
questions the active design drew, in its order, and shows the comparisons (every one open: 2 questions are
far below the 50 labels an anytime interval needs, so the page never says "you can stop" here, but once
every drawn question is labeled it says labeling can stop, the design having nothing more to serve; the stop
on settled comparisons: tests/pipelines/test_label_cmd.py on a synthetic run of 80 questions); then `ccrs
stats RUN_DIR` writes `design` and `decisions` into stats.json. Needs the real stack
(the e2e run): marked llm."""
from __future__ import annotations

import json
import re
import shutil
import threading

import pytest

from pipelines.cli import main
from tasks.runtime.layout import RunLayout
from tests.pipelines.test_label_cmd import browser, keys, systems_behind, wait_for_question  # noqa: F401

pytestmark = pytest.mark.llm


def _scripted_mark(answer: str, reference: str) -> int:
    """80 when the answer shares a content word (5+ letters) with the reference answer, else 20."""
    words = lambda text: set(re.findall(r"[a-z]{5,}", text.lower()))  # noqa: E731
    return 80 if words(answer) & words(reference) else 20


def test_a_demo_run_labeled_by_the_active_design_in_a_browser(e2e_run, tmp_path, browser, capsys):  # noqa: F811
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from pipelines.tools import labeling
    from pipelines.tools.labeling.active import served_questions
    from pipelines.tools.labeling.design import read_design

    config, _ = e2e_run
    run = tmp_path / "run"
    shutil.copytree(config.resolved_run_dir(), run, ignore=shutil.ignore_patterns("logs", "track"))
    layout = RunLayout(run)
    metric = labeling.resolve_metric(layout, "CC", None, None, None)
    questions = labeling.load_questions(layout)
    order = labeling.question_order(layout, [q.query_id for q in questions], 0)
    served, stop_line = served_questions(layout, metric, order, 0, "active")
    labeling.record_metric(layout, metric)
    store = labeling.LabelStore(layout, metric, questions, served, 0, stop_line)
    server = labeling.make_server(store, default_annotator="script")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        design = read_design(layout, "CC")
        assert served == design.drawn_order and design.rule["n_items"] == len(order)
        browser.get(server.url)
        for query_id in served:
            wait_for_question(browser, query_id)
            WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "decisions").is_displayed())
            assert " open" in browser.find_element("id", "decisions").text
            question = next(q for q in questions if q.query_id == query_id)
            marks = [_scripted_mark(answer.text, question.reference)
                     for answer in labeling.blinded(question, 0)]
            keys(browser, *[key for mark in marks for key in (*str(mark), Keys.TAB)], Keys.ENTER)
        wait_for_question(browser, None)
        # 2 questions settle nothing: the page says labeling can stop because the design has nothing more
        WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "stop"))
        stop = browser.find_element("id", "stop")
        assert stop.get_attribute("data-stop") == "exhausted"
        assert stop.text.startswith("Labeling can stop here: every question the design drew is labeled or "
                                    "skipped, so it has nothing more to serve; ")
        assert "15 of 15 comparisons stay open" in stop.text, stop.text
        assert "ccrs plan labels --design active" in stop.text
        assert "You can stop" not in browser.find_element("id", "decisions").text
        assert systems_behind(layout, served[0])
    finally:
        server.shutdown()
        server.server_close()

    assert main(["stats", str(run), "--out", str(tmp_path / "stats"), "--b", "200", "--no-progress",
                 "--markdown"]) == 0
    shown = capsys.readouterr().out
    assert "### Active labeling: CC" in shown and "**Labels spent:**" in shown and "**Open:**" in shown
    written = json.loads((tmp_path / "stats" / "stats.json").read_text())
    block = written["per_metric"]["CC"]["human_calibrated"]
    assert block["design"]["labels_spent"]["questions"] == len(served)
    assert all(pair["decision"] == "open" for pair in block["decisions"]["pairs"])
    assert block["decisions"]["stop"] == "exhausted" and "it has nothing more to serve" in shown
