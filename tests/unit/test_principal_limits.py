"""Per-principal limits (create.lua, atomically in Redis): unfinished tasks, the creation rate
(a token bucket), concurrent synchronous calls. Over a limit: 429 + Retry-After and a JSON-RPC
error whose data names the limit; other principals are unaffected; /metrics counts it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from falcon import testing

from mcpq.frontend import web_metrics
from mcpq.shared.store import Admission, NewTask, Refused, task_ref
from tests.unit.fakes import Mcp, async_to_sync


def rejections(limit: str) -> float:
    return web_metrics.LIMIT_REJECTIONS.labels(limit)._value.get()


def test_the_creation_rate_refuses_with_429_and_retry_after(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",), create_rate=0.5, create_burst=2)
    flood, calm = mcp.api_key("flood"), mcp.api_key("calm")
    mcp.token = flood
    before = rejections("rate")
    assert mcp.call("echo", {"text": "a"}).status == 200
    assert mcp.call("echo", {"text": "b"}).status == 200
    refused = mcp.call("echo", {"text": "c"})
    assert refused.code() == (429, -32029)
    data = refused.error["data"]
    assert data["limit"] == "rate" and data["setting"] == "MCPQ_CREATE_RATE"
    assert 1000 <= data["retryAfterMs"] <= 2000  # one token at 0.5/s
    assert refused.headers["retry-after"] == "2"
    assert len(mcp.producer.enqueues) == 2  # the refused call created and enqueued nothing
    assert rejections("rate") == before + 1
    mcp.token = calm  # another principal has its own bucket
    assert mcp.call("echo", {"text": "d"}).status == 200


def test_unfinished_tasks_are_bounded_and_a_finished_one_frees_its_slot(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(auth=("apikey",), max_open_tasks=2, create_rate=0)
    mcp.token = mcp.api_key("busy")
    first, _ = mcp.new_task(), mcp.new_task()
    refused = mcp.call("echo", {"text": "x"})
    assert refused.code() == (429, -32029)
    assert refused.error["data"]["limit"] == "tasks"
    assert refused.error["data"]["setting"] == "MCPQ_MAX_OPEN_TASKS"
    assert "retry-after" in refused.headers
    claim = mcp.worker.claim_now(first)
    mcp.worker.finish_now(first, claim.gen, "completed", {"content": []})
    assert mcp.call("echo", {"text": "x"}).status == 200
    mcp.token = mcp.api_key("other")
    assert mcp.call("echo", {"text": "x"}).status == 200


def test_a_limit_of_zero_is_no_limit(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(max_open_tasks=0, create_rate=0)
    for _ in range(5):
        mcp.new_task()


def test_concurrent_synchronous_calls_are_bounded(make_mcp: Callable[..., Mcp]) -> None:
    """Through the store (a sync call waits for a worker the unit app does not have)."""
    mcp = make_mcp()

    def hidden(n: int) -> NewTask:
        ref = task_ref(f"sync-{n}")
        return NewTask(ref, "quick", "mcpq", "p", {}, {}, 60_000, 1000, {}, True)

    admit = Admission("pk", kind="sync", max_open=2)
    assert async_to_sync(mcp.store.create, hidden(1), 30_000, admit) is not None
    assert async_to_sync(mcp.store.create, hidden(2), 30_000, admit) is not None
    try:
        async_to_sync(mcp.store.create, hidden(3), 30_000, admit)
        raise AssertionError("the third concurrent sync call was admitted")
    except Refused as exc:
        assert exc.limit == "sync"
    # Task creations of the same principal are a separate budget.
    tasks = Admission("pk", kind="tasks", max_open=2)
    assert async_to_sync(mcp.store.create, hidden(4), 30_000, tasks) is not None


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_a_legacy_session_gets_429_too(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(create_rate=0.1, create_burst=1)
    client: testing.TestClient = mcp.client
    init, hdrs = INITIALIZE, BASE_HEADERS
    opened = client.simulate_post("/mcp", json=init, headers=hdrs)
    sid = opened.headers["mcp-session-id"]
    hdrs = {**hdrs, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}

    def create(n: int) -> testing.Result:
        call = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}, "task": {}},
        }
        return client.simulate_post("/mcp", json=call, headers=hdrs)

    assert create(2).status_code == 200
    refused = create(3)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "10"
    assert refused.json["error"]["data"]["limit"] == "rate"


def test_a_principal_whose_rate_is_spent_is_refused_by_the_tool_gate_without_the_store(
    make_mcp: Callable[..., Mcp],
) -> None:
    """2025-era requests carry no Mcp-Method, so the flood shield does not see them: the tool
    gate asks this process's memory of the principal's refusal before the arguments are even
    validated, and the store is not asked again until the retry time."""
    mcp = make_mcp(create_rate=0.1, create_burst=1)
    client: testing.TestClient = mcp.client
    opened = client.simulate_post("/mcp", json=INITIALIZE, headers=BASE_HEADERS)
    hdrs = {
        **BASE_HEADERS,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }

    def create(n: int, arguments: dict[str, Any]) -> testing.Result:
        params = {"name": "echo", "arguments": arguments, "task": {}}
        call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
        return client.simulate_post("/mcp", json=call, headers=hdrs)

    assert create(2, {"text": "x"}).status_code == 200
    assert create(3, {"text": "x"}).status_code == 429  # the store refuses: the gate learns
    asked: list[Any] = []

    async def store_create(*args: Any, **kwargs: Any) -> Any:
        asked.append(args)
        raise AssertionError("the store was asked")

    mcp.store.create = store_create  # type: ignore[method-assign]
    again = create(4, {"text": 42})  # ill-typed arguments: refused before they are validated
    assert again.status_code == 429
    assert again.json["error"]["data"]["limit"] == "rate"
    assert asked == []


def test_another_principal_cannot_use_a_legacy_session(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(auth=("apikey",))
    alice, bob = mcp.api_key("alice"), mcp.api_key("bob")
    init, hdrs = INITIALIZE, BASE_HEADERS
    opened = mcp.client.simulate_post(
        "/mcp", json=init, headers={**hdrs, "Authorization": f"Bearer {alice}"}
    )
    sid = opened.headers["mcp-session-id"]
    session = {**hdrs, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    as_bob = mcp.client.simulate_post(
        "/mcp", json=ping, headers={**session, "Authorization": f"Bearer {bob}"}
    )
    assert as_bob.status_code == 404
    gone = mcp.client.simulate_delete("/mcp", headers={**session, "Authorization": f"Bearer {bob}"})
    assert gone.status_code == 404
    as_alice = mcp.client.simulate_post(
        "/mcp", json=ping, headers={**session, "Authorization": f"Bearer {alice}"}
    )
    assert as_alice.status_code == 200


def test_a_flooding_credential_is_refused_before_parsing_until_its_retry_time(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(auth=("apikey",), create_rate=0.2, create_burst=1)
    flood, calm = mcp.api_key("flood"), mcp.api_key("calm")
    mcp.token = flood
    assert mcp.call("echo", {"text": "a"}).status == 200
    refused = mcp.call("echo", {"text": "b"})  # the store refuses: the shield learns
    assert refused.code() == (429, -32029)
    # Now not even read: a body that is not JSON still gets the 429 (with its Retry-After).
    early = mcp.raw(b"not json", mcp.headers("tools/call", {"name": "echo"}))
    assert early.status == 429 and int(early.headers["retry-after"]) >= 1
    assert orjson.loads(early.content)["error"]["data"]["limit"] == "rate"
    # Only creates: the same principal still reads its tasks; others are untouched.
    assert mcp.post("tools/list").status == 200
    mcp.token = calm
    assert mcp.call("echo", {"text": "c"}).status == 200
    mcp.token = None
    assert mcp.raw(b"not json", mcp.headers("tools/call", {"name": "echo"})).status == 401
