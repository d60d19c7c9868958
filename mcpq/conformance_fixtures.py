"""The fixture tools of the official MCP conformance suite (tasks scenarios).

Names, inputs and behaviour are fixed by the suite (`@modelcontextprotocol/conformance`, run by
`ops/harness/conformance_runner.py`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mcpq import ProtocolError, ToolContext, ToolError, elicitation, tool

INTERNAL_ERROR = -32603  # JSON-RPC

_NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool(task="never", description="Greets someone, synchronously (never a task).")
def greet(ctx: ToolContext, name: str) -> str:
    return f"Hello, {name}!"


@tool(task="optional", description="Sleeps for `seconds`, then returns a result.")
def slow_compute(
    ctx: ToolContext,
    seconds: Annotated[float, Field(ge=0, le=3600)],
    label: Annotated[str, Field(max_length=200)] = "result",
) -> str:
    ctx.report(f"computing {label}")
    ctx.sleep(seconds)
    return f"{label}: computed in {seconds:g}s"


@tool(task="required", description="Runs for about a second, then fails with a tool error.")
def failing_job(ctx: ToolContext) -> str:
    ctx.sleep(1.0)
    raise ToolError("failing_job failed on purpose")


@tool(task="optional", description="Fails with a protocol-level (JSON-RPC) error.")
def protocol_error_job(ctx: ToolContext) -> str:
    ctx.sleep(0.2)
    raise ProtocolError(INTERNAL_ERROR, "protocol_error_job raised a protocol error")


@tool(task="optional", description="Asks for confirmation before deleting a file.")
def confirm_delete(ctx: ToolContext, filename: str) -> str:
    schema = {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "description": "Delete the file?"}},
        "required": ["confirm"],
    }
    answer = ctx.elicit(f"Delete {filename}?", schema)
    # Anything but an explicit accept with confirm=true keeps the file: decline, cancel, or
    # content that does not say yes.
    content = answer.get("content") or {}
    if answer.get("action") == "accept" and content.get("confirm") is True:
        return f"Deleted {filename}"
    return f"Kept {filename}"


@tool(task="optional", description="Asks two questions at once.")
def multi_input(ctx: ToolContext) -> str:
    # Nothing required: the suite answers both questions with content of its own choosing, and
    # answers are checked against these schemas before they are stored (mcpq.shared.answers).
    color = {"type": "object", "properties": {"color": {"type": "string"}}}
    size = {"type": "object", "properties": {"size": {"type": "string"}}}
    first, second = ctx.ask(elicitation("Pick a color.", color), elicitation("Pick a size.", size))
    return f"Got {_content(first)} and {_content(second)}"


def _ask_name(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"user_name": elicitation("What is your name?", _NAME_SCHEMA)}


@tool(
    task="required",
    description="Asks for a name through MRTR before it starts, then greets in a task.",
    ask_first=_ask_name,
)
def test_tool_with_task(ctx: ToolContext) -> str:
    # Answered through MRTR before the task existed (ask_first), handed to the run as-is.
    answer = ctx.prelude.get("user_name") or {}
    name = (answer.get("content") or {}).get("name", "stranger")
    ctx.sleep(0.2)
    return f"Hello, {name}! Your task is complete."


def _content(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    if not isinstance(content, dict):
        return str(answer.get("action", "nothing"))
    return ", ".join(f"{k}={v}" for k, v in content.items())
