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


class EndpointIdentityError(RuntimeError):
    """The endpoint gave no answer to what it serves: a key built without it would differ from one built
    with it, so nothing is keyed on a guess."""


def endpoint_identity(base_url: str, model: str, api_key_env: str = "", timeout_s: float = 10.0,
                      attempts: int = 4) -> dict:
    """What the endpoint says it serves as `model`: its /models entry's stable fields (vLLM reports the
    weights it loaded as `root`, and `max_model_len`; Ray Serve LLM its card's `metadata`) and, where the
    server answers `GET /version` (vLLM's OpenAI server does), its version. Part of the generate and judge
    stage keys and of the judgment cache key, so that other weights behind the same model id are not served
    from earlier outputs. {} when the endpoint lists no such model (nothing to tell apart). A timeout or a
    5xx (a server still busy with a killed run's requests) is asked again, `attempts` times with a doubling
    timeout, then raises EndpointIdentityError: an identity that silently lost a field would change the
    stage keys and lose a resumable checkpoint."""
    headers = bearer_headers(api_key_env)
    base = base_url.rstrip("/")
    models = _answer(f"{base}/models", headers, timeout_s, attempts)
    body = _json(models) if models.status_code == 200 else None
    entries = body.get("data", []) if isinstance(body, dict) else []
    entry = next((item for item in entries if isinstance(item, dict) and item.get("id") == model), None)
    if entry is None:
        return {}
    identity = {key: entry[key] for key in IDENTITY_FIELDS if entry.get(key) is not None}
    version = _answer(f"{base.removesuffix('/v1')}/version", headers, timeout_s, attempts)
    body = _json(version) if version.status_code == 200 else None
    if isinstance(body, dict) and body.get("version"):
        identity["server_version"] = str(body["version"])
    return identity


def _answer(url: str, headers: dict[str, str], timeout_s: float, attempts: int) -> httpx.Response:
    """The endpoint's answer other than a 5xx, asked up to `attempts` times with a doubling timeout."""
    last = ""
    for attempt in range(attempts):
        try:
            response = httpx.get(url, headers=headers, timeout=timeout_s * 2 ** attempt)
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code < 500:
            return response
        last = f"HTTP {response.status_code}"
    raise EndpointIdentityError(f"GET {url} gave no answer in {attempts} tries ({last}): the endpoint's "
                                "identity (part of the stage keys) is unknown, so no stage keyed on it ran")


def _json(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return None
