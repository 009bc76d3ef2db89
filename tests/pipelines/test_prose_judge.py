"""A judge that answers only prose (issue 33 item 6), on the real CPU stack: the session's vLLM server
behind a loopback proxy (tests/loopback.py) that deletes every digit from the judge's replies, so that the
real SmolLM2 judge never gives a mark and every judgment fails to parse. `ccrs evaluate` of one system's
outputs, with a copy of the demo config set to integer marks without structured output (the issue's copy:
it carries no hypotheses about the demo's systems A-F), prints the failure table and the judge's replies,
logs its run to a real `mlflow server`, and exits 4 with one line: no traceback, no "found []"."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tasks.runtime.layout import RunLayout
from tests.loopback import JsonHandler, LoopbackServer
from tests.tasks.test_outputs import example_rows

pytestmark = pytest.mark.llm
REPO = Path(__file__).resolve().parents[2]


class DigitlessJudge(LoopbackServer):
    """An OpenAI-compatible endpoint in front of a real one whose chat replies lose every digit."""

    def __init__(self, upstream: str):
        import httpx

        class Handler(JsonHandler):
            def do_GET(self):  # noqa: N802 - the model list, for the endpoint's identity
                response = httpx.get(f"{upstream}{self.path.removeprefix('/v1')}", timeout=60)
                self.send_json(response.status_code, response.content)

            def do_POST(self):  # noqa: N802
                response = httpx.post(f"{upstream}{self.path.removeprefix('/v1')}", json=self.read_json(),
                                      timeout=120)
                if response.status_code != 200:
                    self.send_json(response.status_code, response.content)
                    return
                reply = response.json()
                for choice in reply.get("choices", []):
                    choice["message"]["content"] = re.sub(r"\d", "", choice["message"].get("content") or "")
                self.send_json(200, reply)

        super().__init__(Handler, "/v1")


def prose_config(path: Path) -> Path:
    """The demo config as a user copies it, set to integer marks without structured output; no re-asks
    (each would be one more request for the same failure)."""
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"].update(scoring="integer", structured_output=False, max_reasks=0)
    config["stats"]["b"] = 1000
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_judge_that_answers_only_prose_ends_with_the_failures_its_replies_an_mlflow_run_and_exit_4(
        llm_endpoint, mlflow_server, tmp_path, monkeypatch, capsys):
    """The command's own path (pipelines.cli.main, as `ccrs evaluate` runs it: the quiet console, the one
    line of an exit) in this process: a process of its own (its start-up: more than half of this test's
    time on the CI's CPUs) is not the subject here."""
    from mlflow.tracking import MlflowClient

    from pipelines.cli import main

    outputs = tmp_path / "prod.jsonl"
    outputs.write_text("".join(json.dumps(row) + "\n" for row in example_rows()
                               if row["system"] == "top1-sentence"))
    run_dir = tmp_path / "run"
    proxy = DigitlessJudge(llm_endpoint.base_url)
    # a judgment cache of its own: the proxy reports the real server's identity, whose cached marks would
    # otherwise be served
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("CCRS_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray stays up
    try:
        code = main(["evaluate", str(outputs), "--config", str(prose_config(tmp_path / "mine.yaml")),
                     "--limit", "2", "--metrics", "QR", "--out", str(run_dir), "--judge-base-url", proxy.url,
                     "--judge-model", llm_endpoint.judge_model, "--experiment", "prose-judge"])
    finally:
        proxy.close()
    printed = capsys.readouterr()
    assert code == 4, printed.err[-3000:]
    assert "Traceback" not in printed.out + printed.err and "found []" not in printed.out + printed.err
    layout = RunLayout(run_dir)
    # the one line (the console's last note is where the log records went)
    (line,) = [text for text in printed.err.splitlines() if text.startswith("ccrs evaluate:")]
    assert line.startswith("ccrs evaluate: every one of the 2 judgments failed (")
    assert line.endswith(f"no scores, so no statistics; the failure table, reasons and the judge's replies: "
                         f"{layout.summary_md}")

    judgments = pd.read_parquet(layout.judgments("ccrs"))
    assert (judgments["status"] == "failed").all() and len(judgments) == 2
    assert not judgments["raw"].str.contains(r"\d").any()
    assert re.search(r"^judge_ccrs\s+2\s+2\s", printed.out, re.MULTILINE)  # the failure table
    assert "Most common reasons" in printed.out and "The judge's replies" in printed.out
    verdict = layout.summary_md.read_text()
    shown = judgments.iloc[0]
    assert f"| {shown['query_id']} | top1-sentence | QR | {shown['reason']} |" in verdict
    assert json.loads(layout.failures_json.read_text())["failed_total"] == 2
    assert json.loads(layout.stats_json.read_text())["systems"] == []

    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("prose-judge")
    (run,) = client.search_runs([experiment.experiment_id], "tags.`ccrs.kind` = 'pipeline'")
    assert run.info.status == "FINISHED" and run.data.tags["ccrs.source"] == "outputs"
    assert {"summary.md", "failures", "samples"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
