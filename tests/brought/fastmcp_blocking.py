"""A FastMCP server as found in the field: an ``async def`` tool that calls a blocking
function (a sync HTTP client's call, here a ``time.sleep``) on the event loop, as a tool
written for a server that runs one call at a time may. On mcpq's run loop it must stall no
other run (``mcpq.workers.run_loop``)."""

import time

from fastmcp import FastMCP

mcp = FastMCP("Reports")


def fetch_with_a_blocking_client(seconds: float) -> str:
    time.sleep(seconds)  # a blocking call: the loop is held for its whole length
    return "report ready"


@mcp.tool(task=True)
async def slow_report(seconds: float) -> str:
    """Fetch a report with a blocking client."""
    return fetch_with_a_blocking_client(seconds)
