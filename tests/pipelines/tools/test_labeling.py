"""The labeling page's core on a small real run folder (BioASQ questions, three systems, no LLM): the metric
and its scale, the seeded order, the blind answers, the store's append / skip / resume, and the HTTP
server the page talks to (a real server on a free port, urllib and http.client): its own requests taken,
another origin's, a wrong host's, a missing or wrong token's and a bad body's refused with nothing written."""
from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
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
    ("acceptable", None, "CC", "needs --label-scale LOW HIGH and --predicted-by"),
    ("acceptable", [0, 1], None, "needs --label-scale LOW HIGH and --predicted-by"),
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


def test_a_mark_of_an_answer_the_run_no_longer_holds_is_served_again(run):
    """A later night in the same folder changed one system's answer to the first question: its old mark is
    not this answer's, so the question is served again with only that answer to mark."""
    import pandas as pd

    store = open_store(run)
    query_id = store.order[0]
    store.label("ann", *marks_of(store, "ann"))
    answers = pd.read_parquet(run.generations)
    changed = answers.index[answers["query_id"] == query_id][0]
    answers.loc[changed, "answer"] = "Another night's answer."
    answers.to_parquet(run.generations, index=False)
    shown = open_store(run).state("ann")["question"]
    assert shown["query_id"] == query_id
    unmarked = [answer["text"] for answer in shown["answers"] if answer["labeled"] is None]
    assert unmarked == ["Another night's answer."]


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

@dataclass(frozen=True)
class Page:
    base: str  # http://127.0.0.1:PORT
    port: int
    token: str
    store: LabelStore


@pytest.fixture
def server(run):
    store = open_store(run)
    server = labeling.make_server(store, "127.0.0.1", 0, default_annotator="ann")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        assert server.url == f"http://127.0.0.1:{port}/?token={server.token}" and not server.beyond_loopback
        yield Page(f"http://127.0.0.1:{port}", port, server.token, store)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def request(url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict | str]:
    """A request as the page sends it: JSON, with the token header when `token`."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({labeling.TOKEN_HEADER: token} if token else {})}
    call = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(call, timeout=10) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    return status, (json.loads(text) if text.startswith("{") else text)


def raw(page: Page, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, dict]:
    """A request with exactly these headers (http.client adds Host unless given, and Content-Length for a
    body); a body of None sends no Content-Length at all."""
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=10)
    try:
        if body is None:
            connection.putrequest(method, path, skip_host="Host" in headers)
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.endheaders()
        else:
            connection.request(method, path, body=body, headers=headers)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        connection.close()


def next_label(page: Page, annotator: str = "ann") -> dict:
    query_id, marks = marks_of(page.store, annotator)
    return {"annotator": annotator, "question_id": query_id, "marks": marks}


def nothing_written(run: RunLayout) -> bool:
    return not run.labels_file.exists() and not run.labels_skips.exists()


def test_the_server_serves_the_page_and_the_annotators_state_to_the_token_holder(server):
    status, page = request(f"{server.base}/?token={server.token}")
    assert status == 200 and "<title>ccrs label</title>" in page
    status, state = request(f"{server.base}/api/state?annotator=ann", token=server.token)
    assert status == 200 and state["default_annotator"] == "ann"
    assert state["question"]["query_id"] == server.store.order[0] and state["metric"]["scale"] == [1, 5]
    assert request(f"{server.base}/nothing", token=server.token)[0] == 404


def test_a_label_is_on_disk_when_the_server_answers(server, run):
    store = server.store
    query_id, marks = marks_of(store, "ann", start=3)
    status, state = request(f"{server.base}/api/label", {"annotator": "ann", "question_id": query_id,
                                                         "marks": marks}, token=server.token)
    assert status == 200 and state["question"]["query_id"] == store.order[1]
    assert sorted(line["label"] for line in jsonl(run.labels_file)) == sorted(marks.values())
    status, state = request(f"{server.base}/api/skip", {"annotator": "ann", "question_id": store.order[1]},
                            token=server.token)
    assert status == 200 and [line["question_id"] for line in jsonl(run.labels_skips)] == [store.order[1]]


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/api/label", {"annotator": "ann", "question_id": "Q", "marks": {}}, 409, "is not ann's next one"),
    ("/api/label", {"annotator": "ann", "question_id": "Q", "marks": [1]}, 400, "marks must be an object"),
    ("/api/skip", {"annotator": "", "question_id": "Q"}, 400, "give your name"),
    ("/api/skip", [1], 400, "must be a JSON object"),
    ("/api/other", {}, 404, "no page /api/other"),
])
def test_a_refused_request_is_one_line_for_the_page(server, run, path, body, status, message):
    answered, reply = request(f"{server.base}{path}", body, token=server.token)
    assert answered == status and message in reply["error"]
    assert nothing_written(run)


def test_the_pages_own_request_is_accepted(server, run):
    """What the page's fetch sends: its own origin, JSON, the token header (or a Bearer one, for scripts)."""
    own = {"Origin": server.base, "Content-Type": "application/json"}
    first = next_label(server)
    status, state = raw(server, "POST", "/api/label", json.dumps(first).encode(),
                        {**own, labeling.TOKEN_HEADER: server.token})
    assert status == 200 and len(jsonl(run.labels_file)) == len(first["marks"])
    status, state = raw(server, "POST", "/api/label", json.dumps(next_label(server)).encode(),
                        {**own, "Authorization": f"Bearer {server.token}",
                         "Host": f"localhost:{server.port}", "Origin": f"http://localhost:{server.port}"})
    assert status == 200 and state["progress"]["labeled"] == 2


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
@pytest.mark.parametrize("with_token", [False, True])
def test_a_cross_origin_form_post_is_refused_with_nothing_written(server, run, content_type, with_token):
    """The "simple" request any web page can make a browser send, without asking, to 127.0.0.1."""
    body = json.dumps(next_label(server, "victim")).encode()  # a body the store would take as JSON
    headers = {"Content-Type": content_type, "Origin": "http://evil.example",
               **({labeling.TOKEN_HEADER: server.token} if with_token else {})}
    status, reply = raw(server, "POST", "/api/label", body, headers)
    assert status == 403 and "another origin" in reply["error"]
    assert nothing_written(run)


@pytest.mark.parametrize(("token", "message"), [(None, "no token"), ("x" * 43, "wrong token")])
def test_a_missing_or_wrong_token_is_refused_with_nothing_written_or_shown(server, run, token, message):
    headers = {"Content-Type": "application/json", **({labeling.TOKEN_HEADER: token} if token else {})}
    for path, body in (("/api/label", next_label(server)), ("/api/skip", next_label(server))):
        status, reply = raw(server, "POST", path, json.dumps(body).encode(), headers)
        assert status == 403 and message in reply["error"]
    status, reply = raw(server, "GET", "/api/state?annotator=ann", None, headers)
    assert status == 403 and message in reply["error"] and "question" not in reply
    page = f"/?token={token}" if token else "/"
    assert raw(server, "GET", page, None, {})[0] == 403
    assert nothing_written(run)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1",
                                  "localhost.evil:{port}", "127.0.0.1@evil.example:{port}", ""])
def test_a_host_header_not_naming_this_server_is_refused(server, run, host):
    """A DNS-rebinding page reaches 127.0.0.1 under its own domain: its Host header names that domain."""
    headers = {"Host": host.format(port=server.port), "Content-Type": "application/json",
               labeling.TOKEN_HEADER: server.token}
    status, reply = raw(server, "POST", "/api/label", json.dumps(next_label(server)).encode(), headers)
    assert status == 403 and "Host header" in reply["error"]
    assert nothing_written(run)


def test_a_body_not_json_too_large_or_without_length_is_refused_unread(server, run):
    own = {"Origin": server.base, labeling.TOKEN_HEADER: server.token}
    body = json.dumps(next_label(server)).encode()
    status, reply = raw(server, "POST", "/api/label", body, {**own, "Content-Type": "text/plain"})
    assert status == 415 and "application/json" in reply["error"]
    json_headers = {**own, "Content-Type": "application/json"}
    status, reply = raw(server, "POST", "/api/label", None, json_headers)
    assert status == 411 and "Content-Length" in reply["error"]
    # declared over the bound: refused before a byte of the body is read (none is sent)
    too_large = {**json_headers, "Content-Length": str(labeling.MAX_BODY_BYTES + 1)}
    status, reply = raw(server, "POST", "/api/label", None, too_large)
    assert status == 413 and f"over {labeling.MAX_BODY_BYTES} bytes" in reply["error"]
    status, reply = raw(server, "POST", "/api/label", None, {**json_headers, "Content-Length": "-1"})
    assert status == 400 and "bad Content-Length" in reply["error"]
    assert nothing_written(run)


# --- who the server answers, without a server ----------------------------------------------------------

def test_a_loopback_server_answers_its_loopback_names_on_its_port_only():
    access = labeling.Access.of("127.0.0.1", "127.0.0.1", 8765, "t" * 20)
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert access.names_this_server(host), host
    for host in ("127.0.0.1", "127.0.0.1:8766", "10.0.0.5:8765", "evil.example:8765", None, "127.0.0.1:x"):
        assert not access.names_this_server(host), host
    assert access.same_origin("http://localhost:8765", "localhost:8765")
    assert not access.same_origin("http://127.0.0.1:8765", "localhost:8765")  # another origin by name
    assert not access.same_origin("https://localhost:8765", "localhost:8765")
    assert not access.same_origin("null", "localhost:8765")
    assert access.holds_token("t" * 20) and not access.holds_token("t" * 19) and not access.holds_token(None)
    assert not access.holds_token("té" * 10)  # a non-ASCII header value is a wrong token, not an error


def test_a_server_on_every_interface_answers_any_address_and_its_host_name_but_no_other_domain():
    access = labeling.Access.of("0.0.0.0", "0.0.0.0", 80, "t" * 20)
    for host in ("192.168.1.20", "10.0.0.5:80", "[fe80::1]", "localhost", socket.gethostname()):
        assert access.names_this_server(host), host
    assert not access.names_this_server("evil.example")
    lan = labeling.Access.of("192.168.1.20", "192.168.1.20", 80, "t" * 20)
    assert lan.names_this_server("192.168.1.20") and not lan.names_this_server("10.0.0.5")
    assert not lan.names_this_server("localhost")  # not bound there


def test_a_token_is_fresh_per_server_unless_given_and_a_weak_one_is_refused():
    fresh = {labeling.checked_token(None) for _ in range(3)}
    assert len(fresh) == 3 and all(labeling.TOKEN_PATTERN.fullmatch(token) for token in fresh)
    assert labeling.checked_token("shared-token_0123456789") == "shared-token_0123456789"
    for weak in ("", "short", "has space in it 0123", "a/b?c=d&0123456789"):
        with pytest.raises(UsageError, match="--token needs 16 to 256 characters"):
            labeling.checked_token(weak)
