"""Bounds on what clients hand the web tier (``mcpq.shared.bounds``): each over-limit value gets a
clear -32602 naming its setting, before anything is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from mcpq.shared.bounds import depth
from mcpq.shared.store import task_ref
from tests.unit.fakes import CONFIRM_SCHEMA, Mcp, elicitation


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_depth() -> None:
    assert depth(1) == 0 and depth([]) == 1 and depth({"a": [{}]}) == 3
    assert depth(nested(5000)) == 5000  # no recursion, so no RecursionError


def test_deep_json_is_32600_naming_the_setting(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_json_depth=10)
    reply = mcp.call("echo", {"text": "x", "times": 1}, extra={"deep": nested(20)})
    assert reply.code() == (400, -32600)
    assert "MCPQ_MAX_JSON_DEPTH (10)" in reply.error["message"]
    assert reply.body["id"] is None  # refused on the bytes: nothing was parsed
    assert mcp.producer.calls == []
    # Deeper than any encoder writes: bodies built by hand, past orjson's own limits (255 to
    # write, 1024 to read). The bytes are refused before any parser recurses.
    for levels in (300, 1024, 5000):
        params = "[" * levels + "1" + "]" * levels
        body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{params}}}}}'
        assert mcp.raw(body.encode()).code() == (400, -32600), levels


def test_oversized_arguments_are_32602(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_arguments_bytes=100)
    reply = mcp.call("echo", {"text": "x" * 200})
    assert reply.code() == (400, -32602)
    assert "MCPQ_MAX_ARGUMENTS_BYTES (100)" in reply.error["message"]
    assert mcp.producer.calls == []
    assert mcp.call("echo", {"text": "x"}).status == 200


def test_oversized_capabilities_are_32602_in_both_eras(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_capabilities_bytes=200)
    big = {"elicitation": {}, "x-padding": "p" * 300}
    reply = mcp.call("echo", {"text": "x"}, caps=big)
    assert reply.code() == (400, -32602)
    assert "MCPQ_MAX_CAPABILITIES_BYTES (200)" in reply.error["message"]
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": big},
    }
    legacy = mcp.raw(orjson.dumps(init), {"Content-Type": "application/json", "Accept": "*/*"})
    assert legacy.error["code"] == -32602 and "mcp-session-id" not in legacy.headers


def test_answers_are_bounded_in_number_and_size(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_answers=3, max_answer_bytes=200)
    ask = elicitation("Approve?", CONFIRM_SCHEMA)
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("ask", {"k": ask}))
    task_id = mcp.new_task()
    many = {f"k{i}": {"action": "decline"} for i in range(4)}
    reply = mcp.post("tasks/update", {"taskId": task_id, "inputResponses": many})
    assert reply.code() == (400, -32602) and "MCPQ_MAX_ANSWERS (3)" in reply.error["message"]
    big = {"k": {"action": "accept", "content": {"ok": True, "note": "n" * 300}}}
    reply = mcp.post("tasks/update", {"taskId": task_id, "inputResponses": big})
    assert reply.code() == (400, -32602) and "MCPQ_MAX_ANSWER_BYTES (200)" in reply.error["message"]
    assert mcp.peek.exists(mcp.keys.answers(task_ref(task_id))) == 0
    record = mcp.record(task_id)
    assert record is not None and record.status == "input_required"
