"""Ladder steps 1 and 2: HTTP checks before any JSON is read, then parsing (digest §3.1, §3.2)."""

from __future__ import annotations

from collections.abc import Callable

import falcon.testing
import orjson
import pytest

from mcpq.frontend.app import create_app
from tests.unit.fakes import PV, SETTINGS, FakeProducer, Mcp, meta, registry

JSON = "application/json"


def discover_body(rid: object = 1) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "server/discover",
        "params": {"_meta": meta()},
    }
    return orjson.dumps(message)


def discover_headers(**overrides: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": JSON,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PV,
        "Mcp-Method": "server/discover",
    }
    for name, value in overrides.items():
        headers.pop(name.replace("_", "-"), None)
        if value is not None:
            headers[name.replace("_", "-")] = value
    return headers


def test_app_reads_headers_from_any_asgi_iterable(mcp: Mcp) -> None:
    app = create_app(
        SETTINGS, store=mcp.web, producer=FakeProducer(mcp.peek, mcp.keys), tools=registry
    )
    result = falcon.testing.TestClient(app).simulate_post(
        "/mcp", body=discover_body(), headers=discover_headers()
    )
    assert result.status_code == 200


# -- step 1: HTTP ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_non_post_is_405_with_allow_post(mcp: Mcp, method: str) -> None:
    reply = mcp.raw(b"", discover_headers(), method=method)
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_content_type_must_be_json(mcp: Mcp, content_type: str | None) -> None:
    reply = mcp.raw(discover_body(), discover_headers(Content_Type=content_type))
    assert reply.status == 400
    assert not reply.headers["content-type"].startswith(JSON)


def test_content_type_parameters_are_allowed(mcp: Mcp) -> None:
    headers = discover_headers(Content_Type="application/json; charset=utf-8")
    assert mcp.raw(discover_body(), headers).status == 200


@pytest.mark.parametrize("accept", ["text/plain", "text/event-stream", "image/*", None])
def test_accept_without_json_is_406(mcp: Mcp, accept: str | None) -> None:
    assert mcp.raw(discover_body(), discover_headers(Accept=accept)).status == 406


@pytest.mark.parametrize(
    "accept", [JSON, "*/*", "application/*", "text/html, application/json;q=0.9"]
)
def test_accept_with_json_or_a_wildcard_is_fine(mcp: Mcp, accept: str) -> None:
    assert mcp.raw(discover_body(), discover_headers(Accept=accept)).status == 200


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://localhost.evil.example", "null"]
)
def test_foreign_origin_is_403(mcp: Mcp, origin: str) -> None:
    reply = mcp.raw(discover_body(), discover_headers(Origin=origin))
    assert reply.status == 403
    assert "id" not in reply.body
    assert "result" not in reply.body


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:9000", "http://localhost"],
)
def test_local_origin_is_fine(mcp: Mcp, origin: str) -> None:
    assert mcp.raw(discover_body(), discover_headers(Origin=origin)).status == 200


def test_configured_origin_is_fine(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(allowed_origins=("https://app.example",))
    assert mcp.raw(discover_body(), discover_headers(Origin="https://app.example")).status == 200
    assert mcp.raw(discover_body(), discover_headers(Origin="https://other.example")).status == 403


def test_origin_is_checked_before_the_method(mcp: Mcp) -> None:
    headers = discover_headers(Origin="https://evil.example")
    assert mcp.raw(b"", headers, method="GET").status == 403


def test_content_type_is_checked_before_accept(mcp: Mcp) -> None:
    headers = discover_headers(Content_Type="text/plain", Accept="text/plain")
    assert mcp.raw(discover_body(), headers).status == 400


def test_oversize_body_is_413(make_mcp: Callable[..., Mcp]) -> None:
    body = discover_body()
    mcp = make_mcp(max_body_bytes=len(body))
    assert mcp.raw(body, discover_headers()).status == 200
    assert mcp.raw(body + b" ", discover_headers()).status == 413


def test_an_oversized_body_is_refused_before_it_is_read(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_body_bytes=10)
    assert mcp.raw(discover_body(), discover_headers(Accept="text/plain")).status == 413


def test_session_id_is_ignored_and_never_echoed(mcp: Mcp) -> None:
    reply = mcp.raw(discover_body(), {**discover_headers(), "Mcp-Session-Id": "abc"})
    assert reply.status == 200
    assert "mcp-session-id" not in reply.headers


# -- step 2: parsing -----------------------------------------------------------------------------
@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe"])
def test_invalid_json_is_32700_with_null_id(mcp: Mcp, body: bytes) -> None:
    reply = mcp.raw(body, discover_headers())
    assert reply.code() == (400, -32700)
    assert reply.body["id"] is None


def test_parse_errors_come_before_routing_headers(mcp: Mcp) -> None:
    headers = {"Content-Type": JSON, "Accept": JSON}
    assert mcp.raw(b"{oops", headers).code() == (400, -32700)


@pytest.mark.parametrize(
    "message",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}],
        [],
        "server/discover",
        42,
        None,
    ],
)
def test_batch_or_non_object_is_32600_with_null_id(mcp: Mcp, message: object) -> None:
    reply = mcp.raw(orjson.dumps(message), discover_headers())
    assert reply.code() == (400, -32600)
    assert reply.body["id"] is None


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "result": {}},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "x"}},
        {"jsonrpc": "1.0", "id": 7, "method": "server/discover"},
        {"id": 7, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": True, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": None, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": 7, "method": 12},
    ],
)
def test_posted_response_or_malformed_request_is_32600(mcp: Mcp, message: object) -> None:
    reply = mcp.raw(orjson.dumps(message), discover_headers())
    assert reply.code() == (400, -32600)
    assert reply.body["id"] is None


def test_notification_is_202_with_an_empty_body(mcp: Mcp) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    headers = {"Content-Type": JSON, "Accept": "application/json, text/event-stream"}
    reply = mcp.raw(orjson.dumps(message), headers)
    assert reply.status == 202
    assert reply.content == b""


def test_params_must_be_an_object(mcp: Mcp) -> None:
    message = {"jsonrpc": "2.0", "id": "r-1", "method": "server/discover", "params": [1]}
    reply = mcp.raw(orjson.dumps(message), discover_headers())
    assert reply.code() == (400, -32602)
    assert reply.body["id"] == "r-1"


@pytest.mark.parametrize("rid", [0, 99, "abc", ""])
def test_the_request_id_is_echoed(mcp: Mcp, rid: object) -> None:
    reply = mcp.raw(discover_body(rid), discover_headers())
    assert reply.status == 200
    assert reply.body["id"] == rid
    assert reply.body["jsonrpc"] == "2.0"
    assert reply.headers["content-type"].startswith(JSON)
