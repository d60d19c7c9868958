"""HTTP-level checks before any JSON is read (validation ladder, step 1): body size (413),
Origin (403), method (405), Content-Type (400), Accept (406). ``GET`` and ``DELETE`` go on only
with an ``Mcp-Session-Id`` (a 2025-era session's stream and its end).

The edge (``frontend.edge``) never reads more than ``MCPQ_MAX_BODY_BYTES`` + 1 bytes, so the
size check here, on what was read, is the only one."""

from __future__ import annotations

from urllib.parse import urlsplit

from frontend.http_types import HttpReply, HttpRequest
from shared.errors import INVALID_REQUEST, McpError

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _plain(status: int, text: str, **headers: str) -> HttpReply:
    return HttpReply(status, text.encode(), "text/plain; charset=utf-8", dict(headers))


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    if origin in allowed or "*" in allowed:
        return True
    try:
        host = urlsplit(origin).hostname
    except ValueError:  # not even a URL ("null" from a sandboxed page is refused too)
        return False
    # The host must be exactly local: "localhost.evil.example" is someone else's page.
    return host in _LOCAL_HOSTS


def _accepts_json(accept: str | None) -> bool:
    if accept is None:
        return False
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})


def check(
    req: HttpRequest, allowed_origins: tuple[str, ...], max_body: int
) -> HttpReply | McpError | None:
    """What ends the request here (a plain HTTP reply, or a JSON-RPC error without an id), or
    ``None`` to go on."""
    # Size first: a body announced as too large was not even read (see frontend.edge).
    if len(req.body) > max_body or (req.declared_length or 0) > max_body:
        return _plain(413, "Payload Too Large")
    origin = req.header("origin")
    if origin is not None and not origin_allowed(origin, allowed_origins):
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
