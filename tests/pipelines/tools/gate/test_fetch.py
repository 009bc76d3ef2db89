"""The gate's MLflow side (pipelines/tools/gate/fetch.py): which run is the baseline, a baseline moved on
purpose, answers read from a run's own folder where MLflow lacks them."""
import json

import numpy as np
import pandas as pd
import pytest

from pipelines.tools.gate.decide import RegressionError
from tests.pipelines.tools.gate.fakes import gate_of, planted_scores


def test_ad_hoc_runs_and_other_configs_are_never_the_previous_baseline(store):
    scores = planted_scores(np.random.default_rng(0))
    nightly = store.log(scores)
    store.log(scores, **{"ccrs.adhoc": "true"})
    store.log(scores, **{"ccrs.config_name": "someone-elses"})
    store.log(scores)
    assert gate_of(store).baseline_id == nightly


def test_runs_logged_before_series_tags_are_found_by_their_config_name(store):
    """A series begun before the ccrs.series tag keeps its baseline (the config name's lookup, said in the
    report); an untagged run of another config name is named as such when a night has no baseline."""
    scores = planted_scores(np.random.default_rng(0))
    before = store.log(scores)  # SETTINGS: config name "nightly", no ccrs.series
    store.log(scores, **{"ccrs.config_name": "evaluate-night1"})
    tagged = store.log(scores, **{"ccrs.series": "gate"})
    report = gate_of(store)
    assert (report.status, report.baseline_id) == ("pass", before)
    assert "its baseline logged before series tags and found by its config name nightly" in report.markdown

    store.log(scores, **{"ccrs.series": "gate", "ccrs.config_name": "evaluate-night2"})
    assert gate_of(store).baseline_id == tagged  # its series' tagged night: the file's name no longer matters
    store.log(scores, **{"ccrs.series": "other", "ccrs.config_name": "evaluate-night3"})
    report = gate_of(store)
    assert report.status == "baseline" and report.other_series == (
        "evaluate-night1 (config name; logged before series tags)", "gate",
        "nightly (config name; logged before series tags)")


def test_a_named_or_accepted_baseline_moves_it_on_purpose(store):
    from pipelines.tools.gate.fetch import mark_baseline

    good = planted_scores(np.random.default_rng(0))
    first = store.log(good)
    gate_of(store)
    changed = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert gate_of(store).status == "incomparable"
    assert mark_baseline(store.uri, "gate", "latest", accept=True, name="judge-v2") == changed
    later = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert gate_of(store).baseline_id == changed  # the accepted run, not night one
    assert gate_of(store, baseline="tag:judge-v2").baseline_id == changed
    assert gate_of(store, run=later, baseline=first, allow_judge_change=True).baseline_id == first
    with pytest.raises(RegressionError, match="tagged ccrs.baseline='nope'"):
        gate_of(store, baseline="tag:nope")


def test_answers_missing_from_mlflow_come_from_the_runs_own_folder_while_it_still_holds_that_run(store):
    from tasks.runtime.layout import OUTPUTS_STAGE, RunLayout

    def folder_of(run_id: str, holds: str) -> None:
        """The run's folder (tag ccrs.run_dir, a `ccrs evaluate` run) whose track stage logged `holds`."""
        layout = RunLayout(store.root / f"folder-{run_id}")
        for stage in (layout.stage_dir(OUTPUTS_STAGE), layout.track_dir):
            stage.mkdir(parents=True)
        pd.DataFrame({"query_id": ["q0"], "text": ["question zero?"]}).to_parquet(layout.queries)
        pd.DataFrame({"query_id": ["q0"], "system": ["A"], "answer": [f"answer of {run_id}"]}).to_parquet(
            layout.generations)
        (layout.track_dir / "_STAGE.json").write_text(json.dumps({"summary": {"run_id": holds}}))
        store.client.set_tag(run_id, "ccrs.run_dir", str(layout.root))

    baseline = store.log(planted_scores(np.random.default_rng(0)))
    gate_of(store)
    run = store.log(planted_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3))
    folder_of(baseline, holds=baseline)
    folder_of(run, holds="a-later-night")  # the folder was reused since: not this run's answers
    moves = gate_of(store, show_moves=60).moves.set_index(["system", "metric", "query_id"])
    q0 = moves.loc[("A", "CC", "q0")]
    assert (q0.answer_baseline, q0.answer_run, q0.question) == (f"answer of {baseline}", "", "question zero?")
