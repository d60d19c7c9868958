"""SEP-2243 custom headers: a tool argument marked ``x-mcp-header`` must be mirrored, equal, in
its ``Mcp-Param-<name>`` header on a 2026-07-28 ``tools/call`` (decoded strictly from
``=?base64?…?=``); anything else is 400 with -32020 before the call is made. And a declaration
clients would reject is refused when the module is imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import Field

from mcpq.shared.registry import Registry
from mcpq.shared.results import call_tool_result
from mcpq.shared.tool_signature import ToolDefinitionError
from mcpq.shared.tools import tool
from tests.unit.fakes import Mcp

registry = Registry()


@registry.tool(task="never")
def route(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    shard: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Shard"})] = 0,
    dry: Annotated[bool | None, Field(json_schema_extra={"x-mcp-header": "Dry-Run"})] = None,
) -> str:
    return f"region={region}"


@pytest.fixture
def served(make_mcp: Callable[..., Mcp]) -> Mcp:
    mcp = make_mcp(tools=registry)
    # Runs each call at once (no worker here): what is checked is whether it got that far.
    mcp.producer.on_enqueue = mcp.worker.runs(
        lambda record, answers: ("completed", call_tool_result(f"ran {record.arguments}").dump())
    )
    return mcp


def call(mcp: Mcp, arguments: dict[str, Any], **headers: Any) -> Any:
    return mcp.call("route", arguments, opt_in=False, **headers)


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("Hello", "=?base64?SGVsbG8=?="),
        ("Hello", "Hello"),
        ("SGVsbG8=", "SGVsbG8="),  # no sentinel: literal
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no closing ?=: literal
        ("  padded ", "=?base64?ICBwYWRkZWQg?="),
    ],
)
def test_a_header_that_mirrors_its_argument_is_accepted(
    served: Mcp, value: str, header: str
) -> None:
    reply = call(served, {"region": value}, Mcp_Param_Region=header, Mcp_Param_Shard="0")
    assert reply.result["content"][0]["text"].startswith("ran "), reply.content


@pytest.mark.parametrize(
    "header",
    ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "World", None],
    ids=["bad-padding", "bad-alphabet", "different", "missing"],
)
def test_a_header_that_does_not_mirror_its_argument_is_400_32020(
    served: Mcp, header: str | None
) -> None:
    reply = call(served, {"region": "Hello"}, Mcp_Param_Region=header)
    assert reply.code() == (400, -32020), reply.content
    assert "Mcp-Param-Region" in reply.error["message"]


def test_numbers_compare_as_numbers_and_booleans_as_words(served: Mcp) -> None:
    ok = call(
        served,
        {"region": "eu", "shard": 42, "dry": True},
        Mcp_Param_Region="eu",
        Mcp_Param_Shard="42.0",
        Mcp_Param_Dry_Run="true",
    )
    assert "error" not in ok.body, ok.content
    wrong = call(
        served, {"region": "eu", "dry": False}, Mcp_Param_Region="eu", Mcp_Param_Dry_Run="1"
    )
    assert wrong.code() == (400, -32020)


def test_an_absent_or_null_argument_expects_no_header(served: Mcp) -> None:
    reply = call(served, {"region": "eu", "dry": None}, Mcp_Param_Region="eu")
    assert "error" not in reply.body, reply.content


def test_tools_list_shows_the_annotation(served: Mcp) -> None:
    listed = served.post("tools/list", {}, opt_in=False).result["tools"][0]
    assert listed["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"


@pytest.mark.parametrize(
    ("annotation", "refusal"),
    [
        (Annotated[str, Field(json_schema_extra={"x-mcp-header": "Bad Name"})], "header name"),
        (Annotated[float, Field(json_schema_extra={"x-mcp-header": "X"})], "str, int or bool"),
        (
            list[Annotated[str, Field(json_schema_extra={"x-mcp-header": "X"})]],
            "top-level parameters",
        ),
    ],
)
def test_a_declaration_clients_would_drop_is_refused(annotation: Any, refusal: str) -> None:
    def bad(x: Any) -> str:
        return ""

    bad.__annotations__["x"] = annotation
    with pytest.raises(ToolDefinitionError) as refused:
        tool(bad)
    assert refusal in str(refused.value)


def test_two_parameters_may_not_share_a_header_name() -> None:
    def twice(
        a: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})],
        b: Annotated[str, Field(json_schema_extra={"x-mcp-header": "zone"})],
    ) -> str:
        return a + b

    with pytest.raises(ToolDefinitionError) as refused:
        tool(twice)
    assert "used twice" in str(refused.value)
