"""Is an OpenAI-compatible endpoint up? The one readiness poll of the project (the OpenAI `/models` route).

Used by infra/serving.py (the Serve app, an external endpoint) and, through judges/client.py, by the judge
stage before it requeues work.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterable

import httpx


def bearer_headers(api_key_env: str) -> dict[str, str]:
    """The Authorization header from the key in `api_key_env`, or none when that variable is unset."""
    key = os.environ.get(api_key_env) if api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


def served_models(
    base_url: str, timeout_s: float = 5.0, api_key_env: str = ""
) -> tuple[list[str] | None, str]:
    """One GET `{base_url}/models`: (the model ids served, "") or (None, why there is no answer)."""
    headers = bearer_headers(api_key_env)
    try:
        response = httpx.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return None, f"HTTP {response.status_code}"
    return [m.get("id") for m in response.json().get("data", [])], ""


def already_serving(base_url: str, model_ids: Iterable[str]) -> bool:
    """True when the endpoint answers now and serves every one of `model_ids` (one request, no waiting)."""
    served, _ = served_models(base_url)
    return served is not None and set(model_ids) <= set(served)


def wait_until_ready(
    base_url: str, timeout_s: float, expected_models: Iterable[str] = (), api_key_env: str = ""
) -> list[str]:
    """Poll `{base_url}/models` until it answers and lists the expected models; TimeoutError otherwise."""
    expected = set(expected_models)
    deadline = time.monotonic() + timeout_s
    while True:
        served, last = served_models(base_url, timeout_s=10.0, api_key_env=api_key_env)
        if served is not None:
            if expected <= set(served):
                return served
            last = f"models served {served}, waiting for {sorted(expected - set(served))}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"LLM endpoint {base_url} not ready after {timeout_s:.0f}s ({last})")
        time.sleep(2.0)


# stable across server restarts: vLLM's OpenAI server reports the loaded weights (`root`) and the window;
# Ray Serve LLM's model card has `metadata` (model id, context length) and does not name the weights
IDENTITY_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "metadata")


def endpoint_identity(base_url: str, model: str, api_key_env: str = "", timeout_s: float = 10.0) -> dict:
    """What the endpoint says it serves as `model`: its /models entry's stable fields (vLLM reports the
    weights it loaded as `root`, and `max_model_len`; Ray Serve LLM its card's `metadata`) and, where the
    server answers `GET /version` (vLLM's OpenAI server does), its version. Part of the generate and judge
    stage keys and of the judgment cache key, so that other weights behind the same model id are not served
    from earlier outputs. {} when the endpoint lists no such model (nothing to tell apart)."""
    headers = bearer_headers(api_key_env)
    base = base_url.rstrip("/")
    try:
        response = httpx.get(f"{base}/models", headers=headers, timeout=timeout_s)
        entries = response.json().get("data", []) if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError):
        entries = []
    entry = next((item for item in entries if isinstance(item, dict) and item.get("id") == model), None)
    if entry is None:
        return {}
    identity = {key: entry[key] for key in IDENTITY_FIELDS if entry.get(key) is not None}
    try:
        version = httpx.get(f"{base.removesuffix('/v1')}/version", headers=headers, timeout=timeout_s)
        if version.status_code == 200 and isinstance(version.json(), dict) and version.json().get("version"):
            identity["server_version"] = str(version.json()["version"])
    except (httpx.HTTPError, ValueError):
        pass
    return identity
