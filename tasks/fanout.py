"""Fan LLM requests out from Ray tasks: bounded concurrency, per-shard checkpoints, requeue after outages.

Items are cut into contiguous shards (never splitting a group of items that share a prompt prefix, when
the caller names the groups: `prefix_order` puts such items next to each other); at most
`max_shards_in_flight` Ray tasks run at once, each with one LLMClient holding a share of
ClientConfig.max_concurrency, so the total number of requests in flight never exceeds it. Each finished
shard is handed to `on_shard` at once (stages persist it there, so a killed run resumes inside the
stage). Items whose result `retry_if` calls a transport failure are sent again, for
ClientConfig.requeue_rounds rounds, each after the endpoint answers its /models route again.
"""
from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from infra.readiness import wait_until_ready
from judges.client import ClientStats, LLMClient
from judges.config import ClientConfig

T = TypeVar("T")
R = TypeVar("R")
ShardCallback = Callable[[list[int], list[Any]], None]


@dataclass
class FanOutReport:
    items: int = 0
    shards: int = 0
    requeued: list[int] = field(default_factory=list)
    endpoint_not_back: str | None = None
    client: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- prefix-aware order (items sharing a prompt prefix go out together) ----------------------------------

def prefix_order(groups: Sequence[Hashable], within: Sequence[Any] | None = None) -> list[int]:
    """Item indices with every group's items next to each other: groups in order of first appearance,
    inside a group by `within` (e.g. the metric, so the prompts of one template follow each other), then
    by position. Sent in this order, requests sharing a prefix reach the server close together in time,
    while its prefix cache still holds that prefix."""
    first: dict[Hashable, int] = {}
    for i, group in enumerate(groups):
        first.setdefault(group, i)
    return sorted(range(len(groups)),
                  key=lambda i: (first[groups[i]], within[i] if within is not None else 0, i))


def group_shards(indices: Sequence[int], shard_size: int,
                 groups: Sequence[Hashable] | None = None) -> list[list[int]]:
    """Contiguous shards of at most `shard_size` indices; with `groups`, a run of consecutive items of
    one group is never split (a run longer than shard_size is a shard of its own), so one Ray task sends
    a whole group to the server and a checkpointed shard holds whole groups."""
    if groups is None:
        return [list(indices[i:i + shard_size]) for i in range(0, len(indices), shard_size)]
    shards: list[list[int]] = []
    current: list[int] = []
    for _, run in itertools.groupby(indices, key=lambda i: groups[i]):
        members = list(run)
        if current and len(current) + len(members) > shard_size:
            shards.append(current)
            current = []
        current += members
    if current:
        shards.append(current)
    return shards


def _run_shard(fn: Callable[[LLMClient, T], R], items: list[T], client_cfg: ClientConfig,
               base_url: str) -> tuple[list[R], dict[str, Any]]:
    client = shard_client(client_cfg, base_url)
    results = client.map(lambda item: fn(client, item), items)
    return results, client.stats


_CLIENTS: dict[tuple[str, str, int], LLMClient] = {}


def shard_client(client_cfg: ClientConfig, base_url: str) -> LLMClient:
    """The worker process's client for this endpoint and configuration, reset for the new shard (fresh
    stats, closed circuit: as a new client would be) but keeping its connections: creating an httpx
    client per shard cost ~0.2 s of CPU, i.e. most of the fan-out's time at paper scale."""
    key = (base_url, client_cfg.model_dump_json(), hash(os.environ.get(client_cfg.api_key_env)))
    client = _CLIENTS.get(key)
    if client is None:
        for old in _CLIENTS.values():
            old.close()
        _CLIENTS.clear()
        client = _CLIENTS[key] = LLMClient(client_cfg, base_url)
    client.reset()
    return client


_REMOTE_SHARD = None


def _remote_shard():
    """The Ray remote function, defined once per process (num_cpus=0: shards only wait on HTTP, so
    logical CPUs stay free for the Serve replicas; Ray re-runs a shard whose worker died)."""
    global _REMOTE_SHARD
    if _REMOTE_SHARD is None:
        import ray

        _REMOTE_SHARD = ray.remote(num_cpus=0, max_retries=3)(_run_shard)
    return _REMOTE_SHARD


def fan_out(fn: Callable[[LLMClient, T], R], items: list[T], client_cfg: ClientConfig, base_url: str,
            progress: bool = False, desc: str = "requests", **options: Any) -> list[R]:
    """Run fn(client, item) for every item in Ray tasks; results in item order."""
    return fan_out_report(fn, items, client_cfg, base_url, progress=progress, desc=desc, **options)[0]


def fan_out_report(
    fn: Callable[[LLMClient, T], R],
    items: Sequence[T],
    client_cfg: ClientConfig,
    base_url: str,
    progress: bool = False,
    desc: str = "requests",
    shard_size: int | None = None,
    max_shards_in_flight: int | None = None,
    on_shard: ShardCallback | None = None,
    retry_if: Callable[[R], bool] | None = None,
    groups: Sequence[Hashable] | None = None,
) -> tuple[list[R], FanOutReport]:
    """`groups` (one key per item, e.g. from the items' prefix group): shards never split a run of
    consecutive items of one group (`group_shards`); order the items with `prefix_order` first."""
    report = FanOutReport(items=len(items))
    results: list[Any] = [None] * len(items)
    if not items:
        return results, report
    from infra.ray_runtime import ensure_ray

    ensure_ray()
    shard_size = shard_size or client_cfg.shard_size
    in_flight = max(
        1, min(max_shards_in_flight or client_cfg.max_shards_in_flight, math.ceil(len(items) / shard_size))
    )
    shard_cfg = client_cfg.model_copy(
        update={"max_concurrency": max(1, math.ceil(client_cfg.max_concurrency / in_flight))}
    )
    run = _Pass(fn, items, shard_cfg, base_url, shard_size, in_flight, on_shard, results, groups)
    bar = _progress_bar(len(items), desc) if progress else None
    run.run(list(range(len(items))), bar)
    for _ in range(client_cfg.requeue_rounds if retry_if else 0):
        failed = [i for i, value in enumerate(results) if retry_if(value)]
        if not failed:
            break
        try:
            wait_until_ready(base_url, client_cfg.requeue_wait_s, api_key_env=client_cfg.api_key_env)
        except TimeoutError as exc:
            report.endpoint_not_back = str(exc)
            break
        report.requeued.append(len(failed))
        run.run(failed, None)
    if bar:
        bar.close()
    report.shards = run.shards
    report.client = ClientStats.merge(run.stats)
    return results, report


class _Pass:
    """Submits shards of the given indices with at most `in_flight` Ray tasks running."""

    def __init__(self, fn, items, shard_cfg, base_url, shard_size, in_flight, on_shard, results, groups=None):
        self.fn, self.items, self.shard_cfg, self.base_url = fn, items, shard_cfg, base_url
        self.groups = groups
        self.shard_size, self.in_flight, self.on_shard, self.results = (
            shard_size, in_flight, on_shard, results
        )
        self.shards = 0
        self.stats: list[dict[str, Any]] = []

    def run(self, indices: list[int], bar) -> None:
        import ray

        remote = _remote_shard()
        queue = iter(group_shards(indices, self.shard_size, self.groups))
        pending: dict[Any, list[int]] = {}

        def submit() -> None:
            shard = next(queue, None)
            if shard is not None:
                ref = remote.remote(self.fn, [self.items[j] for j in shard], self.shard_cfg, self.base_url)
                pending[ref] = shard
                self.shards += 1

        for _ in range(self.in_flight):
            submit()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(done[0])
            values, stats = ray.get(done[0])
            self._finish(shard, values, stats, bar)
            submit()

    def _finish(self, shard: list[int], values: list[Any], stats: dict[str, Any], bar) -> None:
        for j, value in zip(shard, values):
            self.results[j] = value
        self.stats.append(stats)
        if self.on_shard is not None:
            self.on_shard(shard, values)
        if bar:
            bar.update(len(shard))


def _progress_bar(total: int, desc: str):
    from tqdm import tqdm

    from infra.console import progress_stream

    return tqdm(total=total, desc=desc, unit="req", file=progress_stream())
