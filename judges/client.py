"""The one shared OpenAI-compatible chat client used by readers and judges.

It owns retries (bounded, exponential backoff with full jitter), the concurrency limit, timeouts and the
seed. Backends only build messages and parse replies. The API key is read from the environment variable
named in ClientConfig and never logged.
"""
from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from judges.config import ClientConfig

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, str]]
    temperature: float = 0.0
    max_tokens: int = 16
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    attempts: int


class LLMRequestError(RuntimeError):
    """A request that failed for good (non-retryable status or retries exhausted)."""

    def __init__(self, message: str, status_code: int | None = None, attempts: int = 0):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class ContextLengthError(LLMRequestError):
    """The server rejected the prompt as longer than the model window (HTTP 400)."""


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Full-jitter exponential backoff: uniform(0, min(max, base * 2**attempt))."""
    return rng.uniform(0.0, min(max_s, base_s * (2**attempt)))


def _looks_like_context_overflow(body: str) -> bool:
    text = body.lower()
    return "maximum context length" in text or "context length" in text or "too long" in text


class LLMClient:
    """Thread-safe client; `chat` for one request, `map` to run many with bounded concurrency."""

    def __init__(self, config: ClientConfig, base_url: str | None = None):
        self.config = config
        url = base_url or config.base_url
        if not url:
            raise ValueError("no base URL: pass base_url or set ClientConfig.base_url")
        self.base_url = url.rstrip("/")
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(config.api_key_env)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        limits = httpx.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
        self._http = httpx.Client(headers=headers, timeout=config.timeout_s, limits=limits)
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": self.config.seed,
        }
        body.update(request.extra_body)
        return body

    def chat(self, request: ChatRequest) -> ChatResult:
        body = self.payload(request)
        last_error = "no attempt made"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(self._delay(attempt - 1))
            try:
                with self._slots:
                    response = self._http.post(f"{self.base_url}/chat/completions", json=body)
            except httpx.HTTPError as exc:  # connection reset, timeout, killed server ...
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code == 200:
                return self._result(response.json(), attempt + 1)
            last_error = f"HTTP {response.status_code}: {response.text[:500]}"
            if response.status_code == 400 and _looks_like_context_overflow(response.text):
                raise ContextLengthError(last_error, 400, attempt + 1)
            if response.status_code not in RETRYABLE_STATUS:
                raise LLMRequestError(last_error, response.status_code, attempt + 1)
        raise LLMRequestError(
            f"gave up after {self.config.max_retries + 1} attempts: {last_error}",
            attempts=self.config.max_retries + 1,
        )

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` (which calls `chat`) to every item with at most max_concurrency in flight."""
        items = list(items)
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _delay(self, attempt: int) -> float:
        with self._rng_lock:
            return backoff_delay(attempt, self.config.backoff_base_s, self.config.backoff_max_s, self._rng)

    @staticmethod
    def _result(data: dict[str, Any], attempts: int) -> ChatResult:
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        usage = data.get("usage") or {}
        return ChatResult(
            text=message.get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            attempts=attempts,
        )


def wait_until_ready(base_url: str, timeout_s: float, expected_models: Iterable[str] = (), api_key_env: str = "") -> list[str]:
    """Poll `{base_url}/models` until it answers and lists the expected models; TimeoutError otherwise."""
    expected = set(expected_models)
    headers = {}
    if api_key_env and os.environ.get(api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        try:
            response = httpx.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=10.0)
            if response.status_code == 200:
                served = [m.get("id") for m in response.json().get("data", [])]
                if expected <= set(served):
                    return served
                last = f"models served {served}, waiting for {sorted(expected - set(served))}"
            else:
                last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"LLM endpoint {base_url} not ready after {timeout_s:.0f}s ({last})")
        time.sleep(2.0)
