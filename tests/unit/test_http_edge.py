"""The closed HTTP edge, without servers: the JSON depth scan on raw bytes, the Host and Origin
rules of ``/mcp``, ``Retry-After`` on 503 and a body cut short (the live probes against a real
``mcpq web`` are in ``tests/ops/test_http_edge_live.py``)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
import pytest

from mcpq.frontend.asgi_adapter import AsgiAdapter
from mcpq.frontend.http_checks import Addressing, split_host
from mcpq.frontend.http_messages import ClientGone
from mcpq.ops.runtime.uvicorn_worker import host_warning, loopback_only
from mcpq.shared.bounds import LimitExceeded, check_raw_depth, depth
from mcpq.shared.settings import Settings
from tests.unit.fakes import SETTINGS, Mcp, meta


# -- the depth scan ------------------------------------------------------------------------------
def too_deep(raw: bytes, limit: int) -> bool:
    try:
        check_raw_depth(raw, limit)
    except LimitExceeded as exc:
        assert f"MCPQ_MAX_JSON_DEPTH ({limit})" in str(exc)
        return True
    return False


@pytest.mark.parametrize(
    ("raw", "deepest"),
    [
        (b"1", 0),
        (b"[]", 1),
        (b'{"a": [{}, [[]]]}', 4),
        (b'["[[[[[[", "{{{{"]', 1),  # brackets inside strings do not count
        (b'["\\"[[[[", "x"]', 1),  # an escaped quote does not end the string
        (b'["\\\\", [[["x"]]]]', 4),  # an escaped backslash does: the brackets after count
        (b'[["a\\u005b]"], {"k]": "}}"}]', 2),
        (b"[[1], [2], [3], [4], [5], [6]]", 2),  # many openers, shallow
        (b"  [ [ [\n1\n] ] ]  ", 3),
    ],
)
def test_the_scan_measures_nesting_outside_strings(raw: bytes, deepest: int) -> None:
    assert not too_deep(raw, deepest)
    assert too_deep(raw, deepest - 1) or deepest == 0


def test_the_scan_agrees_with_the_parsed_depth() -> None:
    rng = random.Random(7)

    def build(level: int) -> Any:
        if level > 12 or rng.random() < 0.2:
            return rng.choice([1, "s[{", 'q"}]', "\\[", None, 2.5])
        if rng.random() < 0.5:
            return [build(level + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}[": build(level + 1) for i in range(rng.randint(0, 3))}

    for _ in range(300):
        value = build(0)
        raw = orjson.dumps(value)
        found = depth(value)
        assert not too_deep(raw, found), raw
        if found:
            assert too_deep(raw, found - 1), raw


def test_an_unterminated_string_hides_what_follows() -> None:
    # Invalid JSON is the parser's to refuse (-32700); the scan only must not call it deep.
    assert not too_deep(b'{"a": "[[[[[[[[[[[[', 2)


def test_the_scan_is_linear_on_a_large_body() -> None:
    body = orjson.dumps({"items": [{"n": i, "s": "x[" * 20} for i in range(20_000)]})
    check_raw_depth(body, 3)  # hundreds of KiB: one pass, no recursion, no error
    assert too_deep(b"[" * 100_000 + b"]" * 100_000, 64)


@pytest.mark.parametrize("levels", [65, 255, 256, 1024, 1025, 100_000])
def test_deep_bodies_get_32600_and_never_32603(mcp: Mcp, levels: int) -> None:
    for nest in ("[" * levels + "]" * levels, '{"a":' * levels + "1" + "}" * levels):
        body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{nest}}}}}'
        reply = mcp.raw(body.encode())
        assert reply.code() == (400, -32600), levels
        assert reply.body["id"] is None
        assert "MCPQ_MAX_JSON_DEPTH (64)" in reply.error["message"]


def test_a_body_at_the_limit_is_served(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_json_depth=8)
    # The message and its params are 2 levels, the value 6 more: 8 in all.
    params = {"_meta": meta(opt_in=False), "x": [[[[[[1]]]]]]}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}
    assert depth(message) == 8
    headers = mcp.headers("tools/list", params)
    assert mcp.raw(orjson.dumps(message), headers).status == 200
    params["x"] = [params["x"]]
    assert mcp.raw(orjson.dumps(message), headers).code() == (400, -32600)


@pytest.mark.parametrize("body", [b"\xff\xfe{}", b'{"a": 1,}', b"[1, 2", b'{"a": "\\x"}', b"nul"])
def test_every_undecodable_body_is_32700(mcp: Mcp, body: bytes) -> None:
    assert mcp.raw(body).code() == (400, -32700)


# -- Host ----------------------------------------------------------------------------------------
def addressing(**overrides: Any) -> Addressing:
    return Addressing.from_settings(replace(Settings(), **overrides))


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("Example.COM", ("example.com", "")),
        ("example.com.:8443", ("example.com", "8443")),
        ("[::1]:8000", ("[::1]", "8000")),
        ("[::1]", ("[::1]", "")),
        ("::1", ("[::1]", "")),
        ("127.0.0.1:80", ("127.0.0.1", "80")),
        ("example.com:http", None),
        ("user@example.com", None),
        ("a.example, b.example", None),
        ("[::1", None),
        ("[::1]x", None),
        ("", None),
        (":80", None),
    ],
)
def test_split_host(value: str, parsed: tuple[str, str] | None) -> None:
    assert split_host(value) == parsed


def test_default_hosts_are_the_loopback_names() -> None:
    rules = addressing()
    for host in ("localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000", "LOCALHOST"):
        assert rules.host_allowed(host), host
    for host in ("attacker.example", "localhost.attacker.example", "10.0.0.1:8000", "", None):
        assert not rules.host_allowed(host), host


def test_configured_hosts_replace_the_defaults_and_may_pin_a_port() -> None:
    rules = addressing(allowed_hosts=("mcp.example.com", "internal:8000"))
    assert rules.host_allowed("mcp.example.com") and rules.host_allowed("mcp.example.com:443")
    assert rules.host_allowed("internal:8000")
    assert not rules.host_allowed("internal:8001") and not rules.host_allowed("internal")
    assert not rules.host_allowed("localhost")


def test_the_resource_urls_host_is_always_allowed() -> None:
    rules = addressing(resource_url="https://mcp.example.com/mcp")
    assert rules.host_allowed("mcp.example.com") and rules.host_allowed("localhost:8000")
    assert not rules.host_allowed("attacker.example")
    pinned = addressing(allowed_hosts=("a.example",), resource_url="https://mcp.example.com/mcp")
    assert pinned.host_allowed("mcp.example.com:443") and not pinned.host_allowed("localhost")


def test_a_star_allows_any_host() -> None:
    assert addressing(allowed_hosts=("*",)).host_allowed("attacker.example")
    assert addressing(allowed_hosts=("*",)).host_allowed(None)


def test_a_foreign_host_gets_421_before_anything_else(mcp: Mcp) -> None:
    result = mcp.client.simulate_post(
        "/mcp", body=b"{oops", headers={"Origin": "https://evil.example"}, host="attacker.example"
    )
    assert result.status_code == 421
    body = orjson.loads(result.content)
    assert body["error"]["code"] == -32600 and "id" not in body
    assert "MCPQ_ALLOWED_HOSTS" in body["error"]["message"]
    assert "attacker" not in body["error"]["message"]


def test_health_answers_any_host(mcp: Mcp) -> None:
    assert mcp.client.simulate_get("/healthz", host="10.1.2.3").status_code == 200


# -- Origin --------------------------------------------------------------------------------------
LOOPBACK_ORIGINS = ("http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:9000")


def test_loopback_origins_only_on_a_loopback_bind() -> None:
    local, public = addressing(loopback_bind=True), addressing(loopback_bind=False)
    for origin in LOOPBACK_ORIGINS:
        assert local.origin_allowed(origin), origin
        assert not public.origin_allowed(origin), origin
    for origin in ("http://localhost.evil.example", "null", "file://", "ftp://localhost"):
        assert not local.origin_allowed(origin), origin


def test_configured_and_own_origins_on_a_public_bind() -> None:
    rules = addressing(
        allowed_origins=("https://App.example",), resource_url="https://mcp.example.com/mcp"
    )
    assert rules.origin_allowed("https://app.example")
    assert rules.origin_allowed("https://mcp.example.com")
    assert not rules.origin_allowed("http://mcp.example.com")  # another scheme: another origin
    assert not rules.origin_allowed("https://evil.example")
    assert addressing(allowed_origins=("*",)).origin_allowed("https://evil.example")


def test_a_localhost_origin_is_refused_by_a_publicly_bound_app(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(loopback_bind=False)
    params: dict[str, Any] = {"_meta": meta()}
    headers = {**mcp.headers("server/discover", params), "Origin": "http://localhost:3000"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params}
    assert mcp.raw(orjson.dumps(message), headers).status == 403


@pytest.mark.parametrize(
    ("binds", "loopback"),
    [
        (["127.0.0.1:8000"], True),
        (["[::1]:8000", "localhost:8000", "unix:/run/mcpq.sock"], True),
        (["127.0.0.1:8000", "0.0.0.0:8000"], False),
        (["[::]:8000"], False),
        (["mcp.example.com:80"], False),
        (["fd://3"], False),
        ([], False),
    ],
)
def test_a_loopback_bind_is_every_address_loopback(binds: list[str], loopback: bool) -> None:
    assert loopback_only(binds) is loopback


def test_the_bind_reaches_the_settings() -> None:
    assert Settings.from_env({"MCPQ_LOOPBACK_BIND": "1"}).loopback_bind
    assert not Settings.from_env({}).loopback_bind  # unknown counts as public
    assert SETTINGS.loopback_bind  # the unit tests' app runs like `mcpq dev`


# -- the ASGI edge: Retry-After, a body cut short -----------------------------------------------
def run_asgi(app: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    asyncio.run(AsgiAdapter(app)(scope, receive, send))
    return sent


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [
        (503, [], [b"2"]),
        (503, [(b"Retry-After", b"5")], [b"5"]),  # a route's own value stands
        (200, [], []),
        (429, [(b"retry-after", b"1")], [b"1"]),
    ],
)
def test_every_503_carries_retry_after(
    status: int, headers: list[tuple[bytes, bytes]], retry_after: list[bytes]
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    start = run_asgi(app, [])[0]
    assert [v for n, v in start["headers"] if n.lower() == b"retry-after"] == retry_after


def test_a_store_outage_is_503_with_retry_after(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp()

    async def down(*args: Any, **kwargs: Any) -> Any:
        from mcpq.shared.errors import StoreUnavailable

        raise StoreUnavailable()

    mcp.store.create = down  # type: ignore[method-assign]
    reply = mcp.call("echo", {"text": "hi"})
    assert reply.status == 503
    assert reply.headers["retry-after"] == "2"


def echo_call(mcp: Mcp, *, announced_extra: int = 0) -> tuple[bytes, dict[str, Any]]:
    """A raw ASGI ``tools/call`` of echo: its body, and its scope (``Content-Length`` announcing
    ``announced_extra`` bytes more than the body)."""
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta()}
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    head = {**mcp.headers("tools/call", params), "Host": "falconframework.org"}
    headers = [(k.lower().encode(), v.encode()) for k, v in head.items()]
    headers.append((b"content-length", str(len(body) + announced_extra).encode()))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "query_string": b""}
    scope["headers"] = headers
    return body, scope


def test_a_body_cut_short_is_not_served(mcp: Mcp) -> None:
    body, scope = echo_call(mcp, announced_extra=100)
    # The adapter inside the app under test, reached through the unit tests' shim.
    app = mcp.shim.app
    sent: list[dict[str, Any]] = []
    messages = [
        {"type": "http.request", "body": body, "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert mcp.producer.calls == []
    assert sent[0]["status"] == 400  # never seen by the client: it is gone


def test_a_public_bind_without_a_public_name_is_warned_about() -> None:
    public = ["0.0.0.0:8000"]
    warning = host_warning(Settings(), public)
    assert warning is not None and "MCPQ_ALLOWED_HOSTS" in warning
    assert host_warning(Settings(), ["127.0.0.1:8000"]) is None
    assert host_warning(Settings(allowed_hosts=("mcp.example.com",)), public) is None
    assert host_warning(Settings(resource_url="https://mcp.example.com/mcp"), public) is None


def test_a_request_answered_at_once_spends_no_watch_on_the_clients_disconnect(mcp: Mcp) -> None:
    """Only a handler that waits watches for the disconnect (ClientGone): a plain request reads
    its body and is answered, and nothing else calls the server's receive()."""
    body, scope = echo_call(mcp)
    sent: list[dict[str, Any]] = []
    received: list[str] = []

    async def receive() -> dict[str, Any]:
        received.append("receive")
        if len(received) == 1:
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # a client that stays: the disconnect never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(mcp.shim.app(scope, receive, send))
    assert sent[0]["status"] == 200
    assert received == ["receive"]


def test_a_watch_asked_for_before_the_body_is_in_starts_once_it_is() -> None:
    started: list[str] = []
    gone = ClientGone()
    gone.watch()  # nothing to start yet
    assert started == []
    gone.arm(lambda: started.append("watching"))
    gone.watch()  # once only
    assert started == ["watching"] and not gone.is_set()

    async def left() -> None:
        waiting = asyncio.ensure_future(gone.wait())
        await asyncio.sleep(0)
        gone.set()
        await asyncio.wait_for(waiting, 1)

    asyncio.run(left())
    assert gone.is_set()
