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


class JudgeProxy(LoopbackServer):
    """An OpenAI-compatible endpoint in front of a real one (the session's vLLM server) that behaves as
    other APIs do: a request carrying one of the `refused` fields is answered with HTTP 400, as OpenAI's
    API answers an unrecognized argument; with `logprobs=False` every reply comes without log-probabilities,
    as from servers that ignore the request for them. `bodies`: every chat request it received."""

    def __init__(self, upstream: str, refused: tuple[str, ...] = (), logprobs: bool = True):
        import httpx

        bodies: list[dict] = []

        class Handler(JsonHandler):
            def do_GET(self):  # noqa: N802
                response = httpx.get(f"{upstream}{self.path.removeprefix('/v1')}", timeout=60)
                self.send_json(response.status_code, response.content)

            def do_POST(self):  # noqa: N802
                body = self.read_json()
                bodies.append(body)
                unknown = [key for key in refused if key in body]
                if unknown:
                    message = f"Unrecognized request argument supplied: {unknown[0]}"
                    self.send_json(400, {"error": {"message": message, "type": "invalid_request_error"}})
                    return
                response = httpx.post(f"{upstream}{self.path.removeprefix('/v1')}", json=body, timeout=120)
                if logprobs or response.status_code != 200:
                    self.send_json(response.status_code, response.content)
                    return
                reply = response.json()
                for choice in reply.get("choices", []):
                    choice["logprobs"] = None
                self.send_json(200, reply)

        super().__init__(Handler, "/v1")
        self.bodies = bodies
