"""Turn what a tool returns into a ``CallToolResult``."""

from __future__ import annotations

from typing import Any

from shared import jsonutil


def call_tool_result(value: Any) -> dict[str, Any]:
    """``str`` → one text block; a dict with ``content`` → taken as a CallToolResult; anything
    else JSON-able → ``structuredContent`` plus its JSON as text; ``None`` → no content."""
    if isinstance(value, dict) and "content" in value:
        return {"resultType": "complete", **value}
    if value is None:
        return {"resultType": "complete", "content": []}
    if isinstance(value, str):
        return {"resultType": "complete", "content": [{"type": "text", "text": value}]}
    text = jsonutil.dumps(value)
    result: dict[str, Any] = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result


def error_result(message: str) -> dict[str, Any]:
    """A tool-level error (``isError: true``), still a completed task."""
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": message}],
        "isError": True,
    }
