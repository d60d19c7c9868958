"""The 429 a client gets when a per-principal limit refuses a create (``create.lua`` decides).

HTTP 429 with ``Retry-After`` (whole seconds, rounded up) and a JSON-RPC error whose ``data``
names the limit, the setting that sets it, and when to retry in milliseconds.
"""

from __future__ import annotations

import math

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
