"""The constants of the MCP wire that mcpq speaks: version, extension, ``_meta`` keys, and which
param each method's ``Mcp-Name`` routing header mirrors. Defined here once; the web tier, the
test client and the benchmarks all read them from here."""

from __future__ import annotations

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: The 2025-era versions served over sessions (``initialize``), oldest first. 2024-11-05 used the
#: older HTTP+SSE transport and is not served.
LEGACY_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LEGACY_LATEST = "2025-11-25"
#: The first 2025-era version with the tasks wire (SEP-1686) and ``execution.taskSupport``.
LEGACY_TASKS_VERSION = "2025-11-25"
META_RELATED_TASK = "io.modelcontextprotocol/related-task"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: A 2026-07-28 request's wish for ``notifications/message`` on its stream, at or above a level.
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""The param whose value a request's ``Mcp-Name`` header carries, by method."""


#: What every wire declares beyond tools: resources (their updates: 2025-era
#: ``resources/subscribe``, 2026-07-28 ``subscriptions/listen``'s ``resourceSubscriptions``;
#: list changes, announced when a deploy changes what is served), prompts (list changes),
#: completions and logging (``notifications/message`` on a synchronous call's stream). A
#: 2025-era session hears its notifications on its GET stream; a 2026-07-28 client on a listen
#: stream.
SERVER_FEATURES: dict[str, dict[str, bool]] = {
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "completions": {},
    "logging": {},
}
