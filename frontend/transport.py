"""HTTP-level checks before any JSON is read (validation ladder, step 1): Origin (403), method
(405), Content-Type (400), Accept (406), body size (413)."""

from __future__ import annotations

from urllib.parse import urlsplit

from frontend.http_types import HttpReply, HttpRequest
from shared import jsonutil

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _plain(status: int, text: str, **headers: str) -> HttpReply:
    return HttpReply(status, text.encode(), "text/plain; charset=utf-8", dict(headers))


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    if origin in allowed or "*" in allowed:
        return True
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in _LOCAL_HOSTS


def _accepts_json(accept: str | None) -> bool:
    if accept is None:
        return False
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})


def check(req: HttpRequest, allowed_origins: tuple[str, ...], max_body: int) -> HttpReply | None:
    """A reply that ends the request here, or ``None`` to go on."""
    origin = req.header("origin")
    if origin is not None and not origin_allowed(origin, allowed_origins):
        error = {
            "jsonrpc": "2.0",
            "error": {"code": -32600, "message": "Forbidden: invalid Origin"},
        }
        return HttpReply(403, jsonutil.dumpb(error))
    if req.method != "POST":
        return _plain(405, "Method Not Allowed: this endpoint takes POST only", Allow="POST")
    content_type = (req.header("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return _plain(400, "Bad Request: Content-Type must be application/json")
    if not _accepts_json(req.header("accept")):
        return _plain(406, "Not Acceptable: Accept must include application/json")
    if len(req.body) > max_body:
        return _plain(413, "Payload Too Large")
    return None
