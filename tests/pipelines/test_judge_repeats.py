"""`judge.repeats` on the real CPU stack, through `ccrs_eval.evaluate` (the judge, reduce and track stages of
`ccrs evaluate`, no retrieval to wait for): every judgment asked 3 times at a temperature, each repeat a row
of its own, the verdict's judge-noise section, MLflow's per-sample table of repeat means, and a second
evaluation answered by the judgment cache alone."""
import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.pipelines.test_evaluate_cmd import REPO
from tests.tasks.test_outputs import EXAMPLE

QUESTIONS, SYSTEMS, K = 2, 2, 3
METRICS = ["CC", "QR"]


def repeats_config(path: Path, tracking_uri: str) -> Path:
    """The shipped demo config, integer marks (CI time), two CCRS metrics, each judgment 3 times."""
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"].update(scoring="integer", repeats={"k": K, "mode": "sample"})
    config["judge"]["ccrs"]["metrics"] = METRICS
    config["stats"] = {**config["stats"], "b": 200, "hypotheses": None}
    config["mlflow"] = {**config["mlflow"], "experiment": "ccrs-repeats", "tracking_uri": tracking_uri}
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.llm
def test_sampled_repeats_are_judged_k_times_reported_as_judge_noise_and_served_from_the_cache_again(
        tmp_path, llm_endpoint, judge_cache_dir, mlflow_db):
    from ccrs_eval import evaluate

    uri = mlflow_db  # tmp_path/mlflow.db, a copy of the session's empty store
    config = repeats_config(tmp_path / "config.yaml", uri)
    result = evaluate(EXAMPLE, config=config, limit=QUESTIONS, llm_base_url=llm_endpoint.base_url,
                      out=tmp_path / "one")

    n = QUESTIONS * SYSTEMS * len(METRICS) * K
    judgments = result.judgments
    assert len(judgments) == n and result.new_judge_requests == n  # no two repeats share a key
    per_sample = judgments.groupby(["question_id", "system", "metric"])["repeat"]
    assert all(sorted(labels) == list(range(K)) for _, labels in per_sample)
    assert list(result.scores.columns) == ["question_id", "system", "metric", "score", "repeat", "suite"]
    assert result.stages["judge_ccrs"]["summary"]["repeats"] == "3 x sample (temperature 0.7)"

    noise = {metric: result.stats["per_metric"][metric].get("judge_noise") for metric in METRICS}
    assert all(entry is not None and entry["n_repeats"] == K for entry in noise.values()), noise
    assert "## Judge noise" in result.verdict and "flaky pairs" in result.verdict
    assert "Repeated judgments (judge.repeats): ccrs 3 x sample (temperature 0.7)." in result.verdict

    client = MlflowClient(uri)
    table = json.loads(Path(client.download_artifacts(result.mlflow_run_id, "samples/per_sample.json"))
                       .read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert len(rows) == QUESTIONS * SYSTEMS and all(f"CC[{K - 1}]:" in row["judge_raw"] for row in rows)
    means = judgments[judgments.status == "ok"].groupby(["question_id", "system", "metric"])["score"].mean()
    for row in rows:
        assert row["CC"] == pytest.approx(means[(row["query_id"], row["system"], "CC")])

    again = evaluate(EXAMPLE, config=config, limit=QUESTIONS, llm_base_url=llm_endpoint.base_url,
                     out=tmp_path / "two")
    assert again.new_judge_requests == 0
    assert again.stages["judge_ccrs"]["summary"]["cache_hits"] == n
    assert again.scores.equals(result.scores)
