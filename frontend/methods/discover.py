"""``server/discover``: versions, capabilities (tools and the Tasks extension), server info."""

from __future__ import annotations

from typing import Any

from frontend.envelope import SUPPORTED_VERSIONS, RpcRequest
from frontend.services import Services
from shared.errors import TASKS_EXTENSION


async def discover(services: Services, req: RpcRequest) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": {"tools": {"listChanged": False}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": (
            "Long-running tools answer with a task when the client declares the "
            f"{TASKS_EXTENSION} extension; poll it with tasks/get."
        ),
        "ttlMs": 0,
        "cacheScope": "private",
    }
