"""Result envelopes (spec digest §4.1, §2.4): ``resultType`` and ``_meta.serverInfo`` on every
result, the exact acks, ``server/discover``; and failures: handler exceptions (-32603, no
traceback) and an unreachable store (HTTP 503)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from importlib.metadata import version
from typing import Any

import pytest
from falcon.util.sync import async_to_sync

from mcpq.frontend import methods
from mcpq.shared.results import call_tool_result
from mcpq.shared.store import AsyncTaskStore, Keys, WebStore, web_store
from mcpq.shared.store.clients import async_client
from tests.unit.fakes import SERVER_INFO, SETTINGS, TASKS, Mcp, Reply

CONFIRM: dict[str, Any] = {"elicitation": {}}


def task_and_ack(mcp: Mcp, method: str) -> Reply:
    task_id = mcp.new_task()
    params: dict[str, Any] = {"taskId": task_id}
    if method == "tasks/update":
        params["inputResponses"] = {"k": {"action": "accept"}}
    return mcp.post(method, params)


def sync_call(mcp: Mcp) -> Reply:
    mcp.producer.on_enqueue = mcp.worker.runs(
        lambda record, answers: ("completed", call_tool_result("ok").dump())
    )
    return mcp.call("quick", {}, Accept="application/json")


def streamed_sync_call(mcp: Mcp) -> Reply:
    mcp.producer.on_enqueue = mcp.worker.runs(
        lambda record, answers: ("completed", call_tool_result("ok").dump())
    )
    return mcp.call("quick", {})


REQUESTS: dict[str, Callable[[Mcp], Reply]] = {
    "server/discover": lambda mcp: mcp.post("server/discover"),
    "tools/list": lambda mcp: mcp.post("tools/list"),
    "tools/call task": lambda mcp: mcp.call("echo", {"text": "x"}),
    "tools/call input_required": lambda mcp: mcp.call("guarded", {"target": "x"}, caps=CONFIRM),
    "tools/call isError": lambda mcp: mcp.call("echo", {}),
    "tools/call sync": sync_call,
    "tools/call sync, streamed": streamed_sync_call,
    "tasks/get": lambda mcp: mcp.get(mcp.new_task()),
    "tasks/update": lambda mcp: task_and_ack(mcp, "tasks/update"),
    "tasks/cancel": lambda mcp: task_and_ack(mcp, "tasks/cancel"),
}
RESULT_TYPES = {"tools/call task": "task", "tools/call input_required": "input_required"}


@pytest.mark.parametrize("name", list(REQUESTS))
def test_every_result_has_a_result_type_and_server_info(mcp: Mcp, name: str) -> None:
    reply = REQUESTS[name](mcp)
    assert reply.status == 200
    streamed = name.endswith("streamed")
    assert reply.headers["content-type"].startswith(
        "text/event-stream" if streamed else "application/json"
    )
    result = reply.result
    assert result["resultType"] == RESULT_TYPES.get(name, "complete")
    info = result["_meta"][SERVER_INFO]
    assert info == {"name": "mcpq-unit", "version": version("mcpq-server")}


@pytest.mark.parametrize("method", ["tasks/update", "tasks/cancel"])
def test_acks_are_exactly_result_type_and_meta(mcp: Mcp, method: str) -> None:
    result = task_and_ack(mcp, method).result
    assert result == {
        "resultType": "complete",
        "_meta": {SERVER_INFO: result["_meta"][SERVER_INFO]},
    }


def test_discover_shape(mcp: Mcp) -> None:
    result = mcp.post("server/discover", opt_in=False).result
    assert result["supportedVersions"] == ["2026-07-28"]
    capabilities = result["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities
    assert capabilities["tools"] == {"listChanged": True}  # told on subscriptions/listen
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert result["ttlMs"] == 0
    assert result["cacheScope"] in {"public", "private"}
    assert isinstance(result.get("instructions", ""), str)


def test_errors_carry_no_result(mcp: Mcp) -> None:
    body = mcp.post("tasks/list").body
    assert set(body) == {"jsonrpc", "id", "error"}
    assert set(body["error"]) <= {"code", "message", "data"}


# -- handler exceptions --------------------------------------------------------------------------
SECRET = "s3cr3t-internal-detail"


def test_handler_exception_is_32603_without_a_traceback(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(services: Any, req: Any) -> dict[str, Any]:
        raise RuntimeError(SECRET)

    monkeypatch.setitem(methods.ROUTES, "tools/list", ((methods.PROTOCOL_VERSION, boom),))
    reply = mcp.post("tools/list", rid=9)
    assert reply.code() == (200, -32603)
    assert reply.body["id"] == 9
    for leak in (SECRET, "Traceback", "RuntimeError", ".py"):
        assert leak.encode() not in reply.content


def test_store_exception_is_32603_without_a_traceback(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = mcp.new_task()

    async def broken(*args: Any) -> Any:
        raise KeyError(SECRET)

    monkeypatch.setattr(mcp.store, "get", broken)
    reply = mcp.get(task_id)
    assert reply.code() == (200, -32603)
    assert SECRET.encode() not in reply.content
    assert b"KeyError" not in reply.content


# -- the store is down ---------------------------------------------------------------------------
@pytest.fixture
def dead_store() -> Iterator[WebStore]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = replace(SETTINGS, redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout_s=0.2)
    client = async_client(settings)
    yield web_store(AsyncTaskStore(client, Keys(settings.key_prefix)))
    async_to_sync(client.aclose)


def assert_unavailable(reply: Reply) -> None:
    assert reply.code() == (503, -32603)
    assert reply.error["message"] == "task store unavailable"
    assert b"Connection" not in reply.content


@pytest.mark.parametrize(
    "request_",
    [
        lambda mcp: mcp.call("echo", {"text": "x"}),
        lambda mcp: mcp.call("echo", {"text": "x"}, opt_in=False),
        lambda mcp: mcp.get("some-task"),
        lambda mcp: mcp.post("tasks/update", {"taskId": "t", "inputResponses": {}}),
        lambda mcp: mcp.post("tasks/cancel", {"taskId": "t"}),
    ],
    ids=["tools/call task", "tools/call sync", "tasks/get", "tasks/update", "tasks/cancel"],
)
def test_unreachable_store_is_503(
    make_mcp: Callable[..., Mcp], dead_store: WebStore, request_: Callable[[Mcp], Reply]
) -> None:
    mcp = make_mcp(store=dead_store, redis_timeout_s=0.2)
    started = time.monotonic()
    assert_unavailable(request_(mcp))
    assert time.monotonic() - started < 5
    assert mcp.producer.calls == []


def test_requests_without_the_store_still_work_while_it_is_down(
    make_mcp: Callable[..., Mcp], dead_store: WebStore
) -> None:
    mcp = make_mcp(store=dead_store)
    assert mcp.post("server/discover").status == 200
    assert mcp.post("tools/list").status == 200
    assert mcp.get("t", opt_in=False).code() == (400, -32021)
