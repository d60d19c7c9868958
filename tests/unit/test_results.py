"""``mcpq.shared.results`` (tool return value -> ``CallToolResult``) and ``mcpq.shared.wire.Task``
(a stored task -> the wire ``DetailedTask``)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpq.shared.results import call_tool_result, error_result
from mcpq.shared.store import TaskRecord
from mcpq.shared.wire import Task, iso


def test_a_string_is_one_text_block() -> None:
    assert call_tool_result("hello").dump() == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "hello"}],
    }


def test_none_is_no_content() -> None:
    assert call_tool_result(None).dump() == {"resultType": "complete", "content": []}


def test_a_dict_with_content_is_taken_as_a_call_tool_result() -> None:
    value = {
        "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
        "isError": False,
    }
    assert call_tool_result(value).dump() == {"resultType": "complete", **value}


def test_its_own_result_type_is_kept() -> None:
    value = {"resultType": "complete", "content": []}
    assert call_tool_result(value).dump() == value


def test_a_plain_dict_is_structured_content_plus_its_json() -> None:
    assert call_tool_result({"sum": 3, "ok": True}).dump() == {
        "resultType": "complete",
        "content": [{"type": "text", "text": '{"sum":3,"ok":true}'}],
        "structuredContent": {"sum": 3, "ok": True},
    }


@pytest.mark.parametrize(
    ("value", "text"), [(3, "3"), (2.5, "2.5"), (True, "true"), ([1, "a"], '[1,"a"]')]
)
def test_other_json_values_are_text_without_structured_content(value: Any, text: str) -> None:
    assert call_tool_result(value).dump() == {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
    }


def test_error_result() -> None:
    assert error_result("no such city").dump() == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "no such city"}],
        "isError": True,
    }


# -- records -------------------------------------------------------------------------------------
def test_iso_is_utc_with_milliseconds() -> None:
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(1_796_018_263_669) == "2026-11-30T05:57:43.669Z"


def record(status: str, **fields: str) -> TaskRecord:
    h = {
        "status": status,
        "created_ms": "1000",
        "updated_ms": "2000",
        "ttl_ms": "60000",
        "poll_ms": "500",
        "tool": "echo",
        **fields,
    }
    return TaskRecord.from_hash("ref", h)


def wire(rec: TaskRecord, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return Task.of(rec, "T", inputs).dump()


BASE = {
    "resultType": "complete",
    "taskId": "T",
    "createdAt": "1970-01-01T00:00:01.000Z",
    "lastUpdatedAt": "1970-01-01T00:00:02.000Z",
    "ttlMs": 60000,
    "pollIntervalMs": 500,
}


def test_wire_working() -> None:
    assert wire(record("working")) == {**BASE, "status": "working"}


def test_wire_unlimited_ttl_is_an_explicit_null() -> None:
    shown = wire(record("working", ttl_ms=""))
    assert "ttlMs" in shown
    assert shown["ttlMs"] is None


def test_wire_input_required_has_every_outstanding_request() -> None:
    inputs = {"a": {"method": "roots/list"}, "b": {"method": "elicitation/create"}}
    shown = wire(record("input_required"), inputs)
    assert shown["inputRequests"] == {
        "a": {"method": "roots/list"},
        "b": {"method": "elicitation/create"},
    }
    assert not {"result", "error"} & set(shown)


def test_wire_completed_and_failed() -> None:
    done = wire(record("completed", result='{"resultType":"complete","content":[]}'))
    assert done["result"] == {"resultType": "complete", "content": []}
    assert not {"error", "inputRequests"} & set(done)
    failed = wire(record("failed", error='{"code":-32603,"message":"x"}', msg="x"))
    assert (failed["error"], failed["statusMessage"]) == ({"code": -32603, "message": "x"}, "x")
    assert not {"result", "inputRequests"} & set(failed)


def test_wire_cancelled_has_no_payload_and_stray_fields_never_leak() -> None:
    shown = wire(record("cancelled", result='{"content":[]}', msg="Cancelled by client"), {})
    assert shown == {**BASE, "status": "cancelled", "statusMessage": "Cancelled by client"}
