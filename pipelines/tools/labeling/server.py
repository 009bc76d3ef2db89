"""The page's HTTP server: the page and its JSON API (/api/state, /api/label, /api/skip, and
/api/decisions: an active design's settled and open comparisons, and whether labeling can stop), every
request checked against the server's Access before anything is read or written."""
from __future__ import annotations

import ipaddress
import json
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from pipelines.tools.labeling.access import TOKEN_HEADER, Access, bearer_token, checked_token
from pipelines.tools.labeling.metric import LabelError
from pipelines.tools.labeling.store import LabelStore
from pipelines.tools.labeling.page import PAGE

MAX_BODY_BYTES = 64 * 1024  # a question's marks are a few hundred bytes


def _lan_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing), None when offline."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never reached, only routed
            return probe.getsockname()[0]
        except OSError:
            return None


class LabelServer(ThreadingHTTPServer):
    """The page's server: `url` (with the token) is what the start line prints, `access` what every
    request is checked against; `beyond_loopback` when other machines can reach it."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], token: str):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        bound, port = self.server_address[:2]
        self.token = token
        self.access = Access.of(address[0], bound, port, token)
        ip = ipaddress.ip_address(bound)
        self.beyond_loopback = not ip.is_loopback
        shown = (_lan_address() or socket.gethostname()) if ip.is_unspecified else str(ip)
        self.url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/?token={token}"

    @property
    def store(self) -> LabelStore:
        """The store its handlers read and write (make_server's)."""
        return self.RequestHandlerClass.store


def make_server(store: LabelStore, host: str = "127.0.0.1", port: int = 0, default_annotator: str = "",
                token: str | None = None) -> LabelServer:
    """The page's server (port 0: a free one; `server.url` says where, with the token: a fresh random one
    unless `token` is given). The caller runs `serve_forever()` and closes it."""
    token = checked_token(token)

    class Handler(_Handler):
        pass

    Handler.store, Handler.default_annotator = store, default_annotator
    return LabelServer((host, port), Handler, token)


class _Handler(BaseHTTPRequestHandler):
    store: LabelStore
    default_annotator: str
    server: LabelServer
    timeout = 30  # seconds a client may take to send its request: a stalled one holds no thread for long

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        page = url.path in ("/", "/index.html")
        if not self._admitted(parse_qs(url.query).get("token", [None])[0] if page else None):
            return
        if page:
            self._send(HTTPStatus.OK, PAGE.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/state":
            annotator = parse_qs(url.query).get("annotator", [""])[0]
            self._json(HTTPStatus.OK, self._with_default(self.store.state(annotator)))
        elif url.path == "/api/decisions":
            self._json(HTTPStatus.OK, self.store.decisions())
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {url.path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._admitted():
            return
        path = urlparse(self.path).path
        if path not in ("/api/label", "/api/skip"):
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}"})
            return
        try:
            body = self._json_body()
            if not isinstance(body, dict):
                raise LabelError("the request must be a JSON object")
            query_id = str(body.get("question_id", ""))
            if path == "/api/label":
                marks = body.get("marks")
                if not isinstance(marks, dict):
                    raise LabelError("marks must be an object {answer number: mark}")
                state = self.store.label(body.get("annotator"), query_id, marks)
            else:
                state = self.store.skip(body.get("annotator"), query_id)
        except LabelError as exc:
            self._json(exc.status, {"error": str(exc)})
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"the request is no JSON: {exc}"})
        else:
            self._json(HTTPStatus.OK, self._with_default(state))

    def _admitted(self, page_token: str | None = None) -> bool:
        """The request names this server, comes from its own origin (or none) and carries the token (a
        header; the page's URL may give it as ?token=); else refused, with nothing read or written."""
        refusal = self._refusal(page_token)
        if refusal:
            self.close_connection = True
            self._json(HTTPStatus.FORBIDDEN, {"error": refusal})
        return refusal is None

    def _refusal(self, page_token: str | None) -> str | None:
        access, host = self.server.access, self.headers.get("Host")
        if not access.names_this_server(host):
            return "refused: the Host header does not name this server (open the URL `ccrs label` printed)"
        origin = self.headers.get("Origin")
        if origin is not None and not access.same_origin(origin, host):
            return "refused: a request from another origin than the page's"
        given = (self.headers.get(TOKEN_HEADER) or bearer_token(self.headers.get("Authorization"))
                 or page_token)
        if given is None:
            return "refused: no token; open the URL `ccrs label` printed (its ?token=... included)"
        if not access.holds_token(given):
            return "refused: wrong token; open the URL the running `ccrs label` printed"
        return None

    def _json_body(self) -> Any:
        """The request's JSON body, read up to its declared length, which must be MAX_BODY_BYTES or less."""
        if self.headers.get_content_type() != "application/json":
            raise LabelError("the request's Content-Type must be application/json",
                             HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
        declared = self.headers.get("Content-Length")
        if declared is None or self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise LabelError("the request needs a Content-Length", HTTPStatus.LENGTH_REQUIRED)
        if not declared.strip().isdigit():
            self.close_connection = True
            raise LabelError(f"bad Content-Length {declared!r}")
        if int(declared) > MAX_BODY_BYTES:
            self.close_connection = True
            raise LabelError(f"the request is over {MAX_BODY_BYTES} bytes",
                             HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return json.loads(self.rfile.read(int(declared)) or b"{}")

    def _with_default(self, state: dict) -> dict:
        return {**state, "default_annotator": self.default_annotator}

    def _json(self, status: HTTPStatus, data: dict) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        for name, value in (("Content-Type", content_type), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
                            ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY")):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Quiet: the console shows the URL and the verdict, not a line per request (nor its token)."""


