"""Connecting to Ray: the one start-up path of the project.

`ensure_ray()` joins an existing cluster (an address, $RAY_ADDRESS, a `ray job submit` driver) or starts
a local in-process one with `local_num_cpus()` logical CPUs. `start_detached_head()` starts a head that
outlives this process (`ccrs serve up`); its pid is recorded under $CCRS_HOME/serve/ so that
`stop_detached_head()` (`ccrs serve down`) stops exactly that head. Ray is imported lazily.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Loopback only, so token auth is off: the shared ~/.ray/auth_token file can be rewritten by any other Ray
# cluster started on the machine, which locks the driver out of this one.
HEAD_ENV = {"RAY_AUTH_MODE": "disabled"}
_LOCAL_STARTED: list[bool] = []  # set when ensure_ray() started an in-process Ray (its logs are ours alone)
COPIED_LOG_MAX_BYTES = 20 * 2**20  # larger log files are copied from their last 20 MiB on


def local_num_cpus() -> int:
    """Logical CPUs of a Ray started here: above the real count, so that the Serve ingress and the vLLM
    replica both fit (shared/notes/cpu-llm-serving.md, pitfall 5)."""
    return max(8, (os.cpu_count() or 2) * 4)


def ensure_ray(
    address: str | None = None, num_cpus: int | None = None, *, connect_timeout_s: float = 0.0
) -> str:
    """Initialise Ray once; returns the dashboard URL (or '' when Ray has none).

    With an address (argument or $RAY_ADDRESS) join that cluster, retrying for `connect_timeout_s` seconds
    (a head that is still starting; TimeoutError after that); else start a local Ray with `num_cpus`
    (default `local_num_cpus()`) logical CPUs and no dashboard."""
    import ray

    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        kwargs: dict = {"ignore_reinit_error": True, "log_to_driver": False}
        if address:
            kwargs["address"] = address
            _init_with_retry(kwargs, connect_timeout_s)
        else:
            kwargs["num_cpus"] = num_cpus or local_num_cpus()
            kwargs["include_dashboard"] = False
            ray.init(**kwargs)
            _LOCAL_STARTED.append(True)
    context = ray.get_runtime_context()
    return getattr(context, "dashboard_url", "") or ""


def copy_session_logs(dest: Path) -> list[Path]:
    """Copy the log files of the Ray this process started (GCS, raylet, workers, the Serve controller,
    proxy and replicas, vLLM's engine output) into dest; large files keep their tail. Nothing for a Ray
    joined at an address: its session logs belong to whoever started it (and may be on another machine)."""
    import ray

    if not (_LOCAL_STARTED and ray.is_initialized()):
        return []
    from ray._private import worker

    node = getattr(worker, "_global_node", None)
    source = Path(node.get_logs_dir_path()) if node is not None else None
    if source is None or not source.is_dir():
        return []
    copied = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, open(target, "wb") as out:
            size = path.stat().st_size
            if size > COPIED_LOG_MAX_BYTES:
                src.seek(size - COPIED_LOG_MAX_BYTES)
            out.write(src.read())
        copied.append(target)
    return copied


def _init_with_retry(kwargs: dict, timeout_s: float) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.init(**kwargs)
            return
        except (ConnectionError, RuntimeError) as exc:
            if timeout_s <= 0:
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not join Ray at {kwargs['address']}: {exc}") from exc
            time.sleep(2.0)


# --- a detached head (`ccrs serve up` / `ccrs serve down`) ------------------------------------------------

def _state_file() -> Path:
    from infra.process import ccrs_home

    return ccrs_home() / "serve" / "ray_head.json"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    # An exited process whose parent has not reaped it yet (a zombie) is not alive.
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def detached_head() -> dict | None:
    """{"pid", "address"} of the head `start_detached_head()` left running, or None."""
    path = _state_file()
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state if pid_alive(int(state["pid"])) else None


def start_detached_head(num_cpus: int | None = None) -> dict:
    """`ray start --head --block` in its own session; killing that pid stops exactly this head."""
    temp_dir = _state_file().parent / "ray-tmp"
    temp_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(_state_file().parent / "ray_head.log", "ab")  # noqa: SIM115 - handed to the head process
    env = {**os.environ, **HEAD_ENV}
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}",
         "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus or local_num_cpus()}",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
    )
    state = {"pid": proc.pid, "address": f"127.0.0.1:{port}"}
    _state_file().write_text(json.dumps(state))
    return state


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_detached_head(head: dict) -> None:
    """Stop the `ray start --block` process we started (SIGTERM: it tears its head down), then kill
    whatever is left in its process group: exactly that head's processes, nothing else."""
    pid = int(head["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _wait_pid_exit(pid, 30.0)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _state_file().unlink(missing_ok=True)


def _wait_pid_exit(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.5)


def connect_ray(address: str | None = None, start_if_missing: bool = True, detached: bool = False) -> bool:
    """Join the Ray cluster to work on; False when there is none and we may not start one.

    In order: Ray already initialised here; `address` or $RAY_ADDRESS; the detached head of
    `ccrs serve up`; else (when allowed) a new detached head (`detached=True`) or an in-process Ray."""
    import ray

    if ray.is_initialized():
        return True
    head = detached_head()
    address = address or os.environ.get("RAY_ADDRESS")
    if not address and head:
        os.environ.update(HEAD_ENV)
        address = head["address"]
    if address:
        ensure_ray(address, connect_timeout_s=60.0)
        return True
    if not start_if_missing:
        return False
    if detached:
        head = start_detached_head()
        os.environ.update(HEAD_ENV)
        try:
            ensure_ray(head["address"], connect_timeout_s=90.0)
        except TimeoutError:
            stop_detached_head(head)
            raise
        return True
    ensure_ray()
    return True


def shutdown_ray() -> None:
    """Shut down the Ray this process joined or started (nothing when Ray was never imported)."""
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()


# --- what the cluster cannot place (a Serve app or a stage waiting for resources) --------------------------

def _shown(resource: str) -> bool:
    """The resources a cluster is sized by, not Ray's per-node and per-placement-group bookkeeping."""
    return not (resource.startswith("node:") or "_group_" in resource or resource == "object_store_memory")


def _amount(resource: str, value: float) -> str:
    return f"{value / 2**30:.1f} GiB" if resource == "memory" else f"{value:g}"


def _bundle(bundle: dict[str, float]) -> str:
    shown = sorted((k, v) for k, v in bundle.items() if _shown(k) and v)
    return "{" + ", ".join(f"{k}: {_amount(k, v)}" for k, v in shown) + "}"


def _requests(demands: list) -> list[str]:
    """`count x {resources}` per request shape; a request for bookkeeping resources only (an actor waiting
    for its placement group's bundle, which the group's own demand already shows) is left out."""
    return [f"{r.count} x {_bundle(r.bundle)}" for demand in demands for r in demand.bundles_by_count
            if _bundle(r.bundle) != "{}"]


def _free(names: set[str], usage: dict) -> list[str]:
    out = []
    for name in sorted(names):
        total, used = (usage[name].total, usage[name].used) if name in usage else (0.0, 0.0)
        out.append(f"{name} {_amount(name, total - used)} of {_amount(name, total)}")
    return out


def describe_pending_demand(status) -> str:
    """One line from an autoscaler `ClusterStatus` (ray.autoscaler.v2.schema): the demand Ray cannot place
    (tasks and actors, placement groups) and the free amount of each resource it asks for (CPU and GPU
    always); '' when nothing waits."""
    demands = status.resource_demands
    tasks, groups = _requests(demands.ray_task_actor_demand), _requests(demands.placement_group_demand)
    if not (tasks or groups):
        return ""
    asked = {k for demand in demands.ray_task_actor_demand + demands.placement_group_demand
             for r in demand.bundles_by_count for k, v in r.bundle.items() if _shown(k) and v}
    usage = {u.resource_name: u for u in status.cluster_resource_usage}
    parts = ([f"tasks/actors {', '.join(tasks)}"] if tasks else []) + (
        [f"placement groups {', '.join(groups)}"] if groups else [])
    free = _free(asked | ({"CPU", "GPU"} & set(usage)), usage)
    return f"pending demand: {'; '.join(parts)}; free: {', '.join(free)}"


def demand_shapes(status) -> list[dict[str, float]]:
    """The resources of each request shape Ray cannot place now (tasks, actors, placement-group bundles),
    as describe_pending_demand shows them: a stage compares them with what its own tasks ask for."""
    demands = status.resource_demands
    return [{k: float(v) for k, v in r.bundle.items() if _shown(k) and v}
            for demand in demands.ray_task_actor_demand + demands.placement_group_demand
            for r in demand.bundles_by_count]


def read_pending_demand() -> tuple[str, list[dict[str, float]]]:
    """(describe_pending_demand's line, demand_shapes) of the Ray cluster this process joined, from the GCS
    as `ray status` reads it; ('', []) when nothing waits or Ray cannot say."""
    import ray

    try:
        from ray.autoscaler.v2.sdk import get_cluster_status

        status = get_cluster_status(ray.get_runtime_context().gcs_address)
        return describe_pending_demand(status), demand_shapes(status)
    except Exception:  # noqa: BLE001 - a report for the user, never a reason to fail a run
        return "", []


def pending_demand() -> str:
    """What the Ray cluster this process joined cannot place now, in one line (describe_pending_demand);
    '' when nothing waits or Ray cannot say."""
    return read_pending_demand()[0]
