"""Servers written for FastMCP and for the MCP SDK, as their documentation shows them, that
mcpq serves unchanged (``mcpq.shared.brought``)."""
