"""Test-only tools for the safe-errors test (``tests.ops.tools_crash``): one raises an unexpected
exception whose text must never reach the client, one a ``ToolError`` whose text must."""

from __future__ import annotations

from mcpq import ToolContext, ToolError, tool

SECRET = "secret detail 9c1e"


@tool(task="optional", description="Test-only: fails with an unexpected exception.")
def crash(ctx: ToolContext, value: str = "") -> str:
    raise AttributeError(SECRET)


@tool(task="optional", description="Test-only: fails with a message meant for the model.")
def refuse(ctx: ToolContext, value: str = "") -> str:
    raise ToolError(f"cannot do that with {value!r}")
