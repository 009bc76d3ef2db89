"""The run's failure report carries, per LLM stage, the prompt tokens sent and those the server's prefix
cache served (from the merged client stats)."""
from pipelines.reporting.failures import failure_report, format_failure_table


def _summary(prompt: int, cached: int) -> dict:
    client = {"attempts": 30, "retries": 0, "errors": {}, "prompt_tokens": prompt,
              "cached_prompt_tokens": cached}
    return {"judgments": 30, "status_counts": {"ok": 30}, "requests": {"client": client}}


def test_prompt_and_prefix_cached_tokens_per_stage_and_in_total():
    report = failure_report({"generate": {"rows": 6, "failed": {}, "requests": {"client": {}}},
                             "judge_ccrs": _summary(77_000, 66_000)})
    judge = report["stages"]["judge_ccrs"]
    assert (judge["prompt_tokens"], judge["prefix_cached_prompt_tokens"]) == (77_000, 66_000)
    assert report["stages"]["generate"]["prompt_tokens"] == 0
    assert report["prompt_tokens_total"] == 77_000 and report["prefix_cached_prompt_tokens_total"] == 66_000
    table = format_failure_table(report)
    assert "prefix-cached" in table.splitlines()[0] and "66000 (86%)" in table


def test_shards_lost_with_a_node_are_counted_and_shown():
    summary = _summary(1_000, 0)
    summary["requests"]["lost_shards"] = 2
    report = failure_report({"judge_ccrs": summary})
    assert report["stages"]["judge_ccrs"]["lost_shards"] == 2
    assert "shards_lost_with_worker=2" in format_failure_table(report)
