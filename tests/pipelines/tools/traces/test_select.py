"""Which traces are chosen: filter, since, the newest N, a reproducible uniform sample, and the one-line
errors for a store, an experiment or a selection that gives none."""
from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from pipelines.tools.traces.mapping import TraceInputError
from pipelines.tools.traces.select import TraceSelection, effective_filter, select_traces, since_ms
from tests.pipelines.tools.traces.app import EMPTY_EXPERIMENT, EXPERIMENT


def _select(store, **options):
    return select_traces(TraceSelection(experiment=options.pop("experiment", EXPERIMENT),
                                        tracking_uri=store.uri, **options))


def _ids(selected) -> list[str]:
    return [trace.info.trace_id for trace in selected.traces]


def _all_ids(store) -> set[str]:
    return set(store.good.values()) | set(store.bad.values())


def test_every_trace_is_selected_with_its_spans_and_the_spanless_one_is_kept(app_store):
    selected = _select(app_store)
    assert set(_ids(selected)) == _all_ids(app_store) and selected.experiment_name == EXPERIMENT
    by_id = {trace.info.trace_id: trace for trace in selected.traces}
    assert len(by_id[app_store.good[0, "A"]].data.spans) == 2
    assert by_id[app_store.bad["in_progress"]].data.spans == []
    times = [trace.info.request_time for trace in selected.traces]
    assert times == sorted(times)
    assert selected.record["matched"] == selected.record["selected"] == len(_all_ids(app_store))


def test_the_experiment_by_id(app_store):
    assert set(_ids(_select(app_store, experiment=app_store.experiment_id))) == _all_ids(app_store)


def test_filter_selects_a_variant(app_store):
    chosen = set(_ids(_select(app_store, filter_string="tags.variant = 'B'")))
    expected = {trace_id for (_, variant), trace_id in app_store.good.items() if variant == "B"}
    assert chosen == expected | {app_store.bad[kind] for kind in ("no_output", "error_state",
                                                                   "unreadable_inputs")}


def test_the_sample_is_uniform_over_the_selection_and_reproducible(app_store):
    first = _select(app_store, sample=5, seed=7)
    assert _ids(first) == _ids(_select(app_store, sample=5, seed=7))
    assert len(set(_ids(first))) == 5 and set(_ids(first)) <= _all_ids(app_store)
    others = {tuple(_ids(_select(app_store, sample=5, seed=seed))) for seed in range(8, 12)}
    assert len(others | {tuple(_ids(first))}) > 1
    assert first.record | {"trace_ids": None} == first.record | {
        "sample": 5, "seed": 7, "matched": len(_all_ids(app_store)), "selected": 5, "trace_ids": None}
    assert first.record["trace_ids"] == _ids(first)


def test_max_traces_keeps_the_newest(app_store):
    newest = sorted(_select(app_store).traces, key=lambda t: t.info.request_time)[-3:]
    chosen = _select(app_store, max_traces=3)
    assert set(_ids(chosen)) == {trace.info.trace_id for trace in newest}
    assert chosen.record["matched"] == 3


def test_since_bounds_the_start_time(app_store):
    assert set(_ids(_select(app_store, since="7d"))) == _all_ids(app_store)
    with pytest.raises(TraceInputError, match=r"no trace of experiment 'rag-app' matches 'timestamp_ms >= "):
        _select(app_store, since="2999-01-01T00:00:00Z")


def test_since_and_filter_are_joined():
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    selection = TraceSelection(experiment="x", filter_string=" tags.variant = 'A' ", since="24h")
    day_before = int(datetime(2026, 11, 28, 12, tzinfo=UTC).timestamp() * 1000)
    assert effective_filter(selection, now) == f"tags.variant = 'A' AND timestamp_ms >= {day_before}"
    assert since_ms("2026-11-28", now) == since_ms("2026-11-28T00:00:00+00:00", now)
    assert effective_filter(TraceSelection(experiment="x"), now) is None


@pytest.mark.parametrize("options", [{"since": "yesterday"}, {"system_from": "variant"},
                                     {"system_from": "label:variant"}, {"system_from": "attribute: "},
                                     {"sample": 0}, {"max_traces": 0},
                                     {"filter": "x"}])
def test_bad_options_are_refused(options):
    with pytest.raises(ValidationError):
        TraceSelection(experiment="x", **options)


def test_a_selection_that_gives_nothing_is_one_line(app_store):
    with pytest.raises(TraceInputError, match=r"^no experiment named 'nope' \(or with that id\) in sqlite"):
        _select(app_store, experiment="nope")
    with pytest.raises(TraceInputError, match=r"^no trace of experiment 'no-traces' matches$"):
        _select(app_store, experiment=EMPTY_EXPERIMENT)
    with pytest.raises(TraceInputError, match=r"^--filter 'tags.variant ~ 1': "):
        _select(app_store, filter_string="tags.variant ~ 1")


def test_an_unreachable_tracking_server_is_one_line_in_seconds():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    with pytest.raises(TraceInputError, match=f"^cannot reach the tracking server at {uri}: "):
        select_traces(TraceSelection(experiment="x", tracking_uri=uri))
