"""``tools/list``, on both wires. (``tools/call`` is ``mcpq.frontend.calls``.)

A 2025-11-25 session also learns each tool's task support (``execution.taskSupport``); a
2026-07-28 client reads the same from the tool's own listing, and the list's caching hints."""

from __future__ import annotations

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import Services
from mcpq.shared.protocol import LEGACY_TASKS_VERSION
from mcpq.shared.wire import LegacyToolsList, Result, ToolsList

_TASK_SUPPORT = {"never": "forbidden", "optional": "optional", "required": "required"}


async def list_tools(services: Services, rpc: RpcRequest) -> Result:
    registered = services.registry.tools.values()
    if not rpc.legacy:
        return ToolsList(tools=[t.listing() for t in registered], ttl_ms=0, cache_scope="private")
    tools = []
    for tool in registered:
        listing = tool.listing()
        if rpc.version >= LEGACY_TASKS_VERSION:
            listing["execution"] = {"taskSupport": _TASK_SUPPORT[tool.mode]}
        tools.append(listing)
    return LegacyToolsList(tools=tools)
