"""A fault-injecting HTTP proxy for an OpenAI-compatible endpoint (chaos testing of the judge path).

It listens on loopback, forwards every request to the upstream server and, for a share of the
`/chat/completions` calls, injects a fault instead: HTTP 500, a hang past the client's timeout, a dropped
connection (closed without a response) or a 200 whose body is not JSON. The choice is drawn from a
`random.Random(seed)` in arrival order; `outage` makes the next N calls fail whatever the rates say (a dead
endpoint). `/models` is always forwarded, so readiness checks see the real server.

    python -m tests.fault_proxy --upstream http://127.0.0.1:8000/v1 --port 8100 --http-500 0.1 --drop 0.1

`GET /_proxy/stats` returns what was injected and forwarded, as JSON.
"""
from __future__ import annotations

import argparse
import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

FAULT_KINDS = ("http_500", "timeout", "drop", "garbage")


@dataclass
class FaultPlan:
    """Shares of chat calls that get each fault (their sum at most 1) and an optional outage."""

    http_500: float = 0.0
    timeout: float = 0.0
    drop: float = 0.0
    garbage: float = 0.0
    hang_s: float = 5.0
    outage: int = 0
    outage_kind: str = "http_500"
    seed: int = 0

    def __post_init__(self) -> None:
        shares = [self.http_500, self.timeout, self.drop, self.garbage]
        if any(s < 0 for s in shares) or sum(shares) > 1.0 + 1e-9:
            raise ValueError(f"fault shares must be >= 0 and sum to at most 1, got {shares}")
        if self.outage_kind not in FAULT_KINDS:
            raise ValueError(f"outage_kind must be one of {FAULT_KINDS}, got {self.outage_kind!r}")


@dataclass
class ProxyStats:
    received: int = 0
    forwarded: int = 0
    injected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))

    def as_dict(self) -> dict:
        return {"received": self.received, "forwarded": self.forwarded, "injected": dict(self.injected)}


class FaultProxy:
    """Start with `start()` (or as a context manager); `base_url` is the proxy's /v1 URL."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None, host: str = "127.0.0.1", port: int = 0):
        self.upstream = upstream.rstrip("/")
        self.stats = ProxyStats()
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=600.0)
        self.set_plan(plan or FaultPlan())
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{urlsplit(self.upstream).path}"

    def set_plan(self, plan: FaultPlan) -> None:
        with self._lock:
            self.plan = plan
            self._rng = random.Random(plan.seed)
            self._outage_left = plan.outage

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def draw(self, path: str) -> str | None:
        """The fault for this request (None: forward it)."""
        with self._lock:
            self.stats.received += 1
            if not path.endswith("/chat/completions"):
                return None
            if self._outage_left > 0:
                self._outage_left -= 1
                kind: str | None = self.plan.outage_kind
            else:
                kind = self._pick(self._rng.random())
            if kind:
                self.stats.injected[kind] += 1
            return kind

    def _pick(self, u: float) -> str | None:
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self.plan, kind)
            if u < edge:
                return kind
        return None

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> httpx.Response:
        with self._lock:
            self.stats.forwarded += 1
        target = f"{self.upstream}{path[len(urlsplit(self.upstream).path):]}"
        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        return self._http.request(method, target, headers=keep, content=body)


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: the tests print their own summary
            pass

        def do_GET(self) -> None:
            if self.path == "/_proxy/stats":
                self._send(200, json.dumps(proxy.stats.as_dict()).encode(), "application/json")
            else:
                self._handle(None)

        def do_POST(self) -> None:
            self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _handle(self, body: bytes | None) -> None:
            fault = proxy.draw(self.path)
            if fault == "drop":
                self._drop()
            elif fault == "timeout":
                time.sleep(proxy.plan.hang_s)
                self._drop()
            elif fault == "http_500":
                self._send(500, b'{"error": {"message": "injected fault", "code": 500}}', "application/json")
            elif fault == "garbage":
                self._send(200, b"<html>502 Bad Gateway</html>\x00\xff", "application/json")
            else:
                try:
                    response = proxy.forward(self.command, self.path, dict(self.headers), body)
                except httpx.HTTPError as exc:
                    self._send(502, json.dumps({"error": {"message": f"upstream: {exc}"}}).encode(),
                               "application/json")
                    return
                self._send(response.status_code, response.content,
                           response.headers.get("content-type", "application/json"))

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (its timeout): nothing to deliver

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="upstream /v1 URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    for kind in FAULT_KINDS:
        parser.add_argument(f"--{kind.replace('_', '-')}", type=float, default=0.0, dest=kind,
                            help=f"share of chat calls answered with a {kind} fault")
    parser.add_argument("--hang-s", type=float, default=5.0)
    parser.add_argument("--outage", type=int, default=0, help="fail the next N chat calls")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plan = FaultPlan(args.http_500, args.timeout, args.drop, args.garbage, args.hang_s, args.outage,
                     seed=args.seed)
    proxy = FaultProxy(args.upstream, plan, args.host, args.port).start()
    print(f"fault proxy at {proxy.base_url} -> {proxy.upstream}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
