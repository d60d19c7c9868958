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

A resource that changes is announced with ``app.resource_updated("shop://orders/42")`` (from a
tool, on a worker, or any process that reaches the store): its subscribers are told on every
replica (:func:`resource_updated`).

NOTE: the app is only a holder of declarations: importing its module runs nothing and starts
nothing, so both tiers import it (the web lists and validates, the workers run), as they import
a module of ``@tool`` functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Unpack, overload

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.prompts import PROMPT_MARK, Prompt, PromptOptions, prompt
from mcpq.shared.registry import Registry
from mcpq.shared.resources import (
    RESOURCE_MARK,
    Resource,
    ResourceOptions,
    ResourceTemplate,
    resource,
)
from mcpq.shared.tools import APP_MARK, F, Tool, ToolOptions

if TYPE_CHECKING:
    from mcpq.shared.store import TaskStore


def resource_updated(uri: str, *, store: TaskStore | None = None) -> bool:
    """Tell the clients subscribed to the resource at ``uri`` that it changed (they read it
    again): the 2025-era sessions that called ``resources/subscribe`` for it, on their GET
    stream, and the ``subscriptions/listen`` streams that named it, on every web replica.

    Callable from a tool (on a worker), a web process or any process that reaches the task
    store: it publishes through Redis, on ``store`` or else on a client of this process's own,
    built from the environment (``REDIS_URL``...) on the first call. One round trip, blocking
    (from a coroutine it holds the loop that long). ``uri`` is matched as the clients wrote it.
    Best effort, as notifications are: ``False`` (and a warning in the log) when Redis cannot
    be reached, and nobody is told of a change while no stream of theirs is open.
    """
    if not isinstance(uri, str) or not uri:
        raise ValueError("resource_updated(uri): the resource's URI, a non-empty string")
    from mcpq.shared.store.announce import announce_updated  # (loads redis-py)

    try:
        announce_updated(uri, store)
    except StoreUnavailable:
        # Never the URI: what a deployment serves under which name stays out of the logs.
        logging.getLogger("mcpq.store").warning(
            "a resource update was not announced: the task store is unavailable"
        )
        return False
    return True


class App:
    """A named server: its tools (``@app.tool``), resources (``@app.resource``) and prompts
    (``@app.prompt``)."""

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

    # -- resources and prompts (``mcpq.shared.resources``, ``mcpq.shared.prompts``) -----------
    def resource(self, uri: str, **options: Unpack[ResourceOptions]) -> Callable[[F], F]:
        """Declare the resource (or, with ``{variables}``, the template) at ``uri``."""
        marking = resource(uri, **options)

        def add(fn: F) -> F:
            marked = marking(fn)
            self.registry.add_resource(getattr(marked, RESOURCE_MARK))
            return marked

        return add

    @overload
    def prompt(self, name: F, /) -> F: ...
    @overload
    def prompt(
        self, name: str | None = None, **options: Unpack[PromptOptions]
    ) -> Callable[[F], F]: ...
    def prompt(self, name: Any = None, **options: Unpack[PromptOptions]) -> Any:
        """Declare a prompt of this app (bare ``@app.prompt`` or with options)."""
        if name is not None and not isinstance(name, str):
            return self.prompt()(name)
        marking = prompt(name, **options)

        def add(fn: F) -> F:
            marked = marking(fn)
            self.registry.add_prompt(getattr(marked, PROMPT_MARK))
            return marked

        return add

    def resource_updated(self, uri: str) -> bool:
        """Tell the clients subscribed to this app's resource at ``uri`` that it changed (see
        :func:`mcpq.resource_updated`)."""
        return resource_updated(uri)

    @property
    def resources(self) -> dict[str, Resource]:
        return self.registry.resources

    @property
    def templates(self) -> dict[str, ResourceTemplate]:
        return self.registry.templates

    @property
    def prompts(self) -> dict[str, Prompt]:
        return self.registry.prompts

    def __repr__(self) -> str:
        return f"App({self.name!r}, tools={list(self.tools)})"
