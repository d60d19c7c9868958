"""Ladder steps 3 and 5: routing headers against the body, always -32020 with HTTP 400
(spec digest §3.3, §9)."""

from __future__ import annotations

import base64
from collections.abc import Callable

import orjson
import pytest

from tests.unit.fakes import PV, Mcp, Reply, b64, meta

TASK_METHODS = ["tasks/get", "tasks/update", "tasks/cancel"]


def task_params(method: str, task_id: str) -> dict[str, object]:
    params: dict[str, object] = {"taskId": task_id}
    if method == "tasks/update":
        params["inputResponses"] = {}
    return params


def assert_mismatch(reply: Reply, rid: object = 1) -> None:
    assert reply.code() == (400, -32020)
    assert reply.body["id"] == rid


# -- step 3: duplicated routing headers ----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value"),
    [("MCP-Protocol-Version", PV), ("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")],
)
def test_duplicate_routing_header_is_32020(mcp: Mcp, name: str, value: str) -> None:
    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": meta()}
    headers = [*mcp.headers("tools/call", params).items(), (name, value)]
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    assert_mismatch(mcp.raw(orjson.dumps(message), headers))
    assert mcp.producer.calls == []


def test_duplicate_headers_are_checked_before_the_meta_envelope(mcp: Mcp) -> None:
    headers = [*mcp.headers("tools/list", {}).items(), ("Mcp-Method", "tools/list")]
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert_mismatch(mcp.raw(orjson.dumps(message), headers))


# -- MCP-Protocol-Version ------------------------------------------------------------------------
def test_missing_protocol_version_header_is_32020(mcp: Mcp) -> None:
    assert_mismatch(mcp.post("tools/list", MCP_Protocol_Version=None))


def test_protocol_version_header_must_equal_meta(mcp: Mcp) -> None:
    assert_mismatch(mcp.post("tools/list", MCP_Protocol_Version="2025-11-25"))


def test_header_mismatch_is_reported_before_an_unsupported_version(mcp: Mcp) -> None:
    params = {"_meta": meta(version="2099-01-01")}
    assert_mismatch(mcp.post("tools/list", params, MCP_Protocol_Version=PV))


# -- Mcp-Method ----------------------------------------------------------------------------------
def test_missing_mcp_method_is_32020(mcp: Mcp) -> None:
    assert_mismatch(mcp.post("tools/list", Mcp_Method=None))


@pytest.mark.parametrize("header", ["tools/list", "TOOLS/CALL", "Tools/Call", "tools/call/"])
def test_mcp_method_must_equal_the_method_case_sensitively(mcp: Mcp, header: str) -> None:
    reply = mcp.call("echo", {"text": "x"}, Mcp_Method=header)
    assert_mismatch(reply)
    assert mcp.producer.calls == []


# -- Mcp-Name on tools/call ----------------------------------------------------------------------
def test_missing_mcp_name_on_tools_call_is_32020(mcp: Mcp) -> None:
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=None))


@pytest.mark.parametrize("header", ["quick", "ECHO", "echo2", ""])
def test_mismatched_mcp_name_on_tools_call_is_32020(mcp: Mcp, header: str) -> None:
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=header))
    assert mcp.producer.calls == []


def test_a_missing_mcp_name_is_accepted_only_on_tasks(mcp: Mcp) -> None:
    # The default accepts a missing Mcp-Name on tasks/* only: tools/call always needs it.
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=None))


def test_mcp_name_on_a_method_without_a_name_is_ignored(mcp: Mcp) -> None:
    assert mcp.post("server/discover", Mcp_Name="whatever").status == 200


# -- Mcp-Name on tasks/* -------------------------------------------------------------------------
@pytest.mark.parametrize("method", TASK_METHODS)
def test_mismatched_mcp_name_on_tasks_is_32020(mcp: Mcp, method: str) -> None:
    task_id = mcp.new_task()
    other = mcp.new_task()
    assert_mismatch(mcp.post(method, task_params(method, task_id), Mcp_Name=other))
    record = mcp.record(task_id)
    assert record is not None
    assert record.status == "working"


@pytest.mark.parametrize("method", TASK_METHODS)
def test_mismatch_on_tasks_is_rejected_even_when_missing_is_accepted(mcp: Mcp, method: str) -> None:
    task_id = mcp.new_task()
    assert_mismatch(mcp.post(method, task_params(method, task_id), Mcp_Name="nope"))


@pytest.mark.parametrize("method", TASK_METHODS)
def test_missing_mcp_name_on_tasks_is_32020_when_required(
    make_mcp: Callable[..., Mcp], method: str
) -> None:
    mcp = make_mcp(require_task_name=True)
    task_id = mcp.new_task()
    assert_mismatch(mcp.post(method, task_params(method, task_id), Mcp_Name=None))


@pytest.mark.parametrize("method", TASK_METHODS)
def test_missing_mcp_name_on_tasks_is_accepted_by_default(mcp: Mcp, method: str) -> None:
    task_id = mcp.new_task()
    reply = mcp.post(method, task_params(method, task_id), Mcp_Name=None)
    assert reply.status == 200
    assert reply.result["resultType"] == "complete"


# -- encoding: base64 sentinel, whitespace, invalid characters -----------------------------------
def test_base64_mcp_name_is_decoded_for_tasks_get(mcp: Mcp) -> None:
    task_id = mcp.new_task()
    reply = mcp.get(task_id, Mcp_Name=b64(task_id))
    assert reply.status == 200
    assert reply.result["taskId"] == task_id


def test_base64_mcp_name_is_decoded_for_tools_call(mcp: Mcp) -> None:
    reply = mcp.call("echo", {"text": "x"}, Mcp_Name=b64("echo"))
    assert reply.result["resultType"] == "task"


def test_base64_value_that_decodes_to_another_name_is_32020(mcp: Mcp) -> None:
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=b64("quick")))


@pytest.mark.parametrize(
    "header",
    [
        "=?base64?not*base64!?=",
        "=?base64?ZWNobw?=",  # missing padding
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
    ],
)
def test_invalid_base64_sentinel_is_32020(mcp: Mcp, header: str) -> None:
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=header))


def test_sentinel_markers_are_case_sensitive(mcp: Mcp) -> None:
    header = "=?BASE64?" + base64.b64encode(b"echo").decode() + "?="
    assert_mismatch(mcp.call("echo", {"text": "x"}, Mcp_Name=header))


def test_base64_protocol_version_and_method_are_decoded(mcp: Mcp) -> None:
    reply = mcp.post("tools/list", MCP_Protocol_Version=b64(PV), Mcp_Method=b64("tools/list"))
    assert reply.status == 200


@pytest.mark.parametrize("raw", ["  echo ", "\techo\t", " =?base64?ZWNobw==?= "])
def test_whitespace_around_header_values_is_trimmed(mcp: Mcp, raw: str) -> None:
    reply = mcp.call("echo", {"text": "x"}, Mcp_Name=None, verbatim=[("Mcp-Name", raw)])
    assert reply.status == 200, reply.content
    assert reply.result["resultType"] == "task"


def test_whitespace_is_trimmed_on_every_routing_header(mcp: Mcp) -> None:
    verbatim = [("MCP-Protocol-Version", f" {PV} "), ("Mcp-Method", "\ttools/list ")]
    reply = mcp.post("tools/list", MCP_Protocol_Version=None, Mcp_Method=None, verbatim=verbatim)
    assert reply.status == 200


@pytest.mark.parametrize("raw", ["ec\x01ho", "echo\x7f", "ec\x1bho"])
def test_control_characters_in_a_header_are_32020(mcp: Mcp, raw: str) -> None:
    reply = mcp.call("echo", {"text": "x"}, Mcp_Name=None, verbatim=[("Mcp-Name", raw)])
    assert_mismatch(reply)
