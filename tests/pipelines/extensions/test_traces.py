"""`ccrs evaluate --traces`'s wiring (pipelines/extensions/traces.py): the traces of a real (SQLite) MLflow
store become the outputs of a run through the same options and config as files, every trace is a row or a
counted failure recorded with the run, a judge input only some traces give leaves its metrics out, and the
options refuse to go without --traces."""
import pytest

from pipelines.evaluate import EvaluationInputError, prepare_evaluation
from pipelines.extensions import extensions
from tasks.outputs import generations_frame
from tests.pipelines.tools.traces.app import EMPTY_EXPERIMENT, EXPERIMENT
from tests.pipelines.tools.traces.conftest import app_store  # noqa: F401 - the traced app's store


def _prepared(store, tmp_path, **options):
    return prepare_evaluation(None, traces=EXPERIMENT, tracking_uri=store.uri, system_from="tag:variant",
                              out=tmp_path / "run", **options)


def test_the_traces_are_the_runs_outputs_each_row_keeping_its_trace_id(app_store, tmp_path):  # noqa: F811
    config, outputs = _prepared(app_store, tmp_path, metrics=["QR"])
    block = extensions()["traces"].block(config)
    assert (block.experiment, config.name) == (EXPERIMENT, f"evaluate-traces-{EXPERIMENT}")
    read = block.selected["read"]
    assert read["rows"] == len(outputs.rows) == len(app_store.good) + sum(read["warnings"].values())
    assert read["traces"] == read["rows"] + sum(read["failed"].values())  # every trace counted somewhere
    assert set(read["failed"]) >= {"error_state", "no_output"}
    assert set(outputs.rows["answer_id"]) >= set(app_store.good.values())
    assert set(generations_frame(outputs.rows)["answer_id"]) == set(outputs.rows["answer_id"])
    assert sorted(outputs.systems) == ["A", "B"] and config.judge.ccrs.metrics == ["QR"]


def test_a_reference_only_some_traces_have_leaves_its_metrics_out_unless_named(app_store, tmp_path):  # noqa: F811
    config, _ = _prepared(app_store, tmp_path)
    assert "AC" not in config.judge.ccrs.metrics and "QR" in config.judge.ccrs.metrics
    assert "AC" in extensions()["traces"].block(config).selected["metrics_note"]
    with pytest.raises(EvaluationInputError,
                       match="--metrics AC need (context and )?ground_truth on every trace"):
        _prepared(app_store, tmp_path, metrics=["AC"])


@pytest.mark.parametrize(("options", "message"), [
    ({"filter": "tags.variant = 'A'"}, "--filter need --traces EXPERIMENT"),
    ({"traces": EMPTY_EXPERIMENT}, "no trace"),
    ({"traces": "no-such-experiment"}, "no-such-experiment"),
])
def test_bad_trace_options_are_one_line(app_store, tmp_path, options, message):  # noqa: F811
    with pytest.raises(EvaluationInputError, match=message) as raised:
        prepare_evaluation(None, tracking_uri=app_store.uri, out=tmp_path / "run", **options)
    assert "\n" not in str(raised.value)


def test_files_or_traces_not_both_and_not_neither(app_store, tmp_path):  # noqa: F811
    with pytest.raises(EvaluationInputError, match="no outputs given"):
        prepare_evaluation(None, out=tmp_path / "run")
    with pytest.raises(EvaluationInputError, match="not both"):
        prepare_evaluation(["x.jsonl"], traces=EXPERIMENT, tracking_uri=app_store.uri, out=tmp_path / "run")


@pytest.mark.parametrize("command", ["evaluate", "nightly"])
def test_an_unreachable_tracking_server_or_unknown_experiment_is_one_line_and_exit_2(
        app_store, tmp_path, monkeypatch, capsys, command):  # noqa: F811
    from pipelines.cli import main
    from tests.pipelines.conftest import free_port

    monkeypatch.chdir(tmp_path)
    # both commands shut down the Ray they joined on the way out: here that would be the session's, serving
    # the real-stack tests' model
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)
    unreachable = f"http://127.0.0.1:{free_port()}"
    for uri, experiment, said in ((unreachable, EXPERIMENT, "cannot reach the tracking server"),
                                  (app_store.uri, "no-such-experiment", "no-such-experiment")):
        code = main([command, "--traces", experiment, "--tracking-uri", uri, "--out", str(tmp_path / "run")])
        errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and said in errors[0], errors  # nightly adds a line: the run could not be logged
        assert command == "nightly" or len(errors) == 1
