"""`mcpq call` / `mcpq task` stop on one line naming what the server said, never a traceback.

The SDK reports an HTTP error status only as an ``MCPError`` (``Server returned an error
response``, code -32603, whatever the status); :class:`Refusals` sees the responses themselves
(an httpx2 response hook), here as mcpq's web tier writes them (``frontend.auth``,
``http_checks``, ``rate_limits``, ``errors``). A real server answers the same in
``tests/e2e/test_mcpq_call_errors.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from mcp import MCPError

from mcpq.ops.cli.call_output import (
    EXIT_NO_ANSWER,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    HttpRefusal,
    Refusals,
    failure,
)
from mcpq.ops.cli.call_prompts import CannotPrompt, UsageError

URL = "http://127.0.0.1:8000/mcp"
KEY = "mcpq_0123456789abcdef_" + "s" * 43
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"


def refused(
    status: int,
    body: Any = None,
    *,
    token: str | None = None,
    url: str = URL,
    content_type: str = "application/json",
    **headers: str,
) -> HttpRefusal:
    """What :class:`Refusals` records of a POST answered with ``status``."""
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    request = httpx2.Request("POST", url, headers=sent, json={"jsonrpc": "2.0", "id": 1})
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = {"content-type": content_type, **{k.replace("_", "-"): v for k, v in headers.items()}}
    response = httpx2.Response(status, headers=answer, content=raw, request=request)
    refusals = Refusals()
    asyncio.run(refusals(response))
    assert refusals.last is not None
    return refusals.last


def line(refusal: HttpRefusal, url: str = URL) -> str:
    text, status = failure(
        MCPError(-32603, "Server returned an error response"), url, refusal, MCPError
    )
    assert status == EXIT_UNREACHABLE
    return text


def rpc_error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": None, "error": error}


def test_421_names_the_host_the_client_sent() -> None:
    body = rpc_error(
        -32600, "Misdirected Request: this server does not answer to that Host (MCPQ_ALLOWED_HOSTS)"
    )
    got = refused(421, body, url="http://mcp.internal:8000/mcp")
    assert line(got) == (
        "421 this server does not answer to host mcp.internal:8000 (set MCPQ_ALLOWED_HOSTS)"
    )


def test_401_without_a_key_says_to_set_one() -> None:
    body = {"error": "unauthorized", "error_description": "authentication required"}
    got = refused(401, body, www_authenticate='Bearer realm="mcpq"')
    assert line(got) == "401 no API key (set MCPQ_TOKEN)"


def test_401_with_a_key_says_it_is_revoked_or_wrong_and_never_shows_it() -> None:
    body = {"error": "invalid_token", "error_description": "unknown or revoked API key"}
    challenge = (
        'Bearer realm="mcpq", error="invalid_token", error_description="unknown or revoked API key"'
    )
    got = refused(401, body, token=KEY, www_authenticate=challenge)
    assert line(got) == "401 the key was revoked or is wrong"
    assert KEY not in repr(got)


def test_401_with_an_oauth_token_says_why_it_was_refused() -> None:
    body = {"error": "invalid_token", "error_description": "token expired"}
    got = refused(401, body, token=JWT, www_authenticate='Bearer error="invalid_token"')
    assert line(got) == "401 the token was refused: token expired"
    assert JWT not in line(got)


def test_403_of_the_authenticator_names_the_scope_of_the_challenge() -> None:
    challenge = (
        'Bearer realm="mcpq", error="insufficient_scope", '
        'error_description="the token lacks a required scope", scope="mcp:tools"'
    )
    body = {"error": "insufficient_scope", "error_description": "the token lacks a required scope"}
    assert line(refused(403, body, token=KEY, www_authenticate=challenge)) == (
        "403 missing scope mcp:tools"
    )


def test_403_of_a_tool_names_only_the_scope_that_is_missing() -> None:
    """The challenge's ``scope`` lists every scope the tool needs; its description (and the
    JSON-RPC message) names the one the caller lacks."""
    challenge = (
        'Bearer realm="mcpq", error="insufficient_scope", '
        'error_description="tool deploy needs scope deploy:prod", scope="deploy deploy:prod"'
    )
    body = rpc_error(
        -32600,
        "Forbidden: tool deploy needs scope deploy:prod",
        {"requiredScopes": ["deploy", "deploy:prod"]},
    )
    got = refused(403, body, token=KEY, www_authenticate=challenge)
    assert line(got) == "403 missing scope deploy:prod"


def test_403_without_a_scope_says_what_the_server_said() -> None:
    body = rpc_error(-32600, "Forbidden: invalid Origin")
    assert line(refused(403, body)) == "403 forbidden: Forbidden: invalid Origin"


def test_429_names_the_limit_and_when_to_retry() -> None:
    data = {"limit": "rate", "setting": "MCPQ_CREATE_RATE", "retryAfterMs": 2500}
    body = rpc_error(-32029, "Tasks are being created too fast: retry after 2500 ms", data)
    got = refused(429, body, retry_after="3")
    assert line(got) == "429 Tasks are being created too fast (MCPQ_CREATE_RATE): retry in 3 s"


def test_429_of_a_proxy_still_says_when_to_retry() -> None:
    got = refused(429, b"slow down", content_type="text/html", retry_after="30")
    assert line(got) == "429 too many requests: retry in 30 s"
    assert line(refused(429, b"", content_type="text/html")) == "429 too many requests: retry later"


def test_503_says_what_is_unavailable_and_when_to_retry() -> None:
    got = refused(503, rpc_error(-32603, "task store unavailable"), retry_after="2")
    assert line(got) == "503 task store unavailable: retry in 2 s"
    keys = {"error": "temporarily_unavailable", "error_description": "the keys are unavailable"}
    assert line(refused(503, keys, retry_after="5")) == "503 the keys are unavailable: retry in 5 s"
    page = refused(503, b"<html>busy</html>", content_type="text/html")
    assert line(page) == "503 the server is unavailable: retry later"


def test_404_without_json_rpc_is_a_wrong_endpoint() -> None:
    url = "http://127.0.0.1:8000/nothing"
    got = refused(404, b"Not Found", url=url, content_type="text/plain")
    assert line(got, url) == (
        "404 no MCP endpoint at http://127.0.0.1:8000/nothing (check --url or MCPQ_URL)"
    )


def test_other_statuses_say_what_the_server_said() -> None:
    unknown = refused(400, rpc_error(-32602, "Failed to retrieve task: Task not found"))
    assert line(unknown) == "400 Failed to retrieve task: Task not found (code -32602)"
    method = refused(404, rpc_error(-32601, "Method not found: tasks/list"))
    assert line(method) == "404 Method not found: tasks/list (code -32601)"
    text = b"Method Not Allowed: this endpoint takes POST only"
    not_post = refused(405, text, content_type="text/plain")
    assert line(not_post) == "405 Method Not Allowed: this endpoint takes POST only"
    proxy = refused(
        502, b"<html><body>" + b"x" * 5000 + b"</body></html>", content_type="text/html"
    )
    assert line(proxy) == "502 Bad Gateway"
    plain = refused(500, b"boom\nat line 3", content_type="text/plain; charset=utf-8")
    assert line(plain) == "500 Internal Server Error: boom"


def test_a_success_clears_the_refusal_and_other_methods_are_not_watched() -> None:
    refusals = Refusals()
    get = httpx2.Request("GET", URL)
    post = httpx2.Request("POST", URL, json={})
    asyncio.run(refusals(httpx2.Response(405, request=get)))
    assert refusals.last is None
    asyncio.run(refusals(httpx2.Response(401, request=post)))
    assert refusals.last is not None and refusals.last.status == 401
    asyncio.run(refusals(httpx2.Response(200, request=post)))
    assert refusals.last is None


def test_a_large_error_body_is_not_read() -> None:
    refusals = Refusals()
    post = httpx2.Request("POST", URL, json={})
    big = httpx2.Response(
        502,
        headers={"content-length": str(1 << 20), "content-type": "text/plain"},
        stream=httpx2.ByteStream(b"x" * (1 << 20)),
        request=post,
    )
    asyncio.run(refusals(big))
    assert refusals.last is not None and refusals.last.message == ""
    assert line(refusals.last) == "502 Bad Gateway"


def test_an_error_that_was_not_an_http_status_keeps_its_own_words() -> None:
    got = failure(MCPError(-32602, "Failed to retrieve task: Task not found"), URL, None, MCPError)
    assert got == ("Failed to retrieve task: Task not found (code -32602)", EXIT_UNREACHABLE)


def test_a_refused_connection_names_the_url() -> None:
    async def post() -> None:
        async with httpx2.AsyncClient() as client:
            await client.post("http://127.0.0.1:1/mcp", json={})

    with pytest.raises(httpx2.ConnectError) as caught:
        asyncio.run(post())
    assert failure(caught.value, "http://127.0.0.1:1/mcp", None, MCPError) == (
        "cannot reach http://127.0.0.1:1/mcp: connection refused (is the server running?)",
        EXIT_UNREACHABLE,
    )


def test_usage_and_unanswerable_questions_have_their_own_statuses() -> None:
    assert failure(UsageError("no tool 'x' on this server"), URL, None, MCPError) == (
        "no tool 'x' on this server",
        EXIT_USAGE,
    )
    assert failure(CannotPrompt("stdin is not a terminal"), URL, None, MCPError) == (
        "cannot prompt: stdin is not a terminal (answer with --answer KEY=JSON or run in a "
        "terminal)",
        EXIT_NO_ANSWER,
    )


def test_what_a_server_says_is_one_line_without_terminal_escapes() -> None:
    body = rpc_error(-32603, "store down\n\x1b[2Jtraceback follows\r\n  at ...")
    assert line(refused(500, body)) == "500 store down [2Jtraceback follows at ... (code -32603)"
    long = refused(400, rpc_error(-32602, "x" * 2000))
    assert len(line(long)) == 500
