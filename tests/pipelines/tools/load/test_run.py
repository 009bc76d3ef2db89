"""The whole load test (pipelines/tools/load/run.py, outputs.py): its config, its levels limited then raised,
its files, and one small real run of `ccrs load-test` against the CPU stack."""
from __future__ import annotations

import json

import pytest

from judges.config import ClientConfig, JudgeConfig
from pipelines.tools.load.measure import LevelReport, summarize_level
from pipelines.tools.load.outputs import write_outputs
from pipelines.tools.load.run import LoadTestConfig, LoadTestResult, run_load_test
from tests.pipelines.tools.load.test_measure import record_of


def test_config_rejects_levels_below_one():
    with pytest.raises(ValueError, match="levels must be >= 1"):
        LoadTestConfig(levels=[1, 0])
    with pytest.raises(ValueError):
        LoadTestConfig(levels=[])


def test_whole_test_runs_each_level_limited_then_raised_on_fresh_requests(stub):
    handler, url = stub
    cfg = LoadTestConfig(levels=[2, 4], requests_per_level=6, compare_unlimited=True, chunks_per_sample=2)
    judge = JudgeConfig(model="stub-model", structured_output=True, cache=False)  # no tokenizer: estimate
    result = run_load_test(cfg, judge, ClientConfig(max_concurrency=2, backoff_base_s=0.0), url)
    assert [(r.mode, r.level, r.client_limit) for r in result.levels] == [
        ("limited", 2, 2), ("limited", 4, 2), ("unlimited", 2, 2), ("unlimited", 4, 4)]
    assert {(r.mode, r.level) for r in result.records[6:12]} == {("unlimited", 2)}  # right after limited L=2
    assert handler.hits == 1 + 4 * 6 and len(result.records) == 24 and len(result.warmup) == 1
    assert result.distinct_requests == 25 and not any(r.repeated for r in result.records)
    assert all(r.errors == 0 and r.started_at for r in result.levels)


def test_outputs_are_written(tmp_path):
    records = [record_of(0.0, 1.0, tokens=5), record_of(0.0, 2.0, tokens=5)]
    levels = [summarize_level(records, mode, level, 2)
              for mode in ("limited", "unlimited") for level in (1, 2)]
    result = LoadTestResult("m", "http://x/v1", {"levels": [1, 2]},
                            {"max_concurrency": 2, "api_key_env": "K"},
                            {"cpu_cores": 2}, 10, [], levels, records, 3.0)
    paths = write_outputs(result, tmp_path / "out")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths.values())
    data = json.loads(paths["json"].read_text())
    assert len(data["levels"]) == 4 and "api_key_env" not in data["client"]
    assert paths["csv"].read_text().splitlines()[0].startswith("mode,level,client_limit,requests")
    assert isinstance(levels[0], LevelReport)


# --- real run -----------------------------------------------------------------------------------------------

@pytest.mark.llm
def test_load_test_command_against_the_cpu_stack(tmp_path, llm_endpoint, capsys):
    from pipelines.cli import main

    code = main(["load-test", "--levels", "2,8", "--requests", "8", "--max-concurrency", "4",
                 "--chunks-per-sample", "1", "--llm-base-url", llm_endpoint.base_url,
                 "--judge-model", llm_endpoint.judge_model, "--out", str(tmp_path / "lt")])
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "lt" / "load_test.json").read_text())
    assert [(r["mode"], r["level"], r["client_limit"]) for r in data["levels"]] == [("limited", 2, 4),
                                                                                   ("limited", 8, 4)]
    for level in data["levels"]:
        assert (level["requests"], level["ok"], level["errors"], level["error_rate"]) == (8, 8, 0, 0.0)
        assert level["repeated_requests"] == 0 and level["completion_tokens"] > 0
        lat = level["latency"]
        assert 0 < lat["p50_s"] <= lat["p90_s"] <= lat["p99_s"] <= lat["max_s"]
        assert level["throughput_rps"] > 0
    assert len(data["warmup"]) == 1 and data["distinct_requests"] >= 17
    for name in ("load_test.csv", "load_test_requests.csv", "load_test.png"):
        assert (tmp_path / "lt" / name).stat().st_size > 0
    assert "| limited" in capsys.readouterr().out
