"""`ccrs evaluate --traces` on the real CPU stack: the traced app's traces (real BioASQ sample questions, two
variants tagged `variant`, a real SQLite MLflow store) are judged by the session's judge, the run is logged
beside them, every judgment lands on its trace as feedback `ccrs/<metric>`, and a rerun writes none twice."""
from __future__ import annotations

import pytest
from mlflow import MlflowClient

from pipelines.cli import main
from tests.pipelines.test_evaluate_cmd import integer_config
from tests.pipelines.tools.traces.app import EXPERIMENT
from tests.pipelines.tools.traces.conftest import app_store, writable_store  # noqa: F401 - the app's store


def _feedback(uri: str, experiment_id: str) -> dict[str, int]:
    client = MlflowClient(uri)
    traces = client.search_traces(locations=[experiment_id], max_results=100)
    return {trace.info.trace_id: len([a for a in client.get_trace(trace.info.trace_id).search_assessments(
        type="feedback") if a.name.startswith("ccrs/")]) for trace in traces}


@pytest.mark.llm
def test_traces_are_judged_and_their_judgments_written_back_once(llm_endpoint, writable_store, tmp_path,  # noqa: F811
                                                                 monkeypatch, capsys):
    from tests.conftest import process_state_restored

    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray serves the model
    argv = ["evaluate", "--traces", EXPERIMENT, "--tracking-uri", writable_store.uri, "--system-from",
            "tag:variant", "--metrics", "QR", "--config", str(integer_config(tmp_path / "config.yaml")),
            "--llm-base-url", llm_endpoint.base_url, "--out", str(tmp_path / "run"), "--experiment",
            "traces-e2e"]
    with process_state_restored():
        code = main(argv)
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]
    verdict = (tmp_path / "run" / "summary.md").read_text()
    assert "## Traces" in verdict and "error_state" in verdict  # the bad traces, counted
    written = _feedback(writable_store.uri, writable_store.experiment_id)
    judged = set(writable_store.good.values())
    assert all(written[trace] == 1 for trace in judged)  # one QR feedback on each judged trace
    assert "9 feedback written on 9 traces" in printed.out + printed.err

    with process_state_restored():
        assert main([*argv, "--from-stage", "track"]) == 0  # the run logged again: no feedback twice
    assert _feedback(writable_store.uri, writable_store.experiment_id) == written
    again = capsys.readouterr()
    assert "already there" in again.out + again.err
