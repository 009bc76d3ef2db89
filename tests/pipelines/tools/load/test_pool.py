"""The load test's requests (pipelines/tools/load/pool.py): the judge stage's own, in a seeded pool that
counts repeats."""
from __future__ import annotations

import pytest

from judges.config import CcrsOptions, ClientConfig, JudgeConfig
from judges.suite import Sample, get_suite
from pipelines.tools.load.pool import LoadTestError, RequestPool


def ccrs_judge(structured: bool = True) -> JudgeConfig:
    return JudgeConfig(structured_output=structured, cache=False, ccrs=CcrsOptions(metrics=["CC"]))


def planned_units(n: int, structured: bool = True) -> list:
    judge = ccrs_judge(structured)
    tasks = []
    for i in range(n):
        sample = Sample(f"q{i}", "gold-w0", f"question {i}?", "answer.", "answer.", [f"snippet {i}"])
        tasks += get_suite("ccrs").plan(sample, judge, ClientConfig().seed, lambda text: len(text) // 3)
    return tasks


def test_pool_shuffles_deterministically_and_counts_repeats_after_it_wraps():
    tasks = planned_units(5)
    pool = RequestPool(tasks, seed=3)
    first, second = pool.take(4), pool.take(4)
    assert [repeated for _, repeated in first] == [False] * 4
    assert [repeated for _, repeated in second] == [False, True, True, True]
    assert {t.sample.query_id for t, _ in first + second[:1]} == {f"q{i}" for i in range(5)}
    assert [t.id for t, _ in RequestPool(tasks, seed=3).take(5)] == [t.id for t, _ in first + second[:1]]
    with pytest.raises(LoadTestError, match="no judge requests"):
        RequestPool([])
