"""Existing FastMCP and MCP SDK servers, served by mcpq unchanged (``MCPQ_TOOLS=shop.server:mcp``).

:func:`bring` recognises a ``fastmcp.FastMCP`` (4.1) or an ``mcp`` 2.3 ``MCPServer`` by its
class, without importing either package (a deployment that brings neither pays nothing), and
returns what mcpq serves of it: its tools (run durably on the workers, their ``Context`` answered
through mcpq), resources, templates and prompts. What cannot carry over is refused in one line
naming it. One module per package: ``fastmcp_server``, ``sdk_server``; ``common`` holds what
they share (the brought tool, ``mcpq.step`` inside one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpq.shared.prompts import Prompt
from mcpq.shared.resources import Resource, ResourceTemplate
from mcpq.shared.tool_signature import ToolDefinitionError
from mcpq.shared.tools import Tool

_FASTMCP = ("fastmcp.server.server", "FastMCP")
_SDK = ("mcp.server.mcpserver.server", "MCPServer")


@dataclass
class Brought:
    """What :class:`mcpq.shared.registry.Registry` adds of a brought server, as of an ``App``."""

    name: str
    instructions: str | None
    tools: list[Tool] = field(default_factory=list)
    resources: list[Resource | ResourceTemplate] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)


def kind(obj: object) -> str | None:
    """``"fastmcp"``, ``"sdk"``, or ``None`` for anything else (by class, no import)."""
    for cls in type(obj).__mro__:
        if (cls.__module__, cls.__name__) == _FASTMCP:
            return "fastmcp"
        if (cls.__module__, cls.__name__) == _SDK:
            return "sdk"
    return None


def bring(obj: object, entry: str) -> Brought | None:
    """What mcpq serves of ``obj`` (``None``: not a server it can bring);
    :class:`ToolDefinitionError` naming what cannot carry over."""
    found = kind(obj)
    if found is None:
        return None
    if found == "fastmcp":
        from mcpq.shared.brought import fastmcp_server as module
    else:
        from mcpq.shared.brought import sdk_server as module  # type: ignore[no-redef]
    refused = module.refusals(obj)
    if refused:
        label = "FastMCP" if found == "fastmcp" else "MCPServer"
        raise ToolDefinitionError(f"{entry}: this {label} server uses {refused[0]}")
    name = str(getattr(obj, "name", None) or entry)
    instructions = getattr(obj, "instructions", None)
    told = instructions if isinstance(instructions, str) else None
    return Brought(name, told, list(module.tools(obj)), module.resources(obj), module.prompts(obj))
