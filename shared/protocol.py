"""The constants of the MCP wire that mcpq speaks: version, extension, ``_meta`` keys, and which
param each method's ``Mcp-Name`` routing header mirrors. Defined here once; the web tier, the
test client and the benchmarks all read them from here."""

from __future__ import annotations

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

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
