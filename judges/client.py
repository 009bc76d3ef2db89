"""The one shared OpenAI-compatible chat client used by readers and judges.

It owns retries (bounded, exponential backoff with full jitter), a circuit breaker, the concurrency limit,
timeouts and the seed. Backends only build messages and parse replies. The API key is read from the
environment variable named in ClientConfig and never logged. `LLMClient.stats` counts attempts, retries,
errors by kind and circuit openings, for the per-stage failure report.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

import httpx

from judges.config import ClientConfig

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# request fields of vLLM's own that OpenAI's API (and most hosted APIs) reject; sent only for
# `ChatRequest.continue_final` (`scoring: expected`'s continuation requests)
VLLM_ONLY_FIELDS = ("continue_final_message", "add_generation_prompt")
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, str]]
    temperature: float = 0.0
    max_tokens: int = 16
    extra_body: dict[str, Any] = field(default_factory=dict)
    top_logprobs: int = 0
    continue_final: bool = False
    seed: int | None = None  # None: the client's (ClientConfig.seed); a sampled judge repeat sets its own


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log-probability and the server's top alternatives at that
    position as (token text, log-probability) pairs, most likely first (the token itself among them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    attempts: int
    cached_tokens: int = 0  # prompt tokens vLLM served from its prefix cache (usage.prompt_tokens_details)
    logprobs: list[TokenLogprob] | None = None
    prompt_text: str | None = None  # the prompt as the server's chat template rendered it (vLLM's
    # `return_prompt_text: true`); None where the request did not ask or the server does not say


@dataclass
class CompletionResult:
    """One /v1/completions request with a list of prompts, one new token each: per prompt, the top
    alternatives at that token as (token text, log-probability) pairs (None where the server sent none)."""

    tops: list[tuple[tuple[str, float], ...] | None]
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    cached_tokens: int = 0


class LLMRequestError(RuntimeError):
    """A request that failed for good (non-retryable status or retries exhausted)."""

    def __init__(self, message: str, status_code: int | None = None, attempts: int = 0):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class ContextLengthError(LLMRequestError):
    """The server rejected the prompt as longer than the model window (HTTP 400)."""


class CircuitOpenError(LLMRequestError):
    """The endpoint failed too often in a row: the call was not sent (fail fast until the cooldown ends)."""


class CircuitBreaker:
    """Closed -> open after `threshold` consecutive failures -> after `cooldown_s` one probe call
    (half-open): its success closes the circuit, its failure opens it again."""

    def __init__(self, threshold: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic):
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self.opens = 0

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "half-open" if self._probing or self._clock() - self._opened_at >= self.cooldown_s else "open"

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() - self._opened_at < self.cooldown_s:
                return False
            self._probing = True
            return True

    def record_success(self) -> None:
        with self._lock:
            self._failures, self._opened_at, self._probing = 0, None, False

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._probing or (self._opened_at is None and self._failures >= self.threshold):
                self._opened_at = self._clock()
                self.opens += 1
            self._probing = False


@dataclass
class ClientStats:
    """What one client saw; `merge` adds up the stats of the clients of every shard of a stage."""

    calls: int = 0
    ok: int = 0
    failed: int = 0
    attempts: int = 0
    retries: int = 0
    short_circuited: int = 0
    circuit_opens: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the server's prefix cache
    errors: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "errors": dict(sorted(self.errors.items()))}

    @staticmethod
    def merge(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        total = ClientStats()
        counters = [f.name for f in fields(ClientStats) if f.name != "errors"]
        for part in parts:
            for name in counters:
                setattr(total, name, getattr(total, name) + int(part.get(name, 0)))
            total.errors.update(part.get("errors", {}))
        return total.as_dict()


class FairSlots:
    """A counting semaphore that hands a freed slot to the longest-waiting caller. threading.Semaphore
    lets a thread that just released take the slot again ahead of earlier waiters (measured in the load
    test: a few requests waited 3-4x the median)."""

    def __init__(self, slots: int):
        self._free = slots
        self._lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()

    def acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()  # the slot passes directly to the next caller in line
            else:
                self._free += 1

    def __enter__(self) -> FairSlots:  # noqa: PYI034
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def error_kind(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return "connection"
    return type(exc).__name__


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
        limits = httpx.Limits(max_connections=config.max_concurrency,
                              max_keepalive_connections=config.max_concurrency)
        self._http = httpx.Client(headers=headers, timeout=config.timeout_s, limits=limits)
        self._slots = FairSlots(config.max_concurrency)
        self._rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        self.breaker = CircuitBreaker(config.circuit_failure_threshold, config.circuit_cooldown_s)
        self._stats = ClientStats()
        self._stats_lock = threading.Lock()

    @property
    def stats(self) -> dict[str, Any]:
        with self._stats_lock:
            self._stats.circuit_opens = self.breaker.opens
            return self._stats.as_dict()

    def _count(self, **increments: int) -> None:
        with self._stats_lock:
            for name, value in increments.items():
                setattr(self._stats, name, getattr(self._stats, name) + value)

    def _error(self, kind: str) -> None:
        with self._stats_lock:
            self._stats.errors[kind] += 1

    def reset(self) -> None:
        """Start a new batch on this client: fresh stats and a closed circuit, while its connections are
        kept (an httpx client costs ~0.2 s to create, mostly its TLS context)."""
        with self._stats_lock:
            self._stats = ClientStats()
        self.breaker = CircuitBreaker(self.config.circuit_failure_threshold, self.config.circuit_cooldown_s)

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
            "seed": self.config.seed if request.seed is None else request.seed,
        }
        if request.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs
        if request.continue_final:
            # vLLM's chat extension: the last (assistant) message is continued, not closed and answered
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        body.update(request.extra_body)
        return body

    def chat(self, request: ChatRequest) -> ChatResult:
        return self._call("/chat/completions", self.payload(request), self._result)

    def complete(self, model: str, prompts: list[str], top_logprobs: int) -> CompletionResult:
        """One /v1/completions request: one greedy token after each of `prompts` (texts already in the
        model's chat format, so no special tokens are added), with `top_logprobs` alternatives. A list of
        prompts is one request (vLLM batches them into one engine step)."""
        body = {"model": model, "prompt": prompts, "max_tokens": 1, "temperature": 0.0,
                "logprobs": top_logprobs, "add_special_tokens": False, "seed": self.config.seed}
        return self._call("/completions", body, _completion_result)

    def _call(self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any], int], R]) -> R:
        self._count(calls=1)
        try:
            result = self._send(path, body, read)
        except LLMRequestError:
            self._count(failed=1)
            raise
        self._count(ok=1, prompt_tokens=result.prompt_tokens, cached_prompt_tokens=result.cached_tokens)
        return result

    def _send(self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any], int], R]) -> R:
        last_error = "no attempt made"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self._count(retries=1)
                time.sleep(self._delay(attempt - 1))
            if not self.breaker.allow():
                self._count(short_circuited=1)
                raise CircuitOpenError(f"circuit open after repeated failures ({last_error}); "
                                       f"not sent to {self.base_url}", attempts=attempt)
            self._count(attempts=1)
            outcome = self._attempt(path, body, read)
            if not isinstance(outcome, tuple):
                self.breaker.record_success()
                outcome.attempts = attempt + 1
                return outcome
            status, last_error = outcome
            if status is None or status >= 500:
                self.breaker.record_failure()
            else:  # the server is alive and answered: a client-side problem or backpressure
                self.breaker.record_success()
            if status == 400 and _looks_like_context_overflow(last_error):
                raise ContextLengthError(last_error, 400, attempt + 1)
            if status is not None and status not in RETRYABLE_STATUS:
                raise LLMRequestError(last_error, status, attempt + 1)
        raise LLMRequestError(
            f"gave up after {self.config.max_retries + 1} attempts: {last_error}",
            attempts=self.config.max_retries + 1,
        )

    def _attempt(self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any], int], R]
                 ) -> R | tuple[int | None, str]:
        """One POST: a result, or (HTTP status or None for transport/garbage, error text)."""
        try:
            with self._slots:
                response = self._http.post(f"{self.base_url}{path}", json=body)
        except httpx.HTTPError as exc:  # connection reset, timeout, killed server ...
            self._error(error_kind(exc))
            return None, f"{type(exc).__name__}: {exc}"
        if response.status_code != 200:
            self._error(f"http_{response.status_code}")
            return response.status_code, f"HTTP {response.status_code}: {response.text[:500]}"
        try:
            return read(response.json(), 0)
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
            self._error("invalid_body")
            return None, f"unreadable 200 response ({type(exc).__name__}): {response.text[:200]!r}"

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
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ValueError("no 'choices' in the response body")
        choice = data["choices"][0]
        message = choice.get("message") or {}
        usage = data.get("usage") or {}
        return ChatResult(
            text=message.get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            attempts=attempts,
            cached_tokens=cached_prompt_tokens(usage),
            logprobs=_token_logprobs(choice.get("logprobs")),
            prompt_text=data.get("prompt_text") if isinstance(data.get("prompt_text"), str) else None,
        )


PROBE_SCHEMA = {"type": "object", "properties": {"legs": {"type": "integer", "minimum": 0, "maximum": 100}},
                "required": ["legs"], "additionalProperties": False}


def response_format_refusal(client: LLMClient, model: str) -> str | None:
    """One tiny request with OpenAI's `response_format` (a JSON schema, as a judge's score schema): None
    where the endpoint answers in the schema, else why not (its HTTP error, or a reply outside the schema).
    An endpoint that is down (transport error, 5xx) raises LLMRequestError: that is no refusal."""
    question = [{"role": "user", "content": "How many legs has a cat?"}]
    schema = {"type": "json_schema", "json_schema": {"name": "probe", "schema": PROBE_SCHEMA}}
    try:
        result = client.chat(ChatRequest(model, question, max_tokens=24,
                                         extra_body={"response_format": schema}))
    except LLMRequestError as exc:
        if exc.status_code is None or exc.status_code >= 500:
            raise
        return " ".join(str(exc).split())[:200]
    try:
        reply = json.loads(result.text)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or type(reply.get("legs")) is not int:
        return f"it answered outside the schema: {result.text[:80]!r}"
    return None


def cached_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """usage.prompt_tokens_details.cached_tokens: what the server's prefix cache saved. vLLM reports it
    with `enable_prompt_tokens_details` (infra/serve_configs); a server that does not report it counts 0."""
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0


def _completion_result(data: dict[str, Any], attempts: int) -> CompletionResult:
    """The legacy completions body: `choices[i].logprobs.top_logprobs[0]`, a {token text: log-probability}
    map, for the prompt of index i; the prefix-cached tokens of all the prompts (estimated, below)."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("no 'choices' in the response body")
    tops: dict[int, tuple[tuple[str, float], ...] | None] = {}
    for position, choice in enumerate(data["choices"]):
        block = (choice.get("logprobs") or {}).get("top_logprobs") or [None]
        alternatives = ((str(token), float(logprob)) for token, logprob in (block[0] or {}).items())
        ranked = tuple(sorted(alternatives, key=lambda alt: -alt[1]))
        tops[int(choice.get("index", position))] = ranked or None
    usage = data.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    # vLLM reports the prefix-cached tokens of the last prompt only; the prompts of one request share all but
    # their last digits (judges/scoring.py), so each is counted at that figure
    cached = min(prompt_tokens, cached_prompt_tokens(usage) * len(tops))
    return CompletionResult([tops.get(i) for i in range(len(tops))], prompt_tokens,
                            int(usage.get("completion_tokens") or 0), attempts, cached)


def _token_logprobs(block: dict[str, Any] | None) -> list[TokenLogprob] | None:
    """The OpenAI `choices[0].logprobs.content` list, or None when the server sent none."""
    if not block or block.get("content") is None:
        return None
    return [TokenLogprob(str(item["token"]), float(item["logprob"]),
                         tuple((str(alt["token"]), float(alt["logprob"]))
                               for alt in item.get("top_logprobs") or ()))
            for item in block["content"]]
