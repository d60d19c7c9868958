"""A tool module in the app idiom (``tests/unit/test_app.py``): ``MCPQ_TOOLS=...:app``."""

from __future__ import annotations

from mcpq import App, Context

app = App("shop", instructions="Refunds need a human's approval.")


@app.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool(task="required", queue="bulk", ttl_ms=60_000)
def refund(order_id: str, ctx: Context, cents: int = 0) -> str:
    ctx.report(f"refunding {order_id}")
    return f"{order_id}: {cents}"
