"""The 429 a client gets when a per-principal limit refuses a create (``create.lua`` decides).

HTTP 429 with ``Retry-After`` (whole seconds, rounded up) and a JSON-RPC error whose ``data``
names the limit, the setting that sets it, and when to retry in milliseconds.
"""

from __future__ import annotations

import hashlib
import math
import time

from frontend.http_types import HttpRequest
from shared.errors import LIMIT_EXCEEDED, McpError

_LIMITS = {
    "tasks": ("MCPQ_MAX_OPEN_TASKS", "Too many unfinished tasks"),
    "sync": ("MCPQ_MAX_SYNC_CALLS", "Too many synchronous calls at once"),
    "rate": ("MCPQ_CREATE_RATE", "Tasks are being created too fast"),
}


def over_limit(limit: str, retry_ms: int) -> McpError:
    setting, text = _LIMITS[limit]
    retry_ms = max(1, retry_ms)
    return McpError(
        LIMIT_EXCEEDED,
        f"{text}: retry after {retry_ms} ms",
        {"limit": limit, "setting": setting, "retryAfterMs": retry_ms},
        headers={"Retry-After": str(math.ceil(retry_ms / 1000))},
    )


class FloodShield:
    """Refuses, before authentication and parsing, the ``tools/call`` of a credential this
    process has just seen refused by the creation rate, until ``create.lua``'s retry time.

    A client that floods past its rate then costs one dictionary lookup per request instead of
    a key lookup in Redis, a parse, a validation and a script: that is what keeps other
    principals' requests on the same process fast. Sound because the bucket cannot hold a token
    before that time (other replicas' creates only push it later). Keyed by a digest of the
    ``Authorization`` value (nothing else is known this early) and only for requests that say
    ``Mcp-Method: tools/call``; a revoked key in that window gets this 429 rather than a 401,
    both refusals. Bounded in size."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    @staticmethod
    def _key(req: HttpRequest) -> str | None:
        if req.header("mcp-method") != "tools/call":
            return None
        credential = req.header("authorization") or ""
        return hashlib.sha256(credential.encode()).hexdigest()[:32]

    def check(self, req: HttpRequest) -> McpError | None:
        key = self._key(req) if self._until else None
        until = self._until.get(key) if key is not None else None
        if until is None:
            return None
        left_ms = int((until - time.monotonic()) * 1000)
        if left_ms <= 0:
            self._until.pop(key, None)  # type: ignore[arg-type]
            return None
        return over_limit("rate", left_ms)

    def remember(self, req: HttpRequest, error: McpError) -> None:
        if error.code != LIMIT_EXCEEDED or not isinstance(error.data, dict):
            return
        key = self._key(req)
        if key is None or error.data.get("limit") != "rate":
            return
        if len(self._until) >= self.MAX_ENTRIES:
            now = time.monotonic()
            self._until = {k: v for k, v in self._until.items() if v > now}
        if len(self._until) < self.MAX_ENTRIES:
            self._until[key] = time.monotonic() + int(error.data["retryAfterMs"]) / 1000
