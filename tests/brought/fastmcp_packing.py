"""A FastMCP tool for the tracing chain (``tests/e2e/test_trace_chain.py``): it charges once
(``mcpq.step``), asks a person how to pack and to confirm, then waits for the packing line (a
file the test creates) before it answers. A run killed while it waits is replayed: the charge
is memoized, the answers are already stored, and the wait starts again."""

import asyncio
import os

from fastmcp import Context, FastMCP
from pydantic import BaseModel

from mcpq import step

mcp = FastMCP("Packing")


class Packing(BaseModel):
    ship: bool
    note: str


class Confirmed(BaseModel):
    ok: bool


@mcp.tool(task=True)
async def charge_ask_pack(order_id: str, ledger: str, line: str, ctx: Context) -> str:
    """Charge an order, ask how to pack it and to confirm, then wait for the packing line."""

    def charge() -> str:
        with open(ledger, "a") as book:  # the side effect: one line per charge
            book.write(f"charged {order_id}\n")
        return f"ch-{order_id}"

    receipt = await step("charge", charge)
    answer = await ctx.elicit(f"Pack {order_id}?", response_type=Packing)
    note = answer.data.note if answer.action == "accept" else "held"
    confirmed = await ctx.elicit("Confirm the packing?", response_type=Confirmed)
    if confirmed.action != "accept" or not confirmed.data.ok:
        return f"{receipt} held"
    while not os.path.exists(line):  # the packing line is not there yet: wait for it
        await asyncio.sleep(0.05)
    return f"{receipt} packed-by-quokka-93 {note}"
