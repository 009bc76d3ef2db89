"""The labeling page's core on a small real run folder (BioASQ questions, three systems, no LLM): the metric
and its scale, the seeded order, the blind answers, the store's append / skip / resume, and the HTTP
server the page talks to (a real server on a free port, urllib)."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http import HTTPStatus

import pytest

from pipelines.options import UsageError
from pipelines.tools import labeling
from pipelines.tools.labeling import LabelError, LabelMetric, LabelStore
from tasks.runtime.layout import RunLayout
from tests.pipelines.conftest import write_labeled_run


@pytest.fixture
def run(tmp_path) -> RunLayout:
    return RunLayout(write_labeled_run(tmp_path / "run", metrics=("CC", "answer_relevancy")))


def open_store(layout: RunLayout, metric: LabelMetric | None = None, seed: int = 0) -> LabelStore:
    metric = metric or labeling.resolve_metric(layout, "answer_relevancy", None, None, None)
    questions = labeling.load_questions(layout)
    order = labeling.question_order(layout, [q.query_id for q in questions], seed)
    labeling.record_metric(layout, metric)
    return LabelStore(layout, metric, questions, order, seed)


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def marks_of(store: LabelStore, annotator: str, start: int = 1) -> tuple[str, dict[str, int]]:
    """The annotator's next question and a mark for each of its answers (start, start + 1, ... capped)."""
    question = store.state(annotator)["question"]
    high = store.metric.scale[1]
    marks = {str(a["slot"]): min(start + i, high) for i, a in enumerate(question["answers"])}
    return question["query_id"], marks


# --- the metric ---------------------------------------------------------------------------------------

def test_the_default_metric_is_the_first_judged_metric_the_run_scored_with_its_declared_scale(run):
    metric = labeling.resolve_metric(run, None, None, None, None)
    assert (metric.name, metric.scale, metric.predicted_by) == ("CC", (0, 100), "CC")
    assert metric.description.startswith("Contextual Coherence")
    assert metric.integer and not metric.buttons  # 101 marks: typed digits and a slider
    relevancy = labeling.resolve_metric(run, "answer_relevancy", [1, 5], None, None)
    assert relevancy.scale == (1, 5) and relevancy.buttons


def test_a_human_metric_of_its_own_takes_its_scale_and_predictor_and_is_remembered(run):
    metric = labeling.resolve_metric(run, "acceptable", [0, 1], "CC", "Would you ship this answer?")
    labeling.record_metric(run, metric)
    assert json.loads(run.labels_metrics.read_text()) == {"acceptable": {
        "scale": [0, 1], "predicted_by": "CC", "description": "Would you ship this answer?"}}
    assert labeling.resolve_metric(run, "acceptable", None, None, None) == metric  # reopened: from the file
    labeling.record_metric(run, labeling.resolve_metric(run, "CC", None, None, None))
    assert set(json.loads(run.labels_metrics.read_text())) == {"acceptable", "CC"}  # merged


@pytest.mark.parametrize(("name", "scale", "predicted_by", "message"), [
    ("acceptable", None, "CC", "needs --scale LOW HIGH and --predicted-by"),
    ("acceptable", [0, 1], None, "needs --scale LOW HIGH and --predicted-by"),
    ("acceptable", [0, 1], "IR", "--predicted-by IR is not in the run's scores; scored: CC, answer_rel"),
    ("acceptable", [1, 1], "CC", "finite LOW < HIGH"),
    ("CC", [0, 10], None, "declared scale 0-100, not 0-10"),
    ("CC", None, "QR", "--predicted-by is for a human metric of its own"),
    ("QR", None, None, "QR is not in the run's scores"),
])
def test_bad_metric_options_are_one_usage_error(run, name, scale, predicted_by, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        labeling.resolve_metric(run, name, scale, predicted_by, None)


def test_a_metric_labeled_before_keeps_its_scale(run):
    labeling.record_metric(run, labeling.resolve_metric(run, "acceptable", [0, 1], "CC", None))
    with pytest.raises(UsageError, match=r"acceptable was labeled on the scale 0-1 \(labels/metrics.json\)"):
        labeling.resolve_metric(run, "acceptable", [0, 5], "CC", None)
    with pytest.raises(UsageError, match="labeled as predicted by CC"):
        labeling.resolve_metric(run, "acceptable", [0, 1], "answer_relevancy", None)


def test_a_run_without_scores_needs_a_metric(tmp_path):
    layout = RunLayout(write_labeled_run(tmp_path / "run", metrics=()))
    with pytest.raises(UsageError, match="has no judged metric's scores; name one with --metric"):
        labeling.resolve_metric(layout, None, None, None, None)


# --- questions, order, blinding -----------------------------------------------------------------------

def test_questions_hold_each_answered_system_with_the_contexts_its_reader_saw(run):
    questions = labeling.load_questions(run)
    assert len(questions) == 3 and questions[0].reference
    # C's generation failed on the first question: nothing of C to label there
    assert [a.system for a in questions[0].answers] == ["A", "B"]
    assert [[len(a.contexts) for a in q.answers] for q in questions[1:]] == [[3, 2, 1], [3, 2, 1]]


def test_the_order_is_seeded_stored_and_reused_and_another_seed_is_refused(run, tmp_path):
    ids = [q.query_id for q in labeling.load_questions(run)]
    order = labeling.question_order(run, ids, 7)
    assert sorted(order) == sorted(ids)
    assert json.loads(run.labels_order.read_text()) == {"seed": 7, "question_ids": order}
    assert labeling.question_order(run, ids, 7) == order
    elsewhere = RunLayout(tmp_path / "other")
    assert labeling.question_order(elsewhere, ids, 7) == order  # the seed alone decides
    with pytest.raises(UsageError, match="holds the order of seed 7, not 8: give --seed 7"):
        labeling.question_order(run, ids, 8)
    with pytest.raises(UsageError, match="lists other questions than the run's"):
        labeling.question_order(run, ids[:2], 7)


def test_answers_are_blind_in_a_seeded_order_per_question(run):
    question = labeling.load_questions(run)[1]
    shown = [a.system for a in labeling.blinded(question, 0)]
    assert sorted(shown) == ["A", "B", "C"] and shown == [a.system for a in labeling.blinded(question, 0)]
    assert len({tuple(a.system for a in labeling.blinded(question, seed)) for seed in range(20)}) > 1


def test_the_page_state_names_no_system(run):
    store = open_store(run)
    state = store.state("ann")
    text = json.dumps(state["question"])
    assert state["question"]["answers"][0]["slot"] == 1 and '"system"' not in text
    assert state["progress"] == {"labeled": 0, "skipped": 0, "total": 3}


# --- the store ----------------------------------------------------------------------------------------

def test_labels_are_appended_per_system_and_the_next_question_follows_the_order(run):
    store = open_store(run)
    query_id, marks = marks_of(store, "ann", start=2)
    assert query_id == store.order[0]
    state = store.label("ann", query_id, marks)
    lines = jsonl(run.labels_file)
    question = store.questions[query_id]
    systems = {str(slot): a.system for slot, a in enumerate(labeling.blinded(question, 0), 1)}
    assert {(line["system"], line["label"]) for line in lines} == {(systems[s], m) for s, m in marks.items()}
    fields = {"question_id", "system", "metric", "label", "annotator", "time", "answer_sha1"}
    assert all(set(line) == fields for line in lines)
    assert {(line["question_id"], line["metric"], line["annotator"]) for line in lines} == {
        (query_id, "answer_relevancy", "ann")}
    assert lines[0]["time"].endswith("+00:00") and isinstance(lines[0]["label"], int)
    assert state["question"]["query_id"] == store.order[1]
    assert state["progress"] == {"labeled": 1, "skipped": 0, "total": 3}


def test_a_skip_is_recorded_and_reopening_resumes_per_annotator(run):
    store = open_store(run)
    store.label("ann", *marks_of(store, "ann"))
    state = store.skip("ann", store.order[1])
    assert jsonl(run.labels_skips) == [{"question_id": store.order[1], "metric": "answer_relevancy",
                                        "annotator": "ann", "time": jsonl(run.labels_skips)[0]["time"]}]
    assert state["progress"] == {"labeled": 1, "skipped": 1, "total": 3}
    reopened = open_store(run)
    assert reopened.state("ann")["question"]["query_id"] == store.order[2]
    assert reopened.state("bob")["question"]["query_id"] == store.order[0]  # another annotator starts over
    other_metric = open_store(run, labeling.resolve_metric(run, "CC", None, None, None))
    assert other_metric.state("ann")["question"]["query_id"] == store.order[0]


def test_a_question_partly_labeled_resumes_with_only_its_unmarked_answers(run):
    store = open_store(run)
    query_id = store.order[0]
    question = store.questions[query_id]
    first = labeling.blinded(question, 0)[0]
    labeling.append_jsonl(run.labels_file, [{"question_id": query_id, "system": first.system,
                                             "metric": "answer_relevancy", "label": 4, "annotator": "ann",
                                             "time": "2026-11-27T00:00:00+00:00"}])
    store = open_store(run)
    answers = store.state("ann")["question"]["answers"]
    assert answers[0]["labeled"] == 4 and all(a["labeled"] is None for a in answers[1:])
    with pytest.raises(LabelError, match="Answer 2 has no mark yet"):
        store.label("ann", query_id, {"1": 5})
    store.label("ann", query_id, {str(a["slot"]): 3 for a in answers[1:]})
    assert len(jsonl(run.labels_file)) == len(answers)  # the earlier mark is not written again


@pytest.mark.parametrize(("changed", "message"), [
    ({"1": 6}, r"must be an integer in 1-5, got 6"),
    ({"1": 2.5}, r"must be an integer in 1-5, got 2.5"),
    ({"1": "3"}, r"a mark must be a number"),
    ({"1": True}, r"a mark must be a number"),
    ({"9": 1}, r"no answer 9 on this question"),
])
def test_a_bad_mark_writes_nothing(run, changed, message):
    store = open_store(run)
    query_id, marks = marks_of(store, "ann")
    with pytest.raises(LabelError, match=message):
        store.label("ann", query_id, {**marks, **changed})
    assert not run.labels_file.exists()


def test_only_the_annotators_next_question_takes_labels_or_a_skip(run):
    store = open_store(run)
    with pytest.raises(LabelError, match="is not ann's next one") as refused:
        store.skip("ann", store.order[2])
    assert refused.value.status == HTTPStatus.CONFLICT
    with pytest.raises(LabelError, match="give your name"):
        store.skip("  ", store.order[0])


def test_a_question_no_system_answered_can_only_be_skipped(run):
    questions = labeling.load_questions(run)
    unanswered = labeling.Question(questions[0].query_id, questions[0].text, questions[0].reference, ())
    order = labeling.question_order(run, [q.query_id for q in questions], 0)
    metric = labeling.resolve_metric(run, "CC", None, None, None)
    store = LabelStore(run, metric, [unanswered, *questions[1:]], order, 0)
    assert store.questions[unanswered.query_id].answers == ()
    for _ in range(order.index(unanswered.query_id)):
        store.skip("ann", store.state("ann")["question"]["query_id"])
    assert store.state("ann")["question"]["answers"] == []
    with pytest.raises(LabelError, match="no system answered this question"):
        store.label("ann", unanswered.query_id, {})
    skipped = store.skip("ann", unanswered.query_id)["progress"]["skipped"]
    assert skipped == order.index(unanswered.query_id) + 1


def test_an_unfinished_line_left_by_a_killed_server_is_dropped_and_counted(run):
    store = open_store(run)
    store.label("ann", *marks_of(store, "ann"))
    written = run.labels_file.read_text()
    with run.labels_file.open("ab") as handle:
        handle.write('{"question_id": "halé'.encode()[:-1])  # cut inside a UTF-8 character
    assert labeling.read_jsonl(run.labels_file)[1] == 1  # read-only: left out, counted
    reopened = open_store(run)
    assert reopened.repaired == 1 and run.labels_file.read_text() == written


def test_two_annotators_show_their_agreement(run):
    store = open_store(run)
    assert store.state("ann")["agreement"] is None
    for annotator in ("ann", "bob"):
        for _ in range(2):
            store.label(annotator, *marks_of(store, annotator))
    agreement = store.state("ann")["agreement"]
    # both gave the same marks to the same blind slots: perfect agreement on the 5 answers of 2 questions
    assert agreement["annotators"] == ["ann", "bob"] and agreement["answers_by_2plus"] == 5
    assert agreement["alpha"] == pytest.approx(1.0) and agreement["level"] == "interval"
    rows = labeling.agreement_rows(run)
    assert [(r["metric"], r["answers_by_2plus"], r["alpha"]) for r in rows] == [
        ("answer_relevancy", 5, pytest.approx(1.0))]


# --- the HTTP server ----------------------------------------------------------------------------------

@pytest.fixture
def server(run):
    store = open_store(run)
    server = labeling.make_server(store, "127.0.0.1", 0, default_annotator="ann")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", store
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def request(url: str, body: dict | None = None) -> tuple[int, dict | str]:
    data = None if body is None else json.dumps(body).encode()
    call = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(call, timeout=10) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    return status, (json.loads(text) if text.startswith("{") else text)


def test_the_server_serves_the_page_and_the_annotators_state(server):
    url, store = server
    status, page = request(f"{url}/")
    assert status == 200 and "<title>ccrs label</title>" in page
    status, state = request(f"{url}/api/state?annotator=ann")
    assert status == 200 and state["default_annotator"] == "ann"
    assert state["question"]["query_id"] == store.order[0] and state["metric"]["scale"] == [1, 5]
    assert request(f"{url}/nothing")[0] == 404


def test_a_label_is_on_disk_when_the_server_answers(server, run):
    url, store = server
    query_id, marks = marks_of(store, "ann", start=3)
    status, state = request(f"{url}/api/label", {"annotator": "ann", "question_id": query_id, "marks": marks})
    assert status == 200 and state["question"]["query_id"] == store.order[1]
    assert sorted(line["label"] for line in jsonl(run.labels_file)) == sorted(marks.values())
    status, state = request(f"{url}/api/skip", {"annotator": "ann", "question_id": store.order[1]})
    assert status == 200 and [line["question_id"] for line in jsonl(run.labels_skips)] == [store.order[1]]


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/api/label", {"annotator": "ann", "question_id": "Q", "marks": {}}, 409, "is not ann's next one"),
    ("/api/label", {"annotator": "ann", "question_id": "Q", "marks": [1]}, 400, "marks must be an object"),
    ("/api/skip", {"annotator": "", "question_id": "Q"}, 400, "give your name"),
    ("/api/skip", [1], 400, "must be a JSON object"),
    ("/api/other", {}, 404, "no page /api/other"),
])
def test_a_refused_request_is_one_line_for_the_page(server, run, path, body, status, message):
    url, _ = server
    answered, reply = request(f"{url}{path}", body)
    assert answered == status and message in reply["error"]
    assert not run.labels_file.exists() and not run.labels_skips.exists()
