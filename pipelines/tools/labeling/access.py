"""Who the page's server answers: the token (--token, else a fresh random one), the host names a Host
header may give, the page's own origin."""
from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pipelines.options import UsageError

TOKEN_HEADER = "X-CCRS-Token"  # or `Authorization: Bearer TOKEN`; the page itself also takes ?token=
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,256}")  # URL-safe: it goes into the printed URL as it is
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HOST_CHARACTERS = re.compile(r"[a-z0-9.:\[\]_-]+")


def checked_token(token: str | None) -> str:
    """The server's secret: `token` (--token) when given, checked, else a fresh random one."""
    if token is None:
        return secrets.token_urlsafe(32)
    if not TOKEN_PATTERN.fullmatch(token):
        raise UsageError("--token needs 16 to 256 characters among A-Z a-z 0-9 _ - (it goes into the URL)")
    return token


@dataclass(frozen=True)
class Access:
    """Who the page's server answers: a request whose Host names this server (a DNS-rebinding page's
    Host names its own domain), that comes from no other origin, and that carries the server's token."""

    token: str = field(repr=False)  # kept out of its repr (a log line)
    port: int
    names: frozenset[str]  # the host names a Host header may give
    any_address: bool = False  # bound to every interface: any IP address names it too

    @classmethod
    def of(cls, given_host: str, bound: str, port: int, token: str) -> Access:
        address = ipaddress.ip_address(bound)
        names = {given_host.strip("[]").lower(), str(address)}
        if address.is_loopback or address.is_unspecified:
            names |= LOOPBACK_NAMES
        if address.is_unspecified:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return cls(token, port, frozenset(names - {""}), address.is_unspecified)

    def names_this_server(self, host_header: str | None) -> bool:
        name, port = _name_and_port(host_header or "")
        return port == self.port and (name in self.names or (self.any_address and _is_address(name)))

    def same_origin(self, origin: str, host_header: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme.lower() == "http" and _name_and_port(rest) == _name_and_port(host_header)

    def holds_token(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _name_and_port(value: str) -> tuple[str, int | None]:
    """("host", port) of a Host header or an origin's host[:port] (port 80 when none); ("", None) if bad."""
    value = value.strip().lower()
    if not HOST_CHARACTERS.fullmatch(value):
        return "", None
    try:
        parts = urlsplit(f"//{value}")
        return parts.hostname or "", parts.port or 80
    except ValueError:
        return "", None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, value = (authorization or "").partition(" ")
    return (value.strip() or None) if scheme.lower() == "bearer" else None
