"""A counting HTTP stub of chat completions, for the load test's client cap and retries."""
from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest

from tests.loopback import JsonHandler, LoopbackServer


class _Stub(JsonHandler):
    """Chat completions that take `delay_s`; counts requests in flight and answers `statuses` in turn."""

    lock = threading.Lock()
    in_flight = peak = hits = 0
    delay_s = 0.05
    statuses: ClassVar[list[int]] = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
            status = cls.statuses[cls.hits % len(cls.statuses)] if cls.statuses else 200
            cls.hits += 1
        time.sleep(cls.delay_s)
        body = {"choices": [{"message": {"content": '{"score": 50}'}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3}} if status == 200 else {"error": "busy"}
        with cls.lock:
            cls.in_flight -= 1
        self.send_json(status, body)


@pytest.fixture
def stub():
    handler = type("Stub", (_Stub,), {"statuses": [], "in_flight": 0, "peak": 0, "hits": 0})
    server = LoopbackServer(handler, "/v1")
    yield handler, server.url
    server.close()
