"""infra/ray_runtime.py: the one Ray start-up path, checked against a fake `ray` module (no cluster)."""
from __future__ import annotations

import sys
import types

import pytest

from infra import ray_runtime


class FakeRay(types.ModuleType):
    """`ray.init` records its kwargs; the first `failures` calls raise ConnectionError."""

    def __init__(self, failures: int = 0):
        super().__init__("ray")
        self.calls: list[dict] = []
        self.failures = failures
        self.initialized = False

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            raise ConnectionError("head not up yet")
        self.initialized = True

    def get_runtime_context(self):
        return types.SimpleNamespace(dashboard_url="")


@pytest.fixture
def fake_ray(monkeypatch, tmp_path):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path))  # no detached head recorded
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_runtime.time, "sleep", lambda _s: None)

    def install(failures: int = 0) -> FakeRay:
        fake = FakeRay(failures)
        monkeypatch.setitem(sys.modules, "ray", fake)
        return fake

    return install


def test_local_ray_gets_more_logical_cpus_than_the_machine(fake_ray, monkeypatch):
    monkeypatch.setattr(ray_runtime.os, "cpu_count", lambda: 2)
    assert ray_runtime.local_num_cpus() == 8
    monkeypatch.setattr(ray_runtime.os, "cpu_count", lambda: 16)
    assert ray_runtime.local_num_cpus() == 64
    ray = fake_ray()
    assert ray_runtime.ensure_ray() == ""
    assert ray.calls == [{"ignore_reinit_error": True, "log_to_driver": False, "num_cpus": 64,
                          "include_dashboard": False}]
    ray_runtime.ensure_ray()  # already initialised: nothing more
    assert len(ray.calls) == 1


def test_explicit_num_cpus_and_address(fake_ray, monkeypatch):
    ray = fake_ray()
    ray_runtime.ensure_ray(num_cpus=3)
    assert ray.calls[0]["num_cpus"] == 3
    ray = fake_ray()
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    ray_runtime.ensure_ray()
    assert ray.calls == [{"ignore_reinit_error": True, "log_to_driver": False, "address": "10.0.0.1:6379"}]


def test_joining_retries_only_with_a_connect_timeout(fake_ray):
    ray = fake_ray(failures=2)
    ray_runtime.ensure_ray("127.0.0.1:1", connect_timeout_s=60)
    assert len(ray.calls) == 3 and ray.is_initialized()
    fake_ray(failures=1)
    with pytest.raises(ConnectionError, match="head not up yet"):  # default: one try, the error as is
        ray_runtime.ensure_ray("127.0.0.1:1")
    fake_ray(failures=10**6)
    with pytest.raises(TimeoutError, match="could not join Ray at 127.0.0.1:1: head not up yet"):
        ray_runtime.ensure_ray("127.0.0.1:1", connect_timeout_s=0.01)


def test_connect_ray_order(fake_ray, monkeypatch):
    ray = fake_ray()
    assert ray_runtime.connect_ray(start_if_missing=False) is False and ray.calls == []
    assert ray_runtime.connect_ray("127.0.0.1:7") is True
    assert ray.calls[0]["address"] == "127.0.0.1:7"
    ray = fake_ray()
    assert ray_runtime.connect_ray() is True  # nothing to join: an in-process Ray
    assert ray.calls[0]["num_cpus"] == ray_runtime.local_num_cpus()


def test_serving_joins_ray_through_ray_runtime(fake_ray):
    from infra.serving import ServingConfig, connect_ray

    ray = fake_ray()
    assert connect_ray(ServingConfig(profile="cpu", ray_address="127.0.0.1:8"))
    assert ray.calls[0]["address"] == "127.0.0.1:8"


def test_a_dead_recorded_head_is_ignored(fake_ray, tmp_path):
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "ray_head.json").write_text('{"pid": 999999999, "address": "127.0.0.1:5"}')
    assert ray_runtime.detached_head() is None
    ray = fake_ray()
    assert ray_runtime.connect_ray(start_if_missing=False) is False and ray.calls == []


# --- what the cluster cannot place: the line a waiting Serve app reports ---------------------------------

def _status(tasks=(), groups=(), usage=None):
    """An autoscaler ClusterStatus as the GCS reports it (Ray's own schema classes, no cluster)."""
    from ray.autoscaler.v2.schema import (
        ClusterStatus,
        PlacementGroupResourceDemand,
        RayTaskActorDemand,
        ResourceDemandSummary,
        ResourceRequestByCount,
        ResourceUsage,
    )

    demands = ResourceDemandSummary(
        ray_task_actor_demand=[RayTaskActorDemand([ResourceRequestByCount(b, n)]) for b, n in tasks],
        placement_group_demand=[PlacementGroupResourceDemand([ResourceRequestByCount(b, n)],
                                                             "pg1:PACK|PENDING") for b, n in groups])
    usage = [ResourceUsage(name, total, used) for name, (total, used) in (usage or {}).items()]
    return ClusterStatus(cluster_resource_usage=usage, resource_demands=demands)


def test_the_pending_demand_and_the_free_resources_it_asks_for_in_one_line():
    usage = {"CPU": (2.0, 2.0), "memory": (8 * 2**30, 0.0), "node:127.0.0.1": (1.0, 0.0),
             "CPU_group_0_abc": (2.0, 1.0), "object_store_memory": (1e9, 0.0)}
    in_a_group = {"CPU_group_0_def": 1.0}  # an actor waiting for its placement group: shown by the group
    status = _status(tasks=[({"CPU": 1.0}, 1), (in_a_group, 1)], groups=[({"CPU": 6.0, "GPU": 0.0}, 1)],
                     usage=usage)
    assert ray_runtime.describe_pending_demand(status) == (
        "pending demand: tasks/actors 1 x {CPU: 1}; placement groups 1 x {CPU: 6}; free: CPU 0 of 2")


def test_a_resource_the_cluster_lacks_shows_as_none_free():
    status = _status(groups=[({"GPU": 4.0, "accelerator_type:A100-80G": 0.001}, 2)],
                     usage={"CPU": (5.0, 1.0), "memory": (2**31, 2**30)})
    assert ray_runtime.describe_pending_demand(status) == (
        "pending demand: placement groups 2 x {GPU: 4, accelerator_type:A100-80G: 0.001}; "
        "free: CPU 4 of 5, GPU 0 of 0, accelerator_type:A100-80G 0 of 0")


def test_nothing_waiting_is_an_empty_line():
    assert ray_runtime.describe_pending_demand(_status(usage={"CPU": (5.0, 3.0)})) == ""
