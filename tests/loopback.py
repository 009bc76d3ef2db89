"""Real HTTP servers on loopback for the tests that need one (a RAG service, an alert webhook, a proxy in
front of the real judge): a quiet JSON request handler and a server that runs in a thread until closed."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread


class JsonHandler(BaseHTTPRequestHandler):
    def read_json(self):
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, status: int, payload) -> None:
        """`payload`: JSON-able, or the bytes of a body already encoded."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep the test output clean
        pass


class LoopbackServer:
    """`handler` served on 127.0.0.1 at a free port; `url` is its base URL plus `path`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str = ""):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
