"""Fan LLM requests out from Ray tasks: bounded concurrency, per-shard checkpoints, requeue after outages.

Items are cut into contiguous shards (never splitting a group of items that share a prompt prefix, when
the caller names the groups: `prefix_order` puts such items next to each other); at most
`max_shards_in_flight` Ray tasks run at once, each with one LLMClient holding a share of
ClientConfig.max_concurrency, so the total number of requests in flight never exceeds it. Each finished
shard is handed to `on_shard` at once (stages persist it there, so a killed run resumes inside the
stage). Items whose result `retry_if` calls a transport failure are sent again, for
ClientConfig.requeue_rounds rounds, each after the endpoint answers its /models route again.

Every wait of a stage on its Ray tasks goes through `wait_any` / `get_placed` (`PlacementWatch`): tasks the
cluster cannot place are reported (the pending demand, the free resources) and, after a limit, stop the
run in one line (`UnplacedTasksError`) instead of waiting forever.
"""
from __future__ import annotations

import itertools
import math
import os
import threading
import time
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
    lost_shards: int = 0  # shards whose Ray worker or node died under them (sent again)
    shards_by_node: dict[str, int] = field(default_factory=dict)  # finished shards per Ray node id
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


def _run_shard(fn: Callable[[LLMClient, T], R], items: list[T], client_cfg: ClientConfig, base_url: str,
               progress: Any = None, weigh: Callable[[R], int] | None = None
               ) -> tuple[list[R], dict[str, Any]]:
    client = shard_client(client_cfg, base_url)
    report = _ProgressReporter(progress, weigh)
    results = client.map(lambda item: report(fn(client, item)), items)
    report.flush()
    return results, {**client.stats, "node": _node_id()}


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"


class _ProgressReporter:
    """Inside a shard: adds each finished item's weight (judgments) to the driver's progress counter, at
    most every PROGRESS_INTERVAL_S (one actor call per item would cost more than the bar is worth)."""

    def __init__(self, counter: Any, weigh: Callable[[Any], int] | None):
        self.counter, self.weigh = counter, weigh or (lambda _: 1)
        self.pending, self.last = 0, time.monotonic()
        self.lock = threading.Lock()

    def __call__(self, result: R) -> R:
        if self.counter is not None:
            with self.lock:
                self.pending += self.weigh(result)
                if time.monotonic() - self.last >= PROGRESS_INTERVAL_S:
                    self.flush()
        return result

    def flush(self) -> None:
        if self.counter is not None and self.pending:
            self.counter.add.remote(self.pending)
            self.pending, self.last = 0, time.monotonic()


PROGRESS_INTERVAL_S = 0.5


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
    logical CPUs stay free for the Serve replicas), spread over the nodes that can take them (on a
    cluster the requests leave from every node, not one). Not retried by Ray (max_retries=0): `_Pass` sends a
    shard whose worker or node died again itself, so that the stage can count it (Ray's own retry is
    invisible to the driver, and a nightly run on spot nodes should say what it lost)."""
    global _REMOTE_SHARD
    if _REMOTE_SHARD is None:
        import ray

        _REMOTE_SHARD = ray.remote(num_cpus=0, max_retries=0, scheduling_strategy="SPREAD")(_run_shard)
    return _REMOTE_SHARD


_PROGRESS_ACTOR = None


def _progress_counter():
    """A Ray actor the shards add finished judgments to, polled by the driver's progress bar."""
    import ray

    global _PROGRESS_ACTOR
    if _PROGRESS_ACTOR is None:
        @ray.remote(num_cpus=0)
        class ProgressCounter:
            def __init__(self):
                self.count = 0

            def add(self, n: int) -> None:
                self.count += n

            def take(self) -> int:
                count, self.count = self.count, 0
                return count

        _PROGRESS_ACTOR = ProgressCounter
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return _PROGRESS_ACTOR.options(scheduling_strategy=here).remote()  # on the driver's node: it outlives
    # the loss of a worker node


def on_driver_node(fn: Callable[..., R], *args: Any) -> R:
    """fn(*args) in a Ray task on the driver's node (where the run directory is) and its result: work
    whose memory grows with the inputs (reading a whole Parquet row group) stays out of the driver, which
    keeps only bookkeeping. Retried once if its worker dies; `fn` must be idempotent."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from infra.ray_runtime import ensure_ray

    ensure_ray()
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    # num_cpus=0: a head node started with no CPUs to offer (common on KubeRay) must still run it
    task = ray.remote(num_cpus=0, max_retries=1, scheduling_strategy=here)(_call)
    return get_placed(task.remote(fn, args), f"task {fn.__name__}", resource_shape(num_cpus=0))


def _call(fn: Callable[..., R], args: tuple) -> R:
    return fn(*args)


def fan_out(fn: Callable[[LLMClient, T], R], items: list[T], client_cfg: ClientConfig, base_url: str,
            progress: bool = False, desc: str = "requests", **options: Any) -> list[R]:
    """Run fn(client, item) for every item in Ray tasks; results in item order."""
    return fan_out_report(fn, items, client_cfg, base_url, progress=progress, desc=desc, **options)[0]


def fan_out_report(
    fn: Callable[[LLMClient, T], R],
    items: Sequence[T],
    client_cfg: ClientConfig,
    base_url: str,
    progress: Any = False,
    desc: str = "requests",
    shard_size: int | None = None,
    max_shards_in_flight: int | None = None,
    on_shard: ShardCallback | None = None,
    retry_if: Callable[[R], bool] | None = None,
    groups: Sequence[Hashable] | None = None,
    weigh: Callable[[R], int] | None = None,
) -> tuple[list[R], FanOutReport]:
    """`groups` (one key per item, e.g. from the items' prefix group): shards never split a run of
    consecutive items of one group (`group_shards`); order the items with `prefix_order` first.
    `progress`: True for a bar of its own, or a tqdm bar to advance (the judge stage's, across batches);
    it moves as items finish inside the shards, by `weigh(result)` each (default 1)."""
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
    own_bar = progress is True
    bar = progress_bar(len(items), desc) if own_bar else given_bar(progress)
    meter = _Meter(bar, weigh)
    run = _Pass(fn, items, shard_cfg, base_url, shard_size, in_flight, on_shard, results, groups, meter)
    try:
        run.run(list(range(len(items))))
        _requeue(run, results, client_cfg, base_url, retry_if, report)
    finally:
        meter.settle(results)
        if own_bar:
            bar.close()
    report.shards, report.lost_shards, report.shards_by_node = run.shards, run.lost, run.by_node
    report.client = ClientStats.merge(run.stats)
    return results, report


def _requeue(run: _Pass, results: list[Any], client_cfg: ClientConfig, base_url: str,
             retry_if: Callable[[Any], bool] | None, report: FanOutReport) -> None:
    """Up to ClientConfig.requeue_rounds passes over the items whose result is a transport failure, each
    once the endpoint answers its /models route again."""
    for _ in range(client_cfg.requeue_rounds if retry_if else 0):
        failed = [i for i, value in enumerate(results) if retry_if(value)]
        if not failed:
            return
        try:
            wait_until_ready(base_url, client_cfg.requeue_wait_s, api_key_env=client_cfg.api_key_env)
        except TimeoutError as exc:
            report.endpoint_not_back = str(exc)
            return
        report.requeued.append(len(failed))
        run.run(failed)


class _Meter:
    """Moves a progress bar as items finish inside the shards (a Ray actor counts them, the driver polls
    it while it waits), and sets it exactly once the fan-out is over."""

    def __init__(self, bar: Any, weigh: Callable[[Any], int] | None):
        self.bar, self.weigh = bar, weigh or (lambda _: 1)
        self.start = bar.n if bar is not None else 0
        self.counter = _progress_counter() if bar is not None else None

    def poll(self) -> int:
        """Items finished inside the shards since the last poll (0 without a counter)."""
        if self.counter is None:
            return 0
        import ray

        try:
            finished = ray.get(self.counter.take.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            self.counter = None  # the bar then moves by finished shards only; nothing else depends on it
            return 0
        self.bar.update(finished)
        return finished

    def settle(self, results: list[Any]) -> None:
        """The bar at exactly what finished; the counter actor ended."""
        if self.bar is not None:
            done = self.start + sum(self.weigh(value) for value in results if value is not None)
            self.bar.update(done - self.bar.n)  # negative where a lost shard's items were counted twice
        if self.counter is not None:
            import ray

            ray.kill(self.counter)
            self.counter = None


def lost_worker_errors() -> tuple[type[BaseException], ...]:
    """What ray.get raises for a task or actor call whose worker process or node died (not an error of
    the called code): the fan-out's shards and the retrieval stages' actor calls are sent again on these."""
    from ray import exceptions

    return tuple(getattr(exceptions, name) for name in
                 ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                  "RayActorError", "ActorUnavailableError") if hasattr(exceptions, name))


# --- waiting for tasks the cluster may not be able to place -----------------------------------------------

class UnplacedTasksError(TimeoutError):
    """Ray could not place a stage's tasks or actors within the limit: one line with the pending demand and
    the cluster's free resources (a TimeoutError: the commands report it in one line, exit 1)."""


SCHEDULE_TIMEOUT_S = ClientConfig.model_fields["schedule_timeout_s"].default  # where no config names one
WAIT_REPORT_AFTER_S = 20.0  # demand unplaced after this long waits for resources (placing takes seconds)
WAIT_REPORT_EVERY_S = 60.0
DEMAND_READ_EVERY_S = 5.0  # a GCS call: not at every poll
WAIT_POLL_S = 0.5


def resource_shape(num_cpus: float = 0, num_gpus: float = 0,
                   resources: dict[str, float] | None = None) -> dict[str, float]:
    """What one task or actor asks Ray for, as Ray's pending demand shows it (zero amounts left out)."""
    shape = {"CPU": num_cpus, "GPU": num_gpus, **(resources or {})}
    return {name: float(amount) for name, amount in shape.items() if amount}


def _shape_text(shape: dict[str, float]) -> str:
    return "{" + ", ".join(f"{name}: {amount:g}" for name, amount in sorted(shape.items())) + "}"


DemandReader = Callable[[], tuple[str, list[dict[str, float]]]]  # (the line, the unplaced shapes)


def _read_demand() -> tuple[str, list[dict[str, float]]]:
    from infra.ray_runtime import read_pending_demand

    return read_pending_demand()


def _say(text: str) -> None:
    from infra.console import say

    say(f"ray: {text}", err=True)


class PlacementWatch:
    """Watches a wait on a stage's Ray tasks (or its actors' calls). While none of them finishes and Ray
    reports unplaced demand of exactly the shape they ask for (`asks`), it says what waits (after
    WAIT_REPORT_AFTER_S, again when that changes, at most once a minute) and raises UnplacedTasksError once
    the demand has stayed unplaced for `limit_s`. A task that runs, however slowly, asks Ray for nothing
    more and never counts; nor do tasks that ask for no resources. `read_demand` (the pending-demand line
    and shapes) and `clock` are Ray's and time.monotonic unless given."""

    def __init__(self, what: str, asks: dict[str, float], limit_s: float | None = None, *,
                 limit_name: str = "", read_demand: DemandReader | None = None,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] | None = None):
        self.what, self.asks = what, resource_shape(resources=asks)
        self.limit_s = SCHEDULE_TIMEOUT_S if limit_s is None else limit_s
        self.limit_name = limit_name
        self.read_demand, self.clock, self.say = read_demand or _read_demand, clock, say or _say
        self.told, self.told_at = "", -math.inf
        self.progressed()

    def progressed(self) -> None:
        """One of the tasks finished (or was seen running): the wait starts over."""
        self.idle_since, self.unplaced_since, self.read_at = self.clock(), None, -math.inf

    def idle(self) -> None:
        """A poll found nothing finished: read the demand (at most every DEMAND_READ_EVERY_S), tell, fail."""
        now = self.clock()
        if not self.asks or now - self.read_at < DEMAND_READ_EVERY_S:
            return
        self.read_at = now
        line, shapes = self.read_demand()
        if self.asks not in shapes:
            self.unplaced_since = None
            return
        self.unplaced_since = now if self.unplaced_since is None else self.unplaced_since
        if line != self.told and now - self.idle_since >= WAIT_REPORT_AFTER_S \
                and now - self.told_at >= (WAIT_REPORT_EVERY_S if self.told else 0.0):
            self.say(f"waiting for resources: {line} ({self.what}, each asking for {_shape_text(self.asks)})")
            self.told, self.told_at = line, now
        if now - self.unplaced_since >= self.limit_s:
            raise UnplacedTasksError(self._failure(line))

    def _failure(self, line: str) -> str:
        limit = f"{self.limit_name}={self.limit_s:g}s" if self.limit_name else f"{self.limit_s:g} s"
        return (f"Ray could not place the {self.what} within {limit}, for lack of free resources ({line}; "
                f"each asks for {_shape_text(self.asks)}); give the cluster more (sizing a head: "
                "docs/cluster.md) or ask for less")


def watch_poll(watch: PlacementWatch, finished: bool, refs: list) -> None:
    """Tell `watch` what a poll found; where it gives up, `refs` are cancelled first (a task left pending
    would take the resources whenever they free up)."""
    if finished:
        watch.progressed()
        return
    try:
        watch.idle()
    except UnplacedTasksError:
        _cancel(refs)
        raise


def _cancel(refs: list) -> None:
    import ray

    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:  # noqa: BLE001 - best effort on the way out: the error names the real problem
            pass


def wait_any(refs: list, watch: PlacementWatch, poll_s: float = WAIT_POLL_S) -> list:
    """ray.wait until one of `refs` is done (the done ones), `watch` told of every poll."""
    import ray

    while True:
        done, _ = ray.wait(refs, num_returns=1, timeout=poll_s)
        watch_poll(watch, bool(done), refs)
        if done:
            return done


def get_placed(ref: Any, what: str, asks: dict[str, float], limit_s: float | None = None,
               limit_name: str = "") -> Any:
    """ray.get(ref) of one task, which stops in one line (UnplacedTasksError) where Ray cannot place it
    within `limit_s` (default SCHEDULE_TIMEOUT_S); `asks`: its resources (resource_shape)."""
    import ray

    wait_any([ref], PlacementWatch(what, asks, limit_s, limit_name=limit_name))
    return ray.get(ref)


class _Pass:
    """Submits shards of the given indices with at most `in_flight` Ray tasks running; a shard whose
    worker or node dies is sent again (up to ClientConfig.shard_attempts times), on whatever node Ray
    finds."""

    POLL_S = 0.5

    def __init__(self, fn, items, shard_cfg, base_url, shard_size, in_flight, on_shard, results, groups,
                 meter: _Meter):
        self.fn, self.items, self.shard_cfg, self.base_url = fn, items, shard_cfg, base_url
        self.groups, self.meter = groups, meter
        self.shard_size, self.in_flight, self.on_shard, self.results = (
            shard_size, in_flight, on_shard, results
        )
        self.shards = self.lost = 0
        self.by_node: dict[str, int] = {}
        self.stats: list[dict[str, Any]] = []

    def _submit(self, shard: list[int], attempt: int, pending: dict[Any, tuple[list[int], int]]) -> None:
        remote = _remote_shard()
        if self.shard_cfg.shard_resources:
            remote = remote.options(resources=dict(self.shard_cfg.shard_resources))
        ref = remote.remote(self.fn, [self.items[j] for j in shard], self.shard_cfg, self.base_url,
                            self.meter.counter, self.meter.weigh if self.meter.counter is not None else None)
        pending[ref] = (shard, attempt)

    def run(self, indices: list[int]) -> None:
        import ray

        lost_worker = lost_worker_errors()
        queue = iter(group_shards(indices, self.shard_size, self.groups))
        pending: dict[Any, tuple[list[int], int]] = {}

        def submit_next() -> None:
            shard = next(queue, None)
            if shard is not None:
                self._submit(shard, 1, pending)
                self.shards += 1

        asks = resource_shape(resources=self.shard_cfg.shard_resources)  # num_cpus=0 (_remote_shard)
        watch = PlacementWatch("fan-out's shard tasks", asks, self.shard_cfg.schedule_timeout_s,
                               limit_name="client.schedule_timeout_s")
        for _ in range(self.in_flight):
            submit_next()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=self.POLL_S)
            items_finished = self.meter.poll()  # a shard whose items finish has started: it is placed
            watch_poll(watch, bool(done or items_finished), list(pending))
            if not done:
                continue
            shard, attempt = pending.pop(done[0])
            try:
                values, stats = ray.get(done[0])
            except lost_worker:
                if attempt >= self.shard_cfg.shard_attempts:
                    raise
                self.lost += 1
                self._submit(shard, attempt + 1, pending)
                continue
            self._finish(shard, values, stats)
            submit_next()

    def _finish(self, shard: list[int], values: list[Any], stats: dict[str, Any]) -> None:
        for j, value in zip(shard, values):
            self.results[j] = value
        node = stats.pop("node", "local")
        self.by_node[node] = self.by_node.get(node, 0) + 1
        self.stats.append(stats)
        if self.on_shard is not None:
            self.on_shard(shard, values)


def given_bar(progress: Any) -> Any:
    """The bar a caller handed in as `progress`, or None for True, False or None. (`bar in (True, None)`
    would raise: a tqdm bar compares itself with the other side's `_comparable`.)"""
    return None if progress is None or isinstance(progress, bool) else progress


def progress_bar(total: int, desc: str, unit: str = "req"):
    from tqdm import tqdm

    from infra.console import progress_stream

    return tqdm(total=total, desc=desc, unit=unit, file=progress_stream())
