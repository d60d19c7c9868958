"""A tool module in the app idiom (``tests/unit/test_app.py``): ``MCPQ_TOOLS=...:app``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from mcpq import App, Context, Elicited

app = App("shop", instructions="Refunds need a human's approval.")


@app.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Approval(BaseModel):
    ok: bool
    note: str | None = None


@dataclass
class Amount:
    cents: int


@app.tool(task="required")
def approve(ctx: Context, change: str) -> str:
    """A typed question (a pydantic model): ``data`` is an ``Approval`` or ``None``."""
    answer = ctx.elicit(f"Apply {change}?", schema=Approval)
    assert_type(answer, Elicited[Approval])
    assert_type(answer.data, Approval | None)
    if answer.action != "accept" or answer.data is None or not answer.data.ok:
        return "declined"
    amount = ctx.elicit("How much?", response_type=Amount).data  # FastMCP's spelling
    return f"applied {change} for {amount.cents if amount else 0}"


@app.tool
async def confirm(ctx: Context, question: str) -> bool:
    answer = await ctx.elicit(question, schema=bool)  # a primitive: one field, "value"
    assert_type(answer.data, bool | None)
    return bool(answer.data)


@app.tool(task="required", queue="bulk", ttl_ms=60_000)
def refund(order_id: str, ctx: Context, cents: int = 0) -> str:
    ctx.report(f"refunding {order_id}")
    return f"{order_id}: {cents}"
