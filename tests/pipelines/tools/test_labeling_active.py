"""`ccrs label --design active` on a synthetic run (tests/pipelines/tools/active_run.py): the design drawn
from the judge's uncertainty with stats.active, recorded once in labels/design.json and served again by a
restarted server; only drawn questions served, still blind and in the recorded order; the decisions the
page shows after each question, over loopback (GET /api/decisions, refused from another origin or without
the token); a uniform reopening of an actively labeled metric, mixed draws and a changed design refused."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

from pipelines.options import UsageError
from pipelines.tools import labeling
from pipelines.tools.labeling.active import check_design_options, served_questions
from pipelines.tools.labeling.design import ActiveDesign, read_design
from pipelines.tools.labeling.page import PAGE
from pipelines.tools.labeling.stopline import EXHAUSTED, SETTLED, decisions_of, reached, stop_reason
from pipelines.tools.labeling.uncertainty import DISAGREEMENT, REPEATS, SPREAD, uncertainty_of
from stats.active import sampling_probabilities
from stats.errors import StatsInputError
from tests.pipelines.tools.active_run import METRIC, human_mark, write_active_run


@pytest.fixture
def run(tmp_path):
    return write_active_run(tmp_path / "run", questions=120)


def open_active(run, budget=80.0, margin=None, design="active"):
    metric = labeling.resolve_metric(run, METRIC, None, None, None)
    questions = labeling.load_questions(run)
    order = labeling.question_order(run, [q.query_id for q in questions], 0)
    served, stop_line = served_questions(run, metric, order, 0, design, budget, None, margin)
    labeling.record_metric(run, metric)
    return labeling.LabelStore(run, metric, questions, served, 0, stop_line), questions


def label_next(store, questions, annotator="ann") -> str | None:
    shown = store.state(annotator)["question"]
    if shown is None:
        return None
    question = next(q for q in questions if q.query_id == shown["query_id"])
    marks = {str(slot): human_mark(answer.system, question.query_id)
             for slot, answer in enumerate(labeling.blinded(question, 0), 1)}
    store.label(annotator, question.query_id, marks)
    return question.query_id


# --- the uncertainty -------------------------------------------------------------------------------------

def test_the_uncertainty_is_the_spread_else_the_repeats_else_the_systems_disagreement():
    import pandas as pd

    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "system": ["A", "B"] * 2,
                          "metric": "M", "score": [0.2, 0.6, 0.5, 0.5]})
    plain = uncertainty_of(frame, "M")
    assert plain.source == DISAGREEMENT and plain.per_question == pytest.approx([0.2, 0.0])
    repeated = pd.concat([frame.assign(repeat=0), frame.assign(repeat=1, score=[0.4, 0.6, 0.5, 0.3])])
    twice = uncertainty_of(repeated, "M")  # repeat sds: A on q1 0.1, B on q2 0.1
    assert twice.source == REPEATS and twice.per_question == pytest.approx([0.1, 0.1])
    spreads = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "system": ["A", "B", "A"],
                            "spread": [0.3, 0.4, 0.1]})
    spread = uncertainty_of(frame, "M", spreads)  # q2's B has none: the largest, 0.4
    assert spread.source == SPREAD and spread.filled == 1
    assert spread.per_question == pytest.approx([0.5, np.hypot(0.1, 0.4)])


# --- the design ------------------------------------------------------------------------------------------

def test_the_design_is_drawn_once_recorded_and_served_again_after_a_restart(run):
    store, questions = open_active(run)
    design = read_design(run, METRIC)
    order = json.loads(run.labels_order.read_text())["question_ids"]
    assert list(design.question_ids) == order and design.source == DISAGREEMENT
    again = sampling_probabilities(np.array(design.uncertainty), 80.0, 0.5 * 80 / 120)
    assert np.allclose(design.probabilities, again.probabilities)
    assert min(design.probabilities) >= 1 / 3 - 1e-12
    assert design.rule["budget"] == 80.0 and design.rule["floor"] == pytest.approx(1 / 3)
    assert store.order == design.drawn_order and 0 < len(store.order) < 120
    first = [label_next(store, questions) for _ in range(3)]
    assert first == design.drawn_order[:3]  # the design's order, no annotator's choice
    with pytest.raises(labeling.LabelError, match="is not ann's next one"):
        store.skip("ann", design.drawn_order[5])
    written = run.labels_design.read_text()
    restarted, _ = open_active(run, budget=None)  # a restart: the same draw, nothing rewritten
    assert run.labels_design.read_text() == written
    assert restarted.state("ann")["question"]["query_id"] == design.drawn_order[3]
    assert json.loads(run.labels_metrics.read_text())[METRIC]["design"] == "active"


def test_a_reopening_that_would_change_or_mix_the_draw_is_one_usage_error(run, tmp_path):
    open_active(run)
    with pytest.raises(UsageError, match="labeled by an active design"):
        open_active(run, budget=None, design="uniform")
    with pytest.raises(UsageError, match=r"drawn with --label-budget 80 \(labels/design.json\), not 60"):
        open_active(run, budget=60.0)
    uniform = write_active_run(tmp_path / "uniform", questions=120)
    store, questions = open_active(uniform, budget=None, design="uniform")
    label_next(store, questions)
    with pytest.raises(UsageError, match="already has labels drawn uniformly"):
        open_active(uniform)
    with pytest.raises(UsageError, match="--label-floor needs --design active"):
        check_design_options("uniform", None, 0.2, None, 120)
    with pytest.raises(UsageError, match="--label-budget must lie between 1 and the run's 120"):
        check_design_options("active", 500.0, None, None, 120)


def test_a_design_edited_by_hand_or_a_changed_run_is_refused_on_restart(run):
    open_active(run)
    data = json.loads(run.labels_design.read_text())
    data[METRIC]["questions"][0]["probability"] = 0.99
    run.labels_design.write_text(json.dumps(data))
    with pytest.raises(StatsInputError, match="probabilities do not match its rule"):
        open_active(run, budget=None)
    data[METRIC]["questions"][0]["probability"] = read_design_probability(data, run)
    data[METRIC]["scores_digest"] = "0" * 16
    run.labels_design.write_text(json.dumps(data))
    with pytest.raises(StatsInputError, match="the run changed since the design was drawn"):
        open_active(run, budget=None)


def read_design_probability(data: dict, run) -> float:
    questions = data[METRIC]["questions"]
    again = sampling_probabilities(np.array([q["uncertainty"] for q in questions]), 80.0, 1 / 3)
    return float(again.probabilities[0])


# --- the decisions ---------------------------------------------------------------------------------------

def test_the_reached_prefix_stops_at_the_first_drawn_question_nobody_labeled_or_skipped():
    drawn, labeled, skipped = [True, False, True, True, False], [True, False, False, False, False], \
        [False, False, True, False, False]
    assert reached(drawn, labeled, skipped) == 3
    assert reached([False, False], [False, False], [False, False]) == 2


def test_decisions_settle_a_large_difference_and_an_equal_pair_and_then_say_stop():
    """400 questions, every one drawn (pi 1): A 0.3 above B, B and C equal; at the end both settled."""
    rng = np.random.default_rng(0)
    n = 400
    truth = np.column_stack([np.full(n, 0.8), np.full(n, 0.5), np.full(n, 0.5)]) + rng.normal(0, 0.05, (n, 3))
    labels = np.clip(truth, 0, 1)
    judged = np.clip(labels + rng.normal(0, 0.05, (n, 3)), 0, 1)
    design = ActiveDesign("M", "M", 0, {"budget": n, "floor": 1.0, "lowest": 1.0, "kind": "uniform",
                                        "n_items": n}, DISAGREEMENT, "", 0.1, 0.05, "asymptotic",
                          tuple(f"q{i}" for i in range(n)), (0.0,) * n, (1.0,) * n, (True,) * n)
    first_20 = np.where(np.arange(n)[:, None] < 20, labels, np.nan)
    early = decisions_of(design, ("A", "B", "C"), judged, first_20, [], 3)
    assert early["questions_covered"] == 20 and early["open"] == 3 and early["stop"] is None  # < 50: open
    final = decisions_of(design, ("A", "B", "C"), judged, labels, [], 3)
    assert [pair["decision"] for pair in final["pairs"]] == ["different", "different", "equivalent"]
    assert final["stop"] == "settled" and final["labeled_questions"] == n and final["family_size"] == 3


def test_labeling_can_stop_when_every_comparison_is_settled_or_the_drawn_questions_run_out():
    assert stop_reason(3, 0, 10, 100) == SETTLED  # settled, whatever is left to serve
    assert stop_reason(3, 0, 100, 100) == SETTLED
    assert stop_reason(3, 1, 100, 100) == EXHAUSTED  # open, but nothing more to serve
    assert stop_reason(0, 0, 100, 100) == EXHAUSTED  # one system: no comparison, nothing more to serve
    assert stop_reason(3, 1, 99, 100) is None


def test_a_small_design_labeled_to_the_end_says_it_has_nothing_more_to_serve():
    """6 questions, every one drawn and labeled, one skipped: far below the 50 labels an anytime interval
    needs, so every comparison stays open, and the design is exhausted."""
    n = 6
    design = ActiveDesign("M", "M", 0, {"budget": n, "floor": 1.0, "lowest": 1.0, "kind": "uniform",
                                        "n_items": n}, DISAGREEMENT, "", 0.1, 0.05, "asymptotic",
                          tuple(f"q{i}" for i in range(n)), (0.0,) * n, (1.0,) * n, (True,) * n)
    labels = np.tile([0.9, 0.2, 0.5], (n, 1))
    partly = np.where(np.arange(n)[:, None] < 4, labels, np.nan)
    assert decisions_of(design, ("A", "B", "C"), labels, partly, ["q5"], 3)["stop"] is None  # q4 is next
    labels[5] = np.nan  # q5 skipped, not labeled
    final = decisions_of(design, ("A", "B", "C"), labels, labels, ["q5"], 3)
    assert final["stop"] == EXHAUSTED and final["open"] == 3 and final["questions_covered"] == n
    assert final["labeled_questions"] == 5 and final["skipped_drawn"] == 1


def test_the_store_for_a_design_serves_what_the_option_says_and_checks_it_before_writing(run):
    import argparse

    def args(design, **given):
        unset = {"label_budget": None, "label_floor": None, "label_margin": None, "seed": 0}
        return argparse.Namespace(design=design, **{**unset, **given})

    metric = labeling.resolve_metric(run, METRIC, None, None, None)
    questions = labeling.load_questions(run)
    with pytest.raises(UsageError, match="--label-floor needs --design active"):
        labeling.LabelStore.for_design(run, metric, questions, args("uniform", label_floor=0.2))
    assert not run.labels_dir.exists()
    store = labeling.LabelStore.for_design(run, metric, questions, args("active", label_budget=60.0))
    assert store.order == read_design(run, METRIC).drawn_order and store.stop_line is not None
    assert store.design_note().startswith(f", active design: {len(store.order)} of 120 questions drawn by "
                                          "the systems' disagreement, floor ")
    assert json.loads(run.labels_metrics.read_text())[METRIC]["design"] == "active"


def call(url: str, token: str | None, origin: str | None = None) -> tuple[int, dict]:
    headers = {} if token is None else {"X-CCRS-Token": token}
    if origin:
        headers["Origin"] = origin
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_page_shows_the_decisions_after_each_question_and_refuses_other_origins(run):
    store, questions = open_active(run, budget=110.0, margin=0.3)
    server = labeling.make_server(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    try:
        status, first = call(f"{base}/api/decisions", server.token)
        assert status == 200 and first["design"] == "active" and first["open"] == 3 and first["stop"] is None
        assert call(f"{base}/api/decisions", None)[0] == 403
        assert call(f"{base}/api/decisions", server.token, "http://evil.example")[0] == 403
        while label_next(store, questions) is not None:
            pass
        status, final = call(f"{base}/api/decisions", server.token)
        assert status == 200 and final["labeled_questions"] == len(store.order) >= 50
        decisions = {(pair["a"], pair["b"]): pair["decision"] for pair in final["pairs"]}
        assert decisions == {("A", "B"): "different", ("A", "C"): "different", ("B", "C"): "equivalent"}
        assert final["stop"] == "settled" and final["open"] == 0
        assert "You can stop" in PAGE and "/api/decisions" in PAGE and "nothing more to serve" in PAGE
    finally:
        server.shutdown()
        server.server_close()


def test_the_decisions_say_why_labeling_can_stop_once_a_small_design_runs_out(tmp_path):
    small = write_active_run(tmp_path / "small", questions=12)
    store, questions = open_active(small, budget=12.0)
    server = labeling.make_server(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        while store.state("ann")["question"] is not None:
            assert call(f"{base}/api/decisions", server.token)[1]["stop"] is None  # more to serve
            label_next(store, questions)
        status, final = call(f"{base}/api/decisions", server.token)
        assert status == 200 and final["stop"] == "exhausted" and final["open"] == 3
        assert final["labeled_questions"] == final["drawn"] == len(store.order) == 12
    finally:
        server.shutdown()
        server.server_close()


def test_a_uniform_page_has_no_decisions(run):
    store, _ = open_active(run, budget=None, design="uniform")
    assert store.decisions() == {"design": "uniform"} and store.design_note() == ""
    assert not run.labels_design.exists()


def test_a_run_judged_with_expected_marks_takes_the_spread_of_their_distribution(run):
    """judgments.parquet's `detail` marks {mark: probability} on the metric's 1-5 scale: the sd over the
    scale's width; an answer without a distribution gets the largest spread."""
    import pandas as pd

    from judges.suite import all_metrics
    from pipelines.tools.labeling.uncertainty import run_uncertainty

    suite = next(metric.suite for metric in all_metrics() if metric.name == METRIC)
    scores = pd.read_parquet(run.scores(suite))
    details = [json.dumps({"marks": {"3": 0.5, "5": 0.5}}) if i % 3 else json.dumps({"fallback": "none"})
               for i in range(len(scores))]
    scores.assign(detail=details).to_parquet(run.judgments(suite), index=False)
    uncertainty = run_uncertainty(run, METRIC)
    assert uncertainty.source == SPREAD and uncertainty.filled == (len(scores) + 2) // 3
    assert uncertainty.per_question == pytest.approx(np.full(120, np.sqrt(3) * 0.25))  # sd 1 of 4, 3 answers


def test_a_floor_over_the_budget_is_one_usage_error():
    with pytest.raises(UsageError, match=r"--label-floor 0.9 x 120 questions is over the budget of 50"):
        check_design_options("active", 50.0, 0.9, None, 120)
    check_design_options("active", None, 0.2, None, 120)  # 0.2 x 120 = 24 <= the default 50
