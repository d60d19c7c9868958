"""Tools written the way FastMCP and the MCP SDK teach them, on mcpq's public API only
(``App``, ``Context``): an ``async def`` tool that asks a typed question (a pydantic model),
reports numeric progress, logs to the client and awaits two things at once with
``asyncio.gather``, and a plain ``def`` tool that asks with a dataclass. Served by ``mcpq dev``
in ``tests/e2e/test_tool_idiom.py`` (``MCPQ_TOOLS=tests.support.idiom_tools:app``); it must pass
``mypy --strict`` as written (that test checks it too).

``evidence``: a file each run appends to (its pid when it starts, the answer it got, the step's
one call, its end), the tool's own account of what happened across runs, for the tests to read.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import assert_type

from pydantic import BaseModel

from mcpq import App, Context, Elicited

app = App("shop", instructions="Refunds need a human's approval.")

#: How long the tools pause after a progress report, so that each report is its own write
#: (reports are written ``MCPQ_REPORT_DELAY_MS`` late, the latest of several in one write).
PAUSE_S = 0.5


class Confirm(BaseModel):
    """The refund question's form: a reason (required) and whether to restock."""

    reason: str
    restock: bool = False


@dataclass
class Quantity:
    """The restock question's form."""

    count: int
    unit: str = "box"


def note(evidence: str, line: str) -> None:
    """Append ``line`` to the evidence file (nothing without one)."""
    if evidence:
        with Path(evidence).open("a", encoding="utf-8") as out:
            out.write(f"{line}\n")


@app.tool(task="optional")
async def refund(order_id: str, ctx: Context, evidence: str = "") -> str:
    """Refund an order once a human confirms it, with a reason."""
    note(evidence, f"run pid={os.getpid()}")
    answer = await ctx.elicit(f"Refund {order_id}?", schema=Confirm)
    assert_type(answer, Elicited[Confirm])
    note(evidence, f"answered {answer.action}")
    if answer.action != "accept" or answer.data is None:
        return f"refund of {order_id} not done: action={answer.action} data={answer.data}"
    await ctx.report_progress(1, 3, "charging")
    await ctx.info(f"refunding {order_id}", logger_name="shop.refunds")
    await ctx.sleep(PAUSE_S)

    async def charge() -> str:
        note(evidence, "charged")  # a step: once per task, whatever runs replay it
        await asyncio.sleep(0.05)
        return f"ch-{order_id}"

    async def receipt() -> str:
        await asyncio.sleep(0.05)
        return f"rc-{order_id}"

    charged, printed = await asyncio.gather(ctx.step("charge", charge), receipt())
    assert_type(charged, str)
    await ctx.report_progress(2, 3, "receipt")
    await ctx.warning({"order": order_id, "restock": answer.data.restock})
    await asyncio.sleep(PAUSE_S)
    note(evidence, "done")
    return f"refunded {order_id} ({charged}, {printed}) reason={answer.data.reason}"


@app.tool
def restock(ctx: Context, sku: str) -> str:
    """Order more of a product: asks how many (a dataclass form)."""
    answer = ctx.elicit(f"How many {sku}?", schema=Quantity)
    assert_type(answer, Elicited[Quantity])
    if answer.data is None:
        return f"restock of {sku} not done: action={answer.action} data={answer.data}"
    ctx.report_progress(1, 2, "ordering")
    ctx.info({"sku": sku, "count": answer.data.count})
    ctx.sleep(PAUSE_S)
    return f"restocked {sku}: count={answer.data.count} unit={answer.data.unit}"
