"""Test-only tools for the pool tests, loaded through ``MCPQ_TOOLS`` as
``tests.ops.tools_pools`` (the repository root is on the children's ``PYTHONPATH``).

``bulk_job`` declares ``queue="bulk"``: its runs must only ever reach the ``bulk`` pool
(``mcpq worker --queues bulk``), while tools that name no queue stay on ``mcpq``.
"""

from __future__ import annotations

from mcpq import ToolContext, tool


@tool(task="optional", queue="bulk", description="Test-only: a short job on the bulk pool.")
def bulk_job(ctx: ToolContext, seconds: float = 0.2, label: str = "bulk") -> str:
    ctx.report(f"bulk {label}")
    ctx.sleep(seconds)
    return f"bulk {label} done"
