"""Any OpenAI-compatible judge, no config file (issue 33 item 2), on the real CPU stack: the session's vLLM
server behind a loopback proxy that, like a hosted API, refuses vLLM's own request fields (HTTP 400) and
returns no log-probabilities. `ccrs evaluate FILE --judge-base-url URL --judge-model ID` without `--config`
judges with integer marks, structured output where the endpoint accepts `response_format` (this one does),
and logs an MLflow run that spans the command, its Description the verdict's headline."""
from __future__ import annotations

import pandas as pd
import pytest

from judges.client import VLLM_ONLY_FIELDS
from tasks.runtime.layout import RunLayout
from tests.loopback import JudgeProxy
from tests.tasks.test_outputs import EXAMPLE

pytestmark = pytest.mark.llm
SETTINGS = ("judge: settings for an OpenAI-compatible endpoint: integer marks, no vLLM-only request field, "
            "a window of 8,192 tokens, structured output through OpenAI's response_format (the endpoint "
            "accepts it); --scoring or --config choose others")


def test_evaluate_with_a_hosted_judge_and_no_config_exits_0_with_scores(llm_endpoint, tmp_path, mlflow_db,
                                                                       monkeypatch, capsys):
    """The command's own path (pipelines.cli.main, as `ccrs evaluate` runs it) in this process: a process
    of its own (its start-up: about half of this test's time on the CI's CPUs) is not the subject here; the
    CLI in a process of its own is tested from a wheel install in test_evaluate_cmd.py."""
    from mlflow.tracking import MlflowClient

    from pipelines.cli import main
    from pipelines.reporting.tracking import NOTE_TAG

    proxy = JudgeProxy(llm_endpoint.base_url, refused=VLLM_ONLY_FIELDS, logprobs=False)
    uri = mlflow_db  # a copy of a new store (MLflow's migrations are seconds)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    # a judgment cache of its own: every judgment is asked through the proxy
    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray stays up
    run_dir = tmp_path / "run"
    try:
        code = main(["evaluate", str(EXAMPLE), "--limit", "2", "--metrics", "QR,CC", "--out", str(run_dir),
                     "--judge-base-url", proxy.url, "--judge-model", llm_endpoint.judge_model])
    finally:
        proxy.close()
    done = capsys.readouterr()
    assert code == 0, done.err[-3000:]
    assert SETTINGS in done.out.splitlines()
    layout = RunLayout(run_dir)
    scores = pd.read_parquet(layout.scores("ccrs"))
    assert len(scores) and set(scores["metric"]) <= {"QR", "CC"}
    schemas = [body["response_format"]["json_schema"]["name"] for body in proxy.bodies
               if "response_format" in body]
    assert schemas[0] == "probe" and "ccrs_score" in schemas  # probed once, then judged in the schema
    assert not any({*VLLM_ONLY_FIELDS, "logprobs", "top_logprobs"} & set(body) for body in proxy.bodies)

    (run,) = MlflowClient(uri).search_runs(
        [MlflowClient(uri).get_experiment_by_name("ccrs-cpu-demo").experiment_id],
        "tags.`ccrs.kind` = 'pipeline'")
    judged_at_ms = layout.judgments("ccrs").stat().st_mtime * 1000
    assert run.info.start_time < judged_at_ms < run.info.end_time  # the run spans the judging
    note = run.data.tags[NOTE_TAG]
    assert f"judge `{llm_endpoint.judge_model}`" in note and "summary.md" in note
    assert run.data.params["judge.structured_output"] == "true" and run.data.tags["ccrs.scoring"] == "integer"
