"""Test-only tools, loaded by the e2e stack through ``MCPQ_TOOLS`` (``tests.e2e.tools_fixture``).

The web and worker processes run with the repository root as their working directory and on
``PYTHONPATH``, so this module imports as ``tests.e2e.tools_fixture`` (``tests`` and ``tests/e2e``
are namespace packages). It only imports ``mcpq.shared.tools``, like any tool module.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mcpq import ToolContext, tool


@tool(
    task="optional", description="Test-only: creates the file `path` when it starts, then sleeps."
)
def touch_then_sleep(ctx: ToolContext, path: str, seconds: float = 0.0) -> str:
    Path(path).touch()
    ctx.sleep(seconds)
    return f"touched {path}"


@tool(task="optional", description="Test-only: sleeps without ever calling the context.")
def stubborn_sleep(ctx: ToolContext, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # deaf to cancellation: only termination stops it
        time.sleep(0.05)
    return "woke up"


@tool(task="optional", description="Test-only: an async tool that awaits, never calling ctx.")
async def async_wait(ctx: ToolContext, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"awaited {seconds:g}s"


@tool(task="optional", description="Test-only: an async tool that reports, then awaits.")
async def async_report(ctx: ToolContext, seconds: float = 0.1) -> str:
    ctx.report("started")  # the context works from a coroutine (it blocks only this run's loop)
    await asyncio.sleep(seconds)
    return "reported"


@tool(task="optional", description="Test-only: blocks in one C call, deaf to everything.")
def blocked_in_c(ctx: ToolContext, seconds: float) -> str:
    time.sleep(seconds)
    return "unblocked"
