"""The "after" of the porting guide: a FastMCP tool whose side effect is made once-only with
``mcpq.step`` (and its idempotency key, ``mcpq.step_key``), the one import of mcpq in it (a
replay after a crash does not charge twice)."""

from fastmcp import Context, FastMCP
from pydantic import BaseModel

from mcpq import step, step_key

mcp = FastMCP("Payments")


class Shipping(BaseModel):
    ship: bool


@mcp.tool(task=True)
async def charge_and_ship(order_id: str, ledger: str, ctx: Context) -> str:
    """Charge an order, then ship it once a person says so."""

    def charge() -> str:
        key = step_key("charge")  # the same in every run: the payment API's idempotency key
        with open(ledger, "a") as book:  # the side effect: one line per charge
            book.write(f"charged {order_id}\n")
        return f"ch-{order_id}-{len(key)}"

    receipt = await step("charge", charge)
    answer = await ctx.elicit(f"Ship {order_id}?", response_type=Shipping)
    shipped = answer.action == "accept" and answer.data.ship
    return f"{receipt} {'shipped' if shipped else 'held'}"
