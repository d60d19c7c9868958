"""``server/discover``: versions, capabilities (tools, resources, prompts, completions, logging
and the Tasks extension), server info."""

from __future__ import annotations

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import Services
from mcpq.shared.protocol import SERVER_FEATURES, SUPPORTED_VERSIONS, TASKS_EXTENSION
from mcpq.shared.wire import Discovery


async def discover(services: Services, rpc: RpcRequest) -> Discovery:
    return Discovery(
        supported_versions=list(SUPPORTED_VERSIONS),
        capabilities={
            "tools": {"listChanged": True},  # on a listen stream (toolsListChanged)
            # Logging: a synchronous call's stream carries its tool's log messages when the
            # request sets a level (``_meta["io.modelcontextprotocol/logLevel"]``); the spec
            # wants it declared.
            **SERVER_FEATURES,
            "extensions": {TASKS_EXTENSION: {}},
        },
        instructions=services.registry.instructions
        or (
            "Long-running tools answer with a task when the client declares the "
            f"{TASKS_EXTENSION} extension; poll it with tasks/get."
        ),
        ttl_ms=0,
        cache_scope="private",
    )
