"""The 429 a client gets when a per-principal limit refuses a create (``create.lua`` decides), and
this process's memory of rate refusals, which turns a flooding client away before it costs much.

HTTP 429 with ``Retry-After`` (whole seconds, rounded up) and a JSON-RPC error whose ``data``
names the limit, the setting that sets it, and when to retry in milliseconds.
"""

from __future__ import annotations

import hashlib
import math
import time

from mcpq.frontend.http_messages import HttpRequest
from mcpq.shared.errors import LIMIT_EXCEEDED, McpError

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


class RateRefusals:
    """Until when this process knows a key's creation rate is spent.

    Sound because ``create.lua`` said when the bucket's next token comes, and other replicas'
    creates can only push that later: refusing until then, without Redis, refuses nothing the
    store would have let through. Bounded in size (entries that have passed are dropped first)."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def remember(self, key: str, retry_ms: int) -> None:
        if len(self._until) >= self.MAX_ENTRIES:
            now = time.monotonic()
            self._until = {k: v for k, v in self._until.items() if v > now}
        if len(self._until) < self.MAX_ENTRIES:
            self._until[key] = time.monotonic() + retry_ms / 1000

    def refusal(self, key: str) -> McpError | None:
        """The 429 for ``key`` while its rate is known to be spent, else ``None``."""
        until = self._until.get(key) if self._until else None
        if until is None:
            return None
        left_ms = int((until - time.monotonic()) * 1000)
        if left_ms <= 0:
            self._until.pop(key, None)
            return None
        return over_limit("rate", left_ms)


class FloodShield:
    """Refuses, before authentication and parsing, the ``tools/call`` of a credential this
    process has just seen refused by the creation rate, until ``create.lua``'s retry time.

    A client that floods past its rate then costs one dictionary lookup per request instead of
    a key lookup in Redis, a parse, a validation and a script: that is what keeps other
    principals' requests on the same process fast. Keyed by a digest of the ``Authorization``
    value (nothing else is known this early) and only for requests that say
    ``Mcp-Method: tools/call``; a revoked key in that window gets this 429 rather than a 401,
    both refusals. (After authentication, the tool gate asks the same of the principal:
    ``mcpq.frontend.calls.gate``; 2025-era requests carry no ``Mcp-Method`` and meet only that.)"""

    def __init__(self) -> None:
        self._refusals = RateRefusals()

    @staticmethod
    def _key(req: HttpRequest) -> str | None:
        if req.header("mcp-method") != "tools/call":
            return None
        credential = req.header("authorization") or ""
        return hashlib.sha256(credential.encode()).hexdigest()[:32]

    def check(self, req: HttpRequest) -> McpError | None:
        key = self._key(req)
        return None if key is None else self._refusals.refusal(key)

    def remember(self, req: HttpRequest, error: McpError) -> None:
        if error.code != LIMIT_EXCEEDED or not isinstance(error.data, dict):
            return
        key = self._key(req)
        if key is not None and error.data.get("limit") == "rate":
            self._refusals.remember(key, int(error.data["retryAfterMs"]))
