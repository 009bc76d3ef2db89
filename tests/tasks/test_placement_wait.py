"""The stages' wait on Ray tasks the cluster cannot place (tasks/runtime/fanout.py PlacementWatch, wait_any,
get_placed): what it tells while Ray reports their demand unplaced, and the one line at the limit. The
decision is tested with a given demand and clock (no Ray); one test asks the session's Ray for more CPUs
than it has."""
from __future__ import annotations

import pytest

from infra import ray_runtime
from tasks.runtime import fanout
from tasks.runtime.fanout import PlacementWatch, UnplacedTasksError, get_placed, resource_shape
from tests.infra.test_ray_runtime import _status

ONE_CPU = {"CPU": 1.0}
DEMAND = "pending demand: tasks/actors 2 x {CPU: 1}; free: CPU 0 of 2"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """The demand Ray reports: a line and the shapes it cannot place; counts the reads."""

    def __init__(self, line: str = DEMAND, shapes: list | None = None):
        self.line, self.shapes, self.reads = line, [ONE_CPU] if shapes is None else shapes, 0

    def __call__(self) -> tuple[str, list]:
        self.reads += 1
        return self.line, self.shapes


def _watch(cluster: Cluster, clock: Clock, told: list[str], asks=ONE_CPU, limit_s=600.0) -> PlacementWatch:
    return PlacementWatch("ingest task", asks, limit_s, read_demand=cluster, clock=clock, say=told.append)


def _idle_until(watch: PlacementWatch, clock: Clock, until_s: float, step_s: float = 0.5) -> None:
    while clock.now < until_s:
        clock.now += step_s
        watch.idle()


def test_unplaced_tasks_are_reported_once_then_fail_in_one_line_at_the_limit():
    clock, told, cluster = Clock(), [], Cluster()
    watch = _watch(cluster, clock, told)
    _idle_until(watch, clock, 19.0)
    assert told == []  # placing takes seconds: nothing said before WAIT_REPORT_AFTER_S
    _idle_until(watch, clock, 599.0)
    assert told == [f"waiting for resources: {DEMAND} (ingest task, each asking for {{CPU: 1}})"]
    with pytest.raises(UnplacedTasksError) as failed:
        _idle_until(watch, clock, 601.0)
    assert str(failed.value) == (
        f"Ray could not place the ingest task within 600 s, for lack of free resources ({DEMAND}; each asks "
        "for {CPU: 1}); give the cluster more (sizing a head: docs/cluster.md) or ask for less")
    assert isinstance(failed.value, TimeoutError)  # the commands' one-line errors (run_outcome)
    assert cluster.reads <= 601 / fanout.DEMAND_READ_EVERY_S + 1  # a GCS call every few seconds, not per poll


def test_a_task_that_runs_slowly_is_never_stopped():
    """Its tasks placed, the stage's wait sees no demand of their shape (another request may wait)."""
    clock, told = Clock(), []
    for cluster in (Cluster("", []), Cluster("pending demand: tasks/actors 1 x {GPU: 1}", [{"GPU": 1.0}])):
        watch = _watch(cluster, clock, told, limit_s=60.0)
        _idle_until(watch, clock, clock.now + 3600.0)
    assert told == []


def test_tasks_that_ask_for_nothing_never_read_the_demand():
    clock, told, cluster = Clock(), [], Cluster(shapes=[{}])
    watch = _watch(cluster, clock, told, asks=resource_shape(num_cpus=0), limit_s=1.0)
    _idle_until(watch, clock, 3600.0)
    assert cluster.reads == 0 and told == []


def test_a_finished_task_or_placed_demand_starts_the_wait_over():
    clock, told, cluster = Clock(), [], Cluster()
    watch = _watch(cluster, clock, told, limit_s=100.0)
    _idle_until(watch, clock, 90.0)
    watch.progressed()  # one of the stage's tasks finished
    _idle_until(watch, clock, 180.0)
    cluster.shapes = []  # Ray placed everything for a moment
    _idle_until(watch, clock, 190.0)
    cluster.shapes = [ONE_CPU]
    _idle_until(watch, clock, 280.0)
    with pytest.raises(UnplacedTasksError):
        _idle_until(watch, clock, 300.0)


def test_a_changed_demand_is_told_again_at_most_once_a_minute():
    clock, told, cluster = Clock(), [], Cluster()
    watch = _watch(cluster, clock, told)
    _idle_until(watch, clock, 30.0)
    cluster.line = DEMAND.replace("2 x", "1 x")
    _idle_until(watch, clock, 60.0)
    assert len(told) == 1  # changed, but told less than a minute ago
    _idle_until(watch, clock, 90.0)
    assert len(told) == 2 and "1 x {CPU: 1}" in told[1]
    _idle_until(watch, clock, 300.0)
    assert len(told) == 2  # unchanged: not repeated


def test_the_shapes_of_the_unplaced_demand_are_what_the_line_shows():
    status = _status(tasks=[({"CPU": 64.0}, 1), ({"CPU_group_0_def": 1.0}, 1)],
                     groups=[({"CPU": 6.0, "GPU": 0.0}, 1)], usage={"CPU": (8.0, 0.0)})
    assert ray_runtime.demand_shapes(status) == [{"CPU": 64.0}, {}, {"CPU": 6.0}]
    assert resource_shape(64) in ray_runtime.demand_shapes(status)


def test_a_task_larger_than_the_cluster_is_reported_and_stopped(ray_session, monkeypatch):
    """The session's Ray has max(8, 4 x cores) CPUs: a task asking for 64 stays unplaced; with a 3 s limit
    the wait says what waits and stops in one line, and the task is cancelled (no demand left behind)."""
    import ray

    monkeypatch.setattr(fanout, "WAIT_REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(fanout, "DEMAND_READ_EVERY_S", 0.5)
    told: list[str] = []
    monkeypatch.setattr(fanout, "_say", told.append)
    ref = ray.remote(num_cpus=64)(_nothing).remote()
    with pytest.raises(UnplacedTasksError) as failed:
        get_placed(ref, "big task", resource_shape(64), limit_s=3.0)
    assert told and told[0].startswith("waiting for resources: pending demand: tasks/actors 1 x {CPU: 64}")
    assert "Ray could not place the big task within 3 s" in str(failed.value)
    assert "\n" not in str(failed.value)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(ref, timeout=30)


def _nothing() -> None:
    return None
