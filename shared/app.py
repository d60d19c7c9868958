"""``App``: a server's tools in one object, as FastMCP's ``FastMCP("shop")`` and the MCP SDK's
``MCPServer("shop")`` hold them.

::

    from mcpq import App, Context

    app = App("shop", instructions="Refunds need a human's approval.")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool(task="required", queue="bulk")
    def refund(ctx: Context, order_id: str) -> str: ...

``MCPQ_TOOLS=shop.server:app`` names it (``module:attribute``); ``MCPQ_TOOLS=shop.server`` finds
the apps a module holds as well as its module-level ``@tool`` functions. The app's name is the
server's ``serverInfo.name`` unless ``MCPQ_SERVER_NAME`` says otherwise, and its instructions are
what ``initialize`` and ``server/discover`` tell the client.

NOTE: the app is only a holder of declarations: importing its module runs nothing and starts
nothing, so both tiers import it (the web lists and validates, the workers run), as they import
a module of ``@tool`` functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack, overload

from mcpq.shared.tools import APP_MARK, F, Registry, Tool, ToolOptions


class App:
    """A named server: its tools (``@app.tool``), and next its resources and prompts."""

    def __init__(self, name: str, *, instructions: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("App(name): the server's name, a non-empty string")
        self.name = name
        self.instructions = instructions
        self.registry = Registry()
        setattr(self, APP_MARK, True)

    @property
    def tools(self) -> dict[str, Tool]:
        """The app's tools by name, in the order they were declared."""
        return self.registry.tools

    # Bare (`@app.tool`) or with options (`@app.tool(task="required")`), as `mcpq.tool`.
    @overload
    def tool(self, name: F, /) -> F: ...
    @overload
    def tool(self, name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...
    def tool(self, name: Any = None, **options: Unpack[ToolOptions]) -> Any:
        """Declare a tool of this app (see :func:`mcpq.tool` for the options)."""
        return self.registry.tool(name, **options)

    def __repr__(self) -> str:
        return f"App({self.name!r}, tools={list(self.tools)})"
