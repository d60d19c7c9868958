"""Turn what a tool returns into a ``CallToolResult``."""

from __future__ import annotations

from typing import Any

from mcpq.shared import jsonutil
from mcpq.shared.content import block, is_content
from mcpq.shared.wire import CallToolResult


def call_tool_result(value: Any) -> CallToolResult:
    """``str`` → one text block; an ``Image``/``Audio``/``EmbeddedResource``, or a list of
    those and strings → their content blocks; a dict with ``content`` → taken as a
    CallToolResult; anything else JSON-able → ``structuredContent`` plus its JSON as text;
    ``None`` → no content."""
    if is_content(value):
        return CallToolResult(
            content=[block(v) for v in (value if isinstance(value, list) else [value])]
        )
    if isinstance(value, dict) and "content" in value:
        return CallToolResult.model_validate(value)
    if value is None:
        return CallToolResult(content=[])
    if isinstance(value, str):
        return CallToolResult(content=[{"type": "text", "text": value}])
    text = [{"type": "text", "text": jsonutil.dumps(value)}]
    if isinstance(value, dict):
        return CallToolResult(content=text, structured_content=value)
    return CallToolResult(content=text)


def error_result(message: str) -> CallToolResult:
    """A tool-level error (``isError: true``), still a completed task."""
    return CallToolResult(content=[{"type": "text", "text": message}], is_error=True)
