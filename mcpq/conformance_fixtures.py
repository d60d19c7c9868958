"""The fixture tools of the official MCP conformance suite (tasks scenarios).

Names, inputs and behaviour are fixed by the suite (`@modelcontextprotocol/conformance`, run by
`ops/harness/conformance_runner.py`). Its questions are raw JSON schemas, sent exactly as written
(a typed form, ``schema=Model``, would add each field's ``title``). Plain ``@tool`` functions,
not an ``App``: the module is served beside others and names no server.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mcpq import Context, ProtocolError, ToolError, elicitation, tool

INTERNAL_ERROR = -32603  # JSON-RPC

_NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool(task="never")
def greet(name: str) -> str:
    """Greets someone, synchronously (never a task)."""
    return f"Hello, {name}!"


@tool(task="optional")
def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=3600)],
    ctx: Context,
    label: Annotated[str, Field(max_length=200)] = "result",
) -> str:
    """Sleeps for `seconds`, then returns a result."""
    ctx.report(f"computing {label}")
    ctx.sleep(seconds)
    return f"{label}: computed in {seconds:g}s"


@tool(task="required")
def failing_job(ctx: Context) -> str:
    """Runs for about a second, then fails with a tool error."""
    ctx.sleep(1.0)
    raise ToolError("failing_job failed on purpose")


@tool(task="optional")
def protocol_error_job(ctx: Context) -> str:
    """Fails with a protocol-level (JSON-RPC) error."""
    ctx.sleep(0.2)
    raise ProtocolError(INTERNAL_ERROR, "protocol_error_job raised a protocol error")


@tool(task="optional")
def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks for confirmation before deleting a file."""
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


@tool(task="optional")
def multi_input(ctx: Context) -> str:
    """Asks two questions at once."""
    # Nothing required: the suite answers both questions with content of its own choosing, and
    # answers are checked against these schemas before they are stored (mcpq.shared.answers).
    color = {"type": "object", "properties": {"color": {"type": "string"}}}
    size = {"type": "object", "properties": {"size": {"type": "string"}}}
    first, second = ctx.ask(elicitation("Pick a color.", color), elicitation("Pick a size.", size))
    return f"Got {_content(first)} and {_content(second)}"


def _ask_name(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"user_name": elicitation("What is your name?", _NAME_SCHEMA)}


@tool(task="required", ask_first=_ask_name)
def test_tool_with_task(ctx: Context) -> str:
    """Asks for a name through MRTR before it starts, then greets in a task."""
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
