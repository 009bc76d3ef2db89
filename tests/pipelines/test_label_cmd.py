"""`ccrs label`: a real headless Chromium (Debian's chromium and chromedriver, driven by selenium) labels a
small real run through the page with the keyboard, skips a question, and finds both in the run's files;
the server is killed with SIGKILL and restarted with the same token, and the page resumes with every label
kept; the page's own requests carry the token of its URL (the server refuses any without). Also the
command's one-line errors, its start line and `--agreement`, in process."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.tools import labeling
from tasks.runtime.layout import RunLayout
from tests.conftest import REPO
from tests.pipelines.conftest import write_labeled_run

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
URL_LINE = re.compile(r" at (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{43})) \(Ctrl-C stops")
METRIC = "answer_relevancy"  # a judge metric on 1-5: a button per mark


class Server:
    """`ccrs label RUN_DIR` in a process group of its own; `url` (with its token) from its one line on
    stdout."""

    def __init__(self, run_dir: Path, *options: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "label", str(run_dir), *options], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.process.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            self.kill()
            raise AssertionError("ccrs label printed no URL within 120 s") from None
        match = URL_LINE.search(line)
        if not match:
            self.kill()
            raise AssertionError(f"no URL in {line!r}; stderr: {self.process.stderr.read()}")
        self.url, self.port, self.token = match.group(1), int(match.group(2)), match.group(3)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture
def browser():
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.skip(f"headless Chromium test needs {', '.join(missing)} (Debian: chromium, chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for_question(driver, query_id: str | None) -> None:
    """Until the page shows `query_id` (None: the page says every question is done)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(d):
        if query_id is None:
            return d.find_element("id", "done").is_displayed()
        work = d.find_element("id", "work")
        return work.is_displayed() and work.get_attribute("data-question-id") == query_id

    WebDriverWait(driver, 30).until(shown, f"the page did not show question {query_id}")


def keys(driver, *typed: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    actions = ActionChains(driver)
    for key in typed:
        actions.send_keys(key)
    actions.perform()


def systems_behind(run: RunLayout, query_id: str) -> list[str]:
    """The systems behind "Answer 1..k" of a question (the server's blind order, seed 0)."""
    question = next(q for q in labeling.load_questions(run) if q.query_id == query_id)
    return [answer.system for answer in labeling.blinded(question, 0)]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_browser_labels_skips_and_resumes_after_the_server_is_killed(browser, tmp_path):
    from selenium.webdriver.common.keys import Keys

    run = RunLayout(write_labeled_run(tmp_path / "run", metrics=("CC", METRIC)))
    server = Server(run.root, "--metric", METRIC, "--port", "0")
    try:
        order = json.loads(run.labels_order.read_text())["question_ids"]
        browser.get(server.url)
        name = browser.find_element("id", "annotator")
        name.send_keys("ann", Keys.ENTER)
        wait_for_question(browser, order[0])

        keys(browser, Keys.ENTER)  # no mark yet: nothing is sent
        assert "Mark every answer first" in browser.find_element("id", "message").text
        behind = systems_behind(run, order[0])
        given = [4, 2, 5][: len(behind)]
        for mark in given:  # a digit marks the focused answer, Tab moves to the next
            keys(browser, str(mark), Keys.TAB)
        keys(browser, Keys.ENTER)
        wait_for_question(browser, order[1])
        assert {(line["system"], line["label"]) for line in jsonl(run.labels_file)} == set(zip(behind, given))
        assert {(line["question_id"], line["metric"], line["annotator"]) for line in jsonl(run.labels_file)} \
            == {(order[0], METRIC, "ann")}

        keys(browser, "s")
        wait_for_question(browser, order[2])
        skips = [(line["question_id"], line["annotator"]) for line in jsonl(run.labels_skips)]
        assert skips == [(order[1], "ann")]
        written = run.labels_file.read_text()

        server.kill()  # SIGKILL: no chance to write anything more
        # the same URL again: the annotators' open pages carry the token of the first start
        server = Server(run.root, "--metric", METRIC, "--port", str(server.port), "--token", server.token)
        browser.refresh()  # the annotator's name comes back from the browser's localStorage
        wait_for_question(browser, order[2])
        assert browser.find_element("id", "annotator").get_attribute("value") == "ann"
        assert browser.find_element("id", "progress").text == "1 of 3 labeled, 1 skipped"
        assert run.labels_file.read_text() == written

        behind = systems_behind(run, order[2])
        keys(browser, *[f"{len(behind) - i}{Keys.ARROW_RIGHT}" for i in range(len(behind))], Keys.ENTER)
        wait_for_question(browser, None)
        last = jsonl(run.labels_file)[-len(behind):]
        assert {(line["system"], line["label"]) for line in last} == {
            (system, len(behind) - i) for i, system in enumerate(behind)}
        assert browser.find_element("id", "progress").text == "2 of 3 labeled, 1 skipped"
    finally:
        server.kill()


def test_a_browser_types_marks_of_two_digits_on_the_default_metrics_0_100_scale(browser, tmp_path):
    from selenium.webdriver.common.keys import Keys

    run = RunLayout(write_labeled_run(tmp_path / "run"))
    server = Server(run.root, "--annotator", "ann")  # the default metric: CC, the first judged one
    try:
        first = json.loads(run.labels_order.read_text())["question_ids"][0]
        browser.get(server.url.split("?")[0])  # without the token: refused, nothing of the run shown
        assert "no token" in browser.page_source and "ccrs label</title>" not in browser.page_source
        browser.get(server.url)
        wait_for_question(browser, first)  # --annotator filled the name in
        behind = systems_behind(run, first)
        given = [75, 100, 8][: len(behind)]
        for mark in given:
            keys(browser, *str(mark), Keys.TAB)
        keys(browser, Keys.ENTER)
        wait_for_question(browser, json.loads(run.labels_order.read_text())["question_ids"][1])
        assert {(line["system"], line["metric"], line["label"]) for line in jsonl(run.labels_file)} == {
            (system, "CC", mark) for system, mark in zip(behind, given)}
        assert json.loads(run.labels_metrics.read_text())["CC"]["scale"] == [0, 100]
    finally:
        server.kill()


# --- the command, in process --------------------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    run = write_labeled_run(tmp_path / "run")
    assert cli.main(["label", str(run), "--metric", "acceptable", "--label-scale", "0", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ccrs label: acceptable is no registered judge metric") and "\n" not in err
    assert cli.main(["label", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.strip() == f"ccrs label: {tmp_path / 'nothing'} is no run folder"
    assert not RunLayout(run).labels_dir.exists()  # nothing written on bad input


def test_a_weak_token_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    run = write_labeled_run(tmp_path / "run")
    assert cli.main(["label", str(run), "--token", "secret"]) == 2
    assert capsys.readouterr().err.strip().startswith("ccrs label: --token needs 16 to 256 characters")
    assert not RunLayout(run).labels_dir.exists()


@pytest.mark.parametrize(("host", "beyond"), [("127.0.0.1", False), ("0.0.0.0", True)])
def test_the_start_line_says_when_other_machines_can_reach_the_page(tmp_path, host, beyond):
    """Bound, never served: the line only. Beyond loopback it says who can use the page."""
    from pipelines.label_cmd import start_line

    run = RunLayout(write_labeled_run(tmp_path / "run"))
    metric = labeling.resolve_metric(run, "CC", None, None, None)
    questions = labeling.load_questions(run)
    store = labeling.LabelStore(run, metric, questions, [q.query_id for q in questions], 0)
    server = labeling.make_server(store, host, 0, token="shared-token_0123456789")
    try:
        line = start_line(server, metric, questions, run.labels_file)
    finally:
        server.server_close()
    port = server.server_address[1]
    assert re.search(rf" at http://[^ /]+:{port}/\?token=shared-token_0123456789 \(", line)
    assert line.endswith(f"Ctrl-C stops; labels: {run.labels_file})") and "\n" not in line
    assert ("reachable from other machines: only holders of this URL, token included, can read or write "
            "the labels" in line) == beyond
    assert (f"http://127.0.0.1:{port}/" in line) == (not beyond)


def test_agreement_prints_each_metrics_annotators_and_alpha(tmp_path, capsys):
    run = RunLayout(write_labeled_run(tmp_path / "run"))
    assert cli.main(["label", str(run.root), "--agreement"]) == 2
    assert capsys.readouterr().err.strip() == f"ccrs label: no labels in {run.labels_file} yet"
    marks = {"ann": [1, 0, 1, 1], "bob": [1, 0, 0, 1]}
    labeling.append_jsonl(run.labels_file, [
        {"question_id": f"q{i // 2}", "system": "AB"[i % 2], "metric": "acceptable", "label": mark,
         "annotator": annotator, "time": "2026-11-27T00:00:00+00:00"}
        for annotator, given in marks.items() for i, mark in enumerate(given)])
    assert cli.main(["label", str(run.root), "--agreement"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["metric", "annotators"]
    # coincidences o11 = 4, o00 = 2, o01 = o10 = 1 (n1 = 5, n0 = 3, n = 8): 1 - 7 * 2 / (2 * 5 * 3) = 0.533
    assert out[2].split()[:4] == ["acceptable", "2", "4", "0.533"]



def test_a_browser_labels_by_the_active_design_sees_the_comparisons_settle_and_is_told_to_stop(browser,
                                                                                             tmp_path):
    """`--design active` on a synthetic run of 80 questions: the page serves the drawn questions in the
    design's order, shows the open and settled comparisons after every question, and "You can stop" once
    none is open (A well above B and C, B and C equal within the margin 0.3)."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from pipelines.tools.labeling.design import read_design
    from tests.pipelines.tools.active_run import METRIC as ACTIVE_METRIC
    from tests.pipelines.tools.active_run import human_mark, write_active_run

    run = write_active_run(tmp_path / "run", questions=80)
    server = Server(run.root, "--metric", ACTIVE_METRIC, "--design", "active", "--label-budget", "70",
                    "--label-margin", "0.3", "--annotator", "ann")
    try:
        drawn = read_design(run, ACTIVE_METRIC).drawn_order
        browser.get(server.url)
        for index, query_id in enumerate(drawn):
            wait_for_question(browser, query_id)
            WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "decisions").is_displayed())
            if index == 0:
                assert "0 settled, 3 open" in browser.find_element("id", "decisions").text
            keys(browser, *[key for system in systems_behind(run, query_id)
                            for key in (str(human_mark(system, query_id)), Keys.TAB)], Keys.ENTER)
        wait_for_question(browser, None)
        WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "stop"))
        shown = browser.find_element("id", "decisions").text
        assert "3 settled, 0 open" in shown and "You can stop: every comparison is settled." in shown
        assert browser.find_element("id", "stop").get_attribute("data-stop") == "settled"
        assert "A vs B: settled (different)" in shown and "B vs C: settled (equivalent)" in shown
        assert len(jsonl(run.labels_file)) == 3 * len(drawn)
    finally:
        server.kill()


def test_design_options_that_cannot_be_used_are_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    run = write_labeled_run(tmp_path / "run")
    assert cli.main(["label", str(run), "--label-floor", "0.2"]) == 2
    assert capsys.readouterr().err.strip() == "ccrs label: --label-floor needs --design active"
    assert cli.main(["label", str(run), "--design", "active", "--label-budget", "9"]) == 2
    assert "--label-budget must lie between 1 and the run's 3 questions" in capsys.readouterr().err
    assert not RunLayout(run).labels_dir.exists()


def test_the_start_line_of_an_active_design_says_what_drew_the_questions(tmp_path):
    import argparse

    from pipelines.label_cmd import start_line

    run = RunLayout(write_labeled_run(tmp_path / "run"))
    metric = labeling.resolve_metric(run, "CC", None, None, None)
    questions = labeling.load_questions(run)
    store = labeling.LabelStore.for_design(run, metric, questions, argparse.Namespace(
        design="active", label_budget=None, label_floor=None, label_margin=None, seed=0))
    server = labeling.make_server(store)
    try:
        line = start_line(server, metric, questions, run.labels_file)
    finally:
        server.server_close()
    drawn = len(store.order)
    assert f"CC (0-100, active design: {drawn} of 3 questions drawn by the systems' disagreement, " \
           "floor 0.5) of 3 questions x 3 systems at http://127.0.0.1:" in line


def test_a_browser_that_labels_every_drawn_question_of_a_small_design_is_told_it_can_stop_here(browser,
                                                                                              tmp_path):
    """`--design active` on 12 questions (every one drawn: the budget is at least 50): far below the 50 labels
    an anytime interval needs, so no comparison settles; once every drawn question is labeled or skipped
    the page says labeling can stop here, the comparisons left open and what forecasts the labels a settled
    verdict needs."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from pipelines.tools.labeling.design import read_design
    from tests.pipelines.tools.active_run import METRIC as ACTIVE_METRIC
    from tests.pipelines.tools.active_run import human_mark, write_active_run

    run = write_active_run(tmp_path / "run", questions=12)
    server = Server(run.root, "--metric", ACTIVE_METRIC, "--design", "active", "--annotator", "ann")
    try:
        drawn = read_design(run, ACTIVE_METRIC).drawn_order
        assert len(drawn) == 12
        browser.get(server.url)
        for index, query_id in enumerate(drawn):
            wait_for_question(browser, query_id)
            WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "decisions").is_displayed())
            assert not browser.find_elements("id", "stop")  # questions left to serve: label on
            if index == len(drawn) - 1:
                keys(browser, "s")  # the last one skipped: skipped counts as done
                continue
            keys(browser, *[key for system in systems_behind(run, query_id)
                            for key in (str(human_mark(system, query_id)), Keys.TAB)], Keys.ENTER)
        wait_for_question(browser, None)
        WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "stop"))
        stop = browser.find_element("id", "stop")
        assert stop.get_attribute("data-stop") == "exhausted"
        assert stop.text == ("Labeling can stop here: every question the design drew is labeled or skipped, "
                             "so it has nothing more to serve; 3 of 3 comparisons stay open. For the labels "
                             "a settled verdict would need: ccrs plan labels --design active.")
        assert "0 settled, 3 open" in browser.find_element("id", "decisions").text
        assert "You can stop" not in browser.find_element("id", "decisions").text
    finally:
        server.kill()
