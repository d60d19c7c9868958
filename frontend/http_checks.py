"""HTTP-level checks before any JSON is read (validation ladder, step 1): Host (421), body size
(413), Origin (403), method (405), Content-Type (400), Accept (406). ``GET`` and ``DELETE`` go on
only with an ``Mcp-Session-Id`` (a 2025-era session's stream and its end).

The edge (``frontend.asgi_adapter``) never reads more than ``MCPQ_MAX_BODY_BYTES`` + 1 bytes, so the
size check here, on what was read, is the only one.

Host and Origin are the DNS-rebinding defence the MCP transport asks for: a page on
``attacker.example`` whose name is made to resolve to this server's address still sends its own
``Host`` and ``Origin``. Only ``/mcp`` is guarded (the health probes and ``/metrics`` answer any
``Host``: load balancers and scrapers address an instance by its IP).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpq.frontend.http_messages import HttpReply, HttpRequest
from mcpq.shared.errors import INVALID_REQUEST, McpError
from mcpq.shared.settings import Settings

#: The names of this machine's loopback addresses, as ``Host`` and ``Origin`` carry them.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _plain(status: int, text: str, **headers: str) -> HttpReply:
    return HttpReply(status, text.encode(), "text/plain; charset=utf-8", dict(headers))


def split_host(value: str) -> tuple[str, str] | None:
    """``Host`` (or an allowlist entry) as ``(name, port)``, lower-cased, IPv6 in brackets, a
    trailing dot dropped; ``port`` is ``""`` when absent. ``None``: not a host at all."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value.partition("]")
        name += bracket
        port = rest[1:] if rest.startswith(":") else None if rest else ""
    elif value.count(":") > 1:  # a bare IPv6 literal (only in configuration)
        name, port = f"[{value}]", ""
    else:
        name, _, port = value.partition(":")
        name = name.rstrip(".")
    if not name or port is None or (port and not port.isdigit()):
        return None
    # A Host is a name or an address, never a userinfo, path or list.
    if any(c in name for c in "@/\\,; \t") or (name.startswith("[") and not name.endswith("]")):
        return None
    return name, port


@dataclass(frozen=True)
class Addressing:
    """Which ``Host`` and ``Origin`` values ``/mcp`` serves, from the settings (built once)."""

    any_host: bool
    hosts: frozenset[tuple[str, str]]  # (name, port); port "" matches any port
    any_origin: bool
    origins: frozenset[str]
    loopback_origins: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> Addressing:
        configured = settings.allowed_hosts or LOOPBACK_NAMES
        hosts = {parsed for entry in configured if (parsed := split_host(entry)) is not None}
        origins = {origin.lower().rstrip("/") for origin in settings.allowed_origins}
        public = urlsplit(settings.resource_url) if settings.resource_url else None
        if public is not None and public.hostname:
            # The public URL names this server: its host and its origin are ours.
            if (own := split_host(public.netloc.rpartition("@")[2])) is not None:
                hosts.add((own[0], ""))
            origins.add(f"{public.scheme}://{public.netloc}".lower())
        return cls(
            any_host="*" in settings.allowed_hosts,
            hosts=frozenset(hosts),
            any_origin="*" in settings.allowed_origins,
            origins=frozenset(origins),
            # Pages on this machine may call a server only this machine can reach; once it is
            # reachable from elsewhere, "localhost" names whatever the caller's machine runs.
            loopback_origins=settings.loopback_bind,
        )

    def host_allowed(self, host: str | None) -> bool:
        if self.any_host:
            return True
        parsed = split_host(host) if host is not None else None
        if parsed is None:
            return False
        return parsed in self.hosts or (parsed[0], "") in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        if self.any_origin or origin.lower().rstrip("/") in self.origins:
            return True
        if not self.loopback_origins:
            return False
        try:
            parts = urlsplit(origin)
            host = parts.hostname
        except ValueError:  # not even a URL ("null" from a sandboxed page is refused too)
            return False
        # The host must be exactly local: "localhost.evil.example" is someone else's page.
        return parts.scheme in {"http", "https"} and host in {"localhost", "127.0.0.1", "::1"}


def _accepts_json(accept: str | None) -> bool:
    if accept is None:
        return False
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})


def check(req: HttpRequest, addressing: Addressing, max_body: int) -> HttpReply | McpError | None:
    """What ends the request here (a plain HTTP reply, or a JSON-RPC error without an id), or
    ``None`` to go on."""
    # Host first: a request for another name is not ours to judge any further.
    if not addressing.host_allowed(req.header("host")):
        text = "Misdirected Request: this server does not answer to that Host (MCPQ_ALLOWED_HOSTS)"
        return McpError(INVALID_REQUEST, text, http_status=421)
    # Size next: a body announced as too large was not even read (see mcpq.frontend.asgi_adapter).
    if len(req.body) > max_body or (req.declared_length or 0) > max_body:
        return _plain(413, "Payload Too Large")
    origin = req.header("origin")
    if origin is not None and not addressing.origin_allowed(origin):
        return McpError(INVALID_REQUEST, "Forbidden: invalid Origin", http_status=403)
    if req.method in {"GET", "DELETE"} and req.header("mcp-session-id") is not None:
        return None
    if req.method != "POST":
        return _plain(405, "Method Not Allowed: this endpoint takes POST only", Allow="POST")
    content_type = (req.header("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return _plain(400, "Bad Request: Content-Type must be application/json")
    if not _accepts_json(req.header("accept")):
        return _plain(406, "Not Acceptable: Accept must include application/json")
    return None
