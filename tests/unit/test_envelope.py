"""Ladder steps 4, 6 and 7, and the order of the whole ladder (spec digest §2.5, §2.6, §3.4):
the ``_meta`` envelope (-32602), protocol version (-32022), method lookup (-32601/404)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.unit.fakes import PV, TASKS, Mcp, meta

CAPS = "io.modelcontextprotocol/clientCapabilities"
VERSION = "io.modelcontextprotocol/protocolVersion"


# -- step 4: the _meta envelope ------------------------------------------------------------------
def without(key: str) -> dict[str, Any]:
    envelope = meta()
    del envelope[key]
    return envelope


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": None},
        {"_meta": "2026-07-28"},
        {"_meta": {}},
        {"_meta": without(VERSION)},
        {"_meta": without(CAPS)},
        {"_meta": {**meta(), CAPS: None}},
        {"_meta": {**meta(), CAPS: ["extensions"]}},
        {"_meta": {**meta(), VERSION: 20260728}},
    ],
)
def test_missing_or_bad_envelope_is_32602_with_400(mcp: Mcp, params: dict[str, Any]) -> None:
    reply = mcp.post("tools/list", params, with_meta=False)
    assert reply.code() == (400, -32602)
    assert reply.body["id"] == 1


def test_envelope_without_params_at_all_is_32602(mcp: Mcp) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    reply = mcp.raw(orjson.dumps(message), mcp.headers("tools/list", {}))
    assert reply.code() == (400, -32602)


def test_empty_client_capabilities_are_fine(mcp: Mcp) -> None:
    assert mcp.post("server/discover", opt_in=False).status == 200


def test_client_info_is_optional(mcp: Mcp) -> None:
    envelope = meta()
    del envelope["io.modelcontextprotocol/clientInfo"]
    assert mcp.post("tools/list", {"_meta": envelope}).status == 200


# -- step 6: protocol version --------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2099-01-01", "2025-11-25", "2025-06-18", "latest"])
def test_unsupported_version_is_32022_with_supported_and_requested(mcp: Mcp, version: str) -> None:
    params = {"_meta": meta(version=version)}
    reply = mcp.post("tools/list", params, MCP_Protocol_Version=version)
    assert reply.code() == (400, -32022)
    assert reply.error["data"] == {"supported": [PV], "requested": version}


# -- step 7: method lookup -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "method", ["tasks/list", "tasks/result", "roots/list", "ping", "notifications/x/y"]
)
def test_unknown_method_is_32601_with_404(mcp: Mcp, method: str) -> None:
    reply = mcp.post(method, {"taskId": "abc"})
    assert reply.code() == (404, -32601)
    assert reply.body["id"] == 1


@pytest.mark.parametrize("method", ["tasks/list", "tasks/result"])
def test_removed_task_methods_are_32601_without_mcp_name_or_opt_in(mcp: Mcp, method: str) -> None:
    reply = mcp.post(method, {"taskId": "abc"}, opt_in=False, Mcp_Name=None)
    assert reply.code() == (404, -32601)


def test_a_name_bearing_method_reaches_its_handler_once_its_headers_agree(mcp: Mcp) -> None:
    reply = mcp.post("prompts/get", {"name": "p"}, Mcp_Name="p")
    assert reply.code()[1] == -32602 and "unknown prompt 'p'" in reply.error["message"]


# -- the order of the ladder ---------------------------------------------------------------------
def test_envelope_comes_before_header_checks(mcp: Mcp) -> None:
    reply = mcp.post("tools/list", {}, with_meta=False, Mcp_Method="tools/call")
    assert reply.code() == (400, -32602)


def test_headers_come_before_version_support(mcp: Mcp) -> None:
    params = {"_meta": meta(version="2099-01-01")}
    assert mcp.post("tools/list", params).code() == (400, -32020)


def test_version_support_comes_before_method_lookup(mcp: Mcp) -> None:
    params = {"_meta": meta(version="2099-01-01")}
    reply = mcp.post("tasks/list", params, MCP_Protocol_Version="2099-01-01")
    assert reply.code() == (400, -32022)


def test_method_lookup_comes_before_params_and_capability(mcp: Mcp) -> None:
    reply = mcp.post("tasks/result", {"taskId": 5}, opt_in=False)
    assert reply.code() == (404, -32601)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_params_come_before_the_capability_gate(mcp: Mcp, method: str) -> None:
    reply = mcp.post(method, {}, opt_in=False, Mcp_Name="some-task")
    assert reply.code() == (400, -32602)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_capability_gate_comes_before_the_lookup(mcp: Mcp, method: str) -> None:
    params: dict[str, Any] = {"taskId": "gate-test"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    reply = mcp.post(method, params, opt_in=False)
    assert reply.code() == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_notifications_skip_the_rest_of_the_ladder(mcp: Mcp) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"_meta": 1}}
    reply = mcp.raw(orjson.dumps(message), {"Content-Type": "application/json", "Accept": "*/*"})
    assert (reply.status, reply.content) == (202, b"")
