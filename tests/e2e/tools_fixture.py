"""Test-only tools, loaded by the e2e stack through ``MCPQ_TOOLS`` (``tests.e2e.tools_fixture``).

The web and worker processes run with the repository root as their working directory and on
``PYTHONPATH``, so this module imports as ``tests.e2e.tools_fixture`` (``tests`` and ``tests/e2e``
are namespace packages). It only imports ``shared.tools``, like any tool module.
"""

from __future__ import annotations

import time
from pathlib import Path

from shared.tools import ToolContext, tool


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
