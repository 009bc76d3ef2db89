"""Fault injection in front of the REAL server: a loopback proxy answers HTTP 500, or drops the
connection, for the first N requests and then forwards to the CPU vLLM stack."""
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from judges.client import ChatRequest, LLMClient, LLMRequestError
from judges.config import ClientConfig

pytestmark = pytest.mark.llm


class FaultyProxy:
    def __init__(self, upstream: str, failures: int, mode: str):
        self.upstream, self.failures, self.mode = upstream.rstrip("/"), failures, mode
        self.seen = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with proxy.lock:
                    proxy.seen += 1
                    fail = proxy.seen <= proxy.failures
                if fail and proxy.mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fail:
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = httpx.post(proxy.upstream + self.path.removeprefix("/v1"), content=body,
                                      headers={"Content-Type": "application/json"}, timeout=120)
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(upstream.content)))
                self.end_headers()
                self.wfile.write(upstream.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("mode", ["http500", "drop"])
def test_failed_requests_are_retried_until_the_real_server_answers(llm_endpoint, mode):
    proxy = FaultyProxy(llm_endpoint.base_url, failures=2, mode=mode)
    try:
        cfg = ClientConfig(max_retries=3, backoff_base_s=0.05, backoff_max_s=0.2, timeout_s=60)
        with LLMClient(cfg, proxy.url) as client:
            result = client.chat(ChatRequest(llm_endpoint.judge_model,
                                             [{"role": "user", "content": "Say hello."}], max_tokens=8))
        assert result.attempts == 3 and proxy.seen == 3
        assert result.text and result.completion_tokens > 0
    finally:
        proxy.close()


def test_retries_are_bounded(llm_endpoint):
    proxy = FaultyProxy(llm_endpoint.base_url, failures=10, mode="http500")
    try:
        cfg = ClientConfig(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.05)
        request = ChatRequest(llm_endpoint.judge_model, [{"role": "user", "content": "hi"}])
        with LLMClient(cfg, proxy.url) as client, pytest.raises(LLMRequestError, match="gave up after 3"):
            client.chat(request)
        assert proxy.seen == 3
    finally:
        proxy.close()
