"""``App``: a server's tools in one object, named by ``MCPQ_TOOLS=module:app`` or found in a
listed module, whose name and instructions the server reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpq import App, Context, ToolContext
from mcpq.shared.registry import Registry
from mcpq.shared.tools import ToolDefinitionError
from tests.unit.fakes import Mcp

MODULE = "tests.support.app_tools"


def test_an_app_holds_its_tools_bare_or_with_options() -> None:
    registry = Registry.from_modules([f"{MODULE}:app"])
    assert list(registry.tools) == ["add", "approve", "confirm", "refund"]
    add, refund = registry.tools["add"], registry.tools["refund"]
    assert add.input_schema["required"] == ["a", "b"]  # no context: every argument
    assert (refund.mode, refund.queue, refund.ttl_ms) == ("required", "bulk", 60_000)
    assert refund.input_schema["required"] == ["order_id"]  # the Context is not an argument
    assert (registry.server_name, registry.instructions) == (
        "shop",
        "Refunds need a human's approval.",
    )
    assert Context is ToolContext


def test_a_listed_module_s_app_is_found_without_naming_it() -> None:
    registry = Registry.from_modules([MODULE])
    assert list(registry.tools) == ["add", "approve", "confirm", "refund"]
    assert registry.server_name == "shop"
    assert registry.warnings == []


def test_an_entry_naming_no_app_is_one_line() -> None:
    with pytest.raises(ToolDefinitionError) as refused:
        Registry.from_modules([f"{MODULE}:add"])
    assert str(refused.value) == (
        f"{MODULE}:add: module {MODULE!r} has no App named 'add' (nor a FastMCP or MCPServer "
        "server): name one (app = App(...)) or list the module alone"
    )


def test_an_app_needs_a_name() -> None:
    with pytest.raises(ValueError, match="the server's name"):
        App("")


def test_the_app_s_name_and_instructions_are_what_the_server_reports(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(tools=Registry.from_modules([f"{MODULE}:app"]), server_name="mcpq")
    discovered = mcp.post("server/discover", {}).result
    assert discovered["instructions"] == "Refunds need a human's approval."
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "shop"
    listed = mcp.post("tools/list", {}).result
    assert [t["name"] for t in listed["tools"]] == ["add", "approve", "confirm", "refund"]


def test_mcpq_server_name_wins_over_the_app_s(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(tools=Registry.from_modules([f"{MODULE}:app"]), server_name="ours")
    result = mcp.post("server/discover", {}).result
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ours"


def test_a_tool_call_runs_the_app_s_tool() -> None:
    """Called as the worker calls it: arguments validated, the context by its parameter."""
    registry = Registry.from_modules([f"{MODULE}:app"])
    seen: list[str] = []

    class Ctx:
        def report(self, message: str) -> None:
            seen.append(message)

    ctx: Any = Ctx()
    assert registry.tools["refund"].call(ctx, {"order_id": "o-1", "cents": 5}) == "o-1: 5"
    assert seen == ["refunding o-1"]
