"""Test-only: the tool module a rolling deploy adds (``tests/e2e/test_resource_notices.py``
starts a replica with it in ``MCPQ_TOOLS``)."""

from __future__ import annotations

from mcpq import tool


@tool(description="Test-only: a tool the new release adds.")
def added_by_the_deploy() -> str:
    return "new in this release"
