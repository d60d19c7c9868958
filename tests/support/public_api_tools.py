"""A tool module written only against mcpq's public API, the way the README and the docs teach
it: ``tests/unit/test_public_api.py`` checks it with ``mypy --strict``, checks that it imports
nothing of mcpq's but ``mcpq``, and serves it through a registry."""

from __future__ import annotations

from typing import Any

from mcpq import (
    InputRequest,
    ProtocolError,
    TaskCancelled,
    ToolContext,
    ToolError,
    elicitation,
    sampling,
    tool,
)

APPROVAL: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers (a bare decorator, no context)."""
    return a + b


@tool(task="required", queue="mcpq", ttl_ms=3_600_000, description="Deploy after approval.")
def deploy(ctx: ToolContext, service: str, version: str = "latest") -> str:
    answer = ctx.elicit(f"Deploy {service} {version}?", APPROVAL)
    if answer.get("action") != "accept" or not answer["content"]["ok"]:
        raise ToolError("The deployment was declined.")
    ctx.report("deploying")
    receipt: str = ctx.step("deploy", lambda: f"{service}@{version}")
    return f"deployed {receipt} ({ctx.step_key('deploy')})"


@tool(task="optional")
def review(text: str, ctx: ToolContext) -> dict[str, Any]:
    """The context anywhere in the signature; several questions at once."""
    questions: list[InputRequest] = [
        elicitation("Is this fine?", APPROVAL),
        sampling([{"role": "user", "content": {"type": "text", "text": text}}], 50),
    ]
    form, summary = ctx.ask(*questions)
    try:
        ctx.sleep(0)
    except TaskCancelled:
        raise
    if ctx.cancelled:
        raise ProtocolError(-32603, "cancelled while reviewing")
    return {"form": form, "summary": summary}


@tool
async def wait_and_ask(ctx: ToolContext, seconds: float) -> str:
    """An async tool awaits the same context calls."""
    await ctx.sleep(seconds)
    answer = await ctx.elicit("Go on?", APPROVAL)
    return str(answer.get("action"))
