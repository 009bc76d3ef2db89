"""Production traces on the real CPU stack and a real `mlflow server` (tests/pipelines/tools/traces/
production_app.py: real BioASQ sample questions, a real BM25 retriever over the sample's snippets, two
variants asked different questions, the bad kinds). `ccrs evaluate --traces` judges them with the session's
judge, compares the variants unpaired, writes every judgment onto its trace (seen through
`mlflow.search_traces` and on the trace's page in the MLflow UI), and a rerun adds none; the same for an app
instrumented with the OpenTelemetry SDK alone (OTLP/HTTP to the server); `ccrs nightly --traces` over two
nights that share no question exits 3 with the unpaired test named."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import pytest

from pipelines import nightly_cmd
from pipelines.cli import main
from tasks.runtime.layout import RunLayout
from tests.conftest import process_state_restored
from tests.pipelines.test_mlflow_ui import CHROMIUM, SHOTS, _render
from tests.pipelines.test_nightly_cmd import nightly_config
from tests.pipelines.tools.traces.production_app import (
    OTEL_VARIANT,
    VARIANT_QUESTIONS,
    Logged,
    Retriever,
    log_mlflow_app,
    log_otel_app,
    otlp_exporter,
)

pytestmark = [pytest.mark.llm, pytest.mark.slow]
APP, OTEL_APP, TONIGHT = "bioasq-rag", "bioasq-rag-otel", "bioasq-rag-tonight"


@dataclass(frozen=True)
class Production:
    url: str
    app: Logged  # MLflow Tracing, both variants, the bad kinds
    otel: Logged  # the OpenTelemetry SDK alone
    tonight: Logged  # a second night of variant A: other questions, a broken release (empty answers)


@pytest.fixture(scope="module")
def production(mlflow_server, tmp_path_factory) -> Production:
    import os

    import mlflow
    from mlflow import MlflowClient

    retriever = Retriever(tmp_path_factory.mktemp("production-index"))
    with process_state_restored():
        os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace on the server on return
        try:
            app = log_mlflow_app(mlflow_server, APP, retriever)
            tonight = log_mlflow_app(mlflow_server, TONIGHT, retriever, variants="A", first=VARIANT_QUESTIONS,
                                     broken=True, bad=False, references=False)
        finally:
            mlflow.tracing.reset()
            mlflow.tracing.fluent._set_last_active_trace_id(None)
        otel_id = MlflowClient(mlflow_server).create_experiment(OTEL_APP)
        otel = log_otel_app(otlp_exporter(mlflow_server, otel_id), otel_id, retriever)
    return Production(mlflow_server, app, otel, tonight)


def _feedback(url: str, experiment_id: str) -> dict[str, list]:
    """Each trace's ccrs feedback, as a user reads it: mlflow.search_traces on the server."""
    import mlflow

    with process_state_restored():
        mlflow.set_tracking_uri(url)
        traces = mlflow.search_traces(locations=[experiment_id], return_type="list", max_results=200)
    return {trace.info.trace_id: [a for a in trace.search_assessments(type="feedback")
                                  if a.name.startswith("ccrs/")] for trace in traces}


def _evaluate(argv: list[str], capsys) -> tuple[int, str]:
    with process_state_restored():
        code = main(argv)
    printed = capsys.readouterr()
    return code, printed.out + printed.err


@pytest.fixture
def judged_here(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray serves the model
    return nightly_config(tmp_path / "config.yaml")  # QR with expected marks, B = 1000


def _traces_argv(experiment: str, production: Production, llm_endpoint, config, out,
                 *extra: str) -> list[str]:
    return ["evaluate", "--traces", experiment, "--tracking-uri", production.url, "--metrics", "QR",
            "--config", str(config), "--llm-base-url", llm_endpoint.base_url, "--out", str(out),
            "--experiment", "traces-e2e", *extra]


def _check_verdict(verdict: str, logged: Logged) -> None:
    assert "## Traces" in verdict
    for reason in logged.bad:
        assert reason in verdict, reason
    assert "repeated_question" in verdict
    assert "## Unpaired comparison" in verdict and "share 0 question(s)" in verdict, verdict[-3000:]


def test_traced_app_on_a_server_judged_compared_unpaired_and_marked_once(
        llm_endpoint, production, judged_here, tmp_path, capsys):
    assert production.app.traces >= 40
    # the two-nights test judges variant A of this app too: in random order its marks may come first
    before = _feedback(production.url, production.app.experiment_id)
    argv = _traces_argv(APP, production, llm_endpoint, judged_here, tmp_path / "run", "--system-from",
                        "tag:variant")
    code, printed = _evaluate(argv, capsys)
    assert code == 0, printed[-3000:]
    _check_verdict((tmp_path / "run" / "summary.md").read_text(), production.app)
    stats = json.loads(RunLayout(tmp_path / "run").stats_json.read_text())
    assert set(stats["unpaired"]["per_metric"]["QR"]["means"]) == {"A", "B"}

    written = _feedback(production.url, production.app.experiment_id)
    for trace_id in production.app.answered:
        (feedback,) = written[trace_id]  # one QR feedback on each judged trace, none elsewhere
        assert feedback.name == "ccrs/QR" and feedback.source.source_id
        assert feedback.metadata["prompt_version"] and feedback.rationale
    assert not any(written.get(t) for t in [*production.app.bad.values(), *production.app.repeated])
    judged = len(production.app.answered)
    already = sum(bool(before.get(trace_id)) for trace_id in production.app.answered)
    assert f"{judged - already} feedback written on {judged} traces" in printed

    if CHROMIUM:  # the marks beside the spans, on the trace's page in the MLflow UI
        SHOTS.mkdir(exist_ok=True)
        trace_id = next(iter(production.app.answered))
        page = _render(f"{production.url}/#/experiments/{production.app.experiment_id}/traces/{trace_id}",
                       tmp_path, SHOTS / "mlflow-trace-feedback.png")
        assert "ccrs/QR" in page and "retrieve" in page, page[:2000]

    code, printed = _evaluate([*argv, "--from-stage", "track"], capsys)  # logged again: no feedback twice
    assert code == 0 and "already there" in printed
    assert _feedback(production.url, production.app.experiment_id) == written


def test_an_opentelemetry_app_is_read_judged_and_marked_like_mlflow_tracing(
        llm_endpoint, production, judged_here, tmp_path, capsys):
    assert production.otel.traces >= 40
    argv = _traces_argv(OTEL_APP, production, llm_endpoint, judged_here, tmp_path / "run", "--system-from",
                        f"attribute:{OTEL_VARIANT}")
    code, printed = _evaluate(argv, capsys)
    assert code == 0, printed[-3000:]
    _check_verdict((tmp_path / "run" / "summary.md").read_text(), production.otel)
    written = _feedback(production.url, production.otel.experiment_id)
    assert {trace_id for trace_id, marks in written.items() if marks} == set(production.otel.answered)
    assert all(len(written[trace_id]) == 1 for trace_id in production.otel.answered)
    if CHROMIUM:  # the OTel spans and the mark, on the trace's page
        SHOTS.mkdir(exist_ok=True)
        trace_id = next(iter(production.otel.answered))
        page = _render(f"{production.url}/#/experiments/{production.otel.experiment_id}/traces/{trace_id}",
                       tmp_path, SHOTS / "mlflow-otel-trace-feedback.png")
        assert "ccrs/QR" in page and "retrieval bm25" in page, page[:2000]
    code, printed = _evaluate([*argv, "--from-stage", "track"], capsys)
    assert code == 0 and "already there" in printed
    assert _feedback(production.url, production.otel.experiment_id) == written


def night(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    nightly_cmd.add_arguments(parser)
    with process_state_restored():
        return nightly_cmd.night(parser.parse_args(list(argv)))


def test_two_production_nights_without_a_shared_question_gate_unpaired(
        llm_endpoint, production, judged_here, tmp_path, capsys):
    common = ["--tracking-uri", production.url, "--system-from", "tag:variant", "--config", str(judged_here),
              "--llm-base-url", llm_endpoint.base_url, "--out", str(tmp_path / "run"),
              "--experiment", "traces-nightly", "--b", "1000"]
    assert night("--traces", APP, "--filter", "tags.variant = 'A'", *common) == 0
    assert '"status": "baseline"' in capsys.readouterr().out
    assert night("--traces", TONIGHT, *common) == 3  # other questions, empty answers
    printed = capsys.readouterr().out
    assert '"status": "regression"' in printed, printed[-3000:]
    assert "basis `unpaired`" in printed and "two-sample randomization test" in printed  # the test, named
