"""A FastMCP 4.1 server, written as FastMCP's documentation shows (nothing of mcpq in it)."""

from fastmcp import Context, FastMCP
from pydantic import BaseModel

mcp = FastMCP("Shop", instructions="Refunds and the catalog of a small shop.")


class Approval(BaseModel):
    approve: bool
    note: str = ""


@mcp.tool(task=True)
async def refund(order_id: str, amount: float, ctx: Context) -> str:
    """Refund an order once a person approves it."""
    result = await ctx.elicit(f"Refund {amount:.2f} on {order_id}?", response_type=Approval)
    if result.action == "accept" and result.data.approve:
        return f"refunded {amount:.2f} on {order_id} ({result.data.note or 'no note'})"
    return f"refund of {order_id} not approved"


@mcp.tool
async def reindex(items: int, ctx: Context) -> dict:
    """Reindex the catalog, reporting as it goes."""
    await ctx.info(f"reindexing {items} items")
    for done in range(1, items + 1):
        await ctx.report_progress(progress=done, total=items, message=f"{done}/{items}")
    await ctx.warning("reindex finished", logger_name="catalog")
    return {"items": items, "status": "reindexed"}


@mcp.resource("shop://policy", mime_type="text/markdown")
def policy() -> str:
    """The refund policy."""
    return "# Refunds\n\nWithin 30 days of delivery."


@mcp.resource("shop://orders/{order_id}")
def order(order_id: str) -> dict:
    """An order, by its id."""
    return {"id": order_id, "status": "shipped"}


@mcp.prompt
def apology(customer: str, issue: str = "a late delivery") -> str:
    """Write an apology to a customer."""
    return f"Write a short apology to {customer} for {issue}."
