"""A tool's own JSON Schema (``@tool(input_schema=...)``, ``mcpq.shared.input_schema``): listed
exactly as written (SEP-1613/SEP-2106 keywords kept), arguments checked against it before the
signature's types, and a schema that cannot work refused at declaration in one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

from mcpq import App, tool
from mcpq.shared.registry import Registry
from mcpq.shared.tool_signature import ToolDefinitionError
from tests.unit.fakes import Mcp

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"when": {"$anchor": "when", "type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}},
    "properties": {
        "channel": {"type": "string", "enum": ["sms", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
        "at": {"$ref": "#/$defs/when"},
    },
    "if": {"properties": {"channel": {"const": "sms"}}, "required": ["channel"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

app = App("notify")


@app.tool(task="never", input_schema=SCHEMA)
def notify(
    channel: Literal["sms", "email"] = "email",
    phone: str | None = None,
    email: str | None = None,
    at: str | None = None,
) -> str:
    return f"{channel}:{phone or email}@{at}"


@pytest.fixture
def notifier(make_mcp: Callable[..., Mcp]) -> Mcp:
    registry = Registry()
    registry._add_app(app)
    return make_mcp(tools=registry)


def test_the_schema_is_listed_exactly_as_written(notifier: Mcp) -> None:
    listed = notifier.post("tools/list", {}, opt_in=False).result["tools"]
    assert [t["inputSchema"] for t in listed if t["name"] == "notify"] == [SCHEMA]


def test_arguments_are_checked_against_it_then_typed() -> None:
    spec = notify.__mcpq_tool__  # type: ignore[attr-defined]
    got = spec.validate({"channel": "sms", "phone": "+1", "at": "09:30"})
    assert got == {"channel": "sms", "phone": "+1", "email": None, "at": "09:30"}
    for wrong, why in (
        ({"channel": "sms", "email": "a@b"}, "'phone' is a required property"),
        ({"email": "a@b", "at": "9am"}, "does not match"),
        ({"email": "a@b", "cc": "x"}, "Additional properties"),
    ):
        with pytest.raises(ValueError, match=why):
            spec.validate(wrong)


def test_a_failing_call_is_a_tool_error_the_model_can_correct(notifier: Mcp) -> None:
    reply = notifier.call("notify", {"channel": "sms"}, opt_in=False)
    assert reply.status == 200
    assert reply.result["isError"] is True
    assert "'phone' is a required property" in reply.result["content"][0]["text"]


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "array"}, '"type": "object"'),
        ({"type": "object", "properties": {"b": {}}}, "'b' is not a parameter"),
        ({"type": "object", "minProperties": "one"}, "not a valid JSON Schema 2020-12"),
        ({"type": "object", "properties": {"a": {"$ref": "https://x.test/s"}}}, "SEP-2106"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json"}}}, "outside"),
        ("object", "must be a JSON object"),
    ],
)
def test_a_schema_that_cannot_work_is_refused_at_declaration(schema: Any, why: str) -> None:
    with pytest.raises(ToolDefinitionError, match=why):

        @tool(input_schema=schema)
        def one(a: int = 0) -> int:
            return a
