"""The client of a user's own RAG service (a `systems: [{kind: endpoint, ...}]` entry of a run config).

The protocol (docs/evaluate.md): POST `{"question_id": ..., "question": ...}` as JSON to the service's URL;
the reply is JSON `{"answer": "...", "contexts": ["...", ...]}` (`contexts` optional: the passages the
answer was generated from, best first). A transport error, a 5xx or 429 is retried with exponential
backoff up to `max_retries`; any other status or a reply off the protocol fails at once. Header values
come from environment variables (the secrets file), named in the config, never written anywhere.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import httpx

from judges.config import EndpointSystemConfig

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


class ServiceError(RuntimeError):
    """The service gave no usable answer; `attempts` requests were sent."""

    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class ServiceAnswer:
    answer: str
    contexts: list[str]
    attempts: int
    seconds: float


def service_headers(config: EndpointSystemConfig) -> dict[str, str]:
    """Header values from their environment variables; a variable that is not set is a config error."""
    missing = [env for env in config.headers.values() if env not in os.environ]
    if missing:
        raise ValueError(f"system {config.name}: header variable(s) {missing} are not set (secrets file or "
                         "environment)")
    return {header: os.environ[env] for header, env in config.headers.items()}


class ServiceClient:
    def __init__(self, config: EndpointSystemConfig, backoff_base_s: float = 0.5, backoff_max_s: float = 8.0):
        self.config = config
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self._http = httpx.Client(timeout=config.timeout_s, headers=service_headers(config))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, question_id: str, question: str) -> ServiceAnswer:
        started = time.perf_counter()
        body = {"question_id": question_id, "question": question}
        problem = "not sent"
        for attempt in range(1, self.config.max_retries + 2):
            try:
                response = self._http.post(self.config.url, json=body)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    answer, contexts = parse_reply(response, attempt)
                    return ServiceAnswer(answer, contexts, attempt, time.perf_counter() - started)
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRIED_STATUSES:
                    raise ServiceError(problem, attempt)
            if attempt <= self.config.max_retries:
                time.sleep(min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1)))
        raise ServiceError(f"{problem} (after {self.config.max_retries + 1} attempts)",
                           self.config.max_retries + 1)


def parse_reply(response: httpx.Response, attempt: int) -> tuple[str, list[str]]:
    try:
        reply = response.json()
    except ValueError as exc:
        raise ServiceError(f"reply is not JSON: {response.text[:200]!r}", attempt) from exc
    if not isinstance(reply, dict) or not isinstance(reply.get("answer"), str):
        raise ServiceError(f'reply lacks a string "answer": {str(reply)[:200]}', attempt)
    contexts = reply.get("contexts") or []
    if not isinstance(contexts, list) or not all(isinstance(text, str) for text in contexts):
        raise ServiceError(f'"contexts" must be a list of strings, got {str(contexts)[:200]}', attempt)
    return reply["answer"], contexts
