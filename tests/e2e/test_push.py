"""Push against the real stack: task changes sent to the client, on both wires, across replicas.

- 2025-11-25: a session's ``GET /mcp`` stream carries ``notifications/tasks/status`` (params: the
  2025-11-25 task, as ``tasks/get`` shows it) for each change of a task the session created,
  and nothing about another session's tasks. The stream is on replica A, the task is created on
  replica B with the same session headers.
- 2026-07-28: ``subscriptions/listen`` with ``params.notifications.taskIds`` (Tasks extension
  declared) on replica B, for a task created on replica A: first
  ``notifications/subscriptions/acknowledged`` naming the ids it will report on (an unknown one
  left out), then ``notifications/tasks`` per change (the full task without ``resultType``, with
  ``_meta.subscriptionId``). Without the extension: -32021 (HTTP 400).

Streams are read with httpx, their SSE ``data:`` lines parsed here. The session stack keeps the
default keep-alive (15 s): every read is bounded by ``READ_S`` and every wait by a deadline
checked on every line (keep-alive comments too), so a server that sends nothing fails fast.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpq.frontend.legacy.session import listing_scope
from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from mcpq.shared.store import Keys, task_ref
from tests.support.sse_stream import EventStream

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
READ_S = 25.0  # longest quiet spell on a stream: above the default 15 s keep-alive
WAIT_S = 30.0  # the most a stream may take to show what a test waits for
LEGACY_TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}


def _http() -> httpx.Client:
    return httpx.Client(timeout=httpx.Timeout(10.0, read=READ_S))


class LegacySession:
    """A 2025-era Streamable HTTP session, raw: ``initialize``, then one message per POST to
    any replica (``url``), with ``Mcp-Session-Id`` and ``MCP-Protocol-Version``."""

    def __init__(self, http: httpx.Client, url: str, version: str = LEGACY) -> None:
        self.http, self.url, self.version = http, url, version
        self.session_id = ""
        self._ids = iter(range(1, 1_000_000))

    def headers(self, accept: str = ACCEPT) -> dict[str, str]:
        return {
            "Accept": accept,
            "Content-Type": "application/json",
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": self.version,
        }

    def open(self) -> LegacySession:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "initialize",
            "params": {
                "protocolVersion": self.version,
                "capabilities": {},
                "clientInfo": {"name": "mcpq-push-test", "version": "0"},
            },
        }
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        response = self.http.post(self.url, json=body, headers=headers)
        assert response.status_code == 200, f"initialize: {response.status_code} {response.text}"
        assert response.json()["result"]["protocolVersion"] == self.version, response.text
        self.session_id = response.headers.get("mcp-session-id", "")
        assert self.session_id, f"no Mcp-Session-Id on the initialize answer: {response.headers}"
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        done = self.http.post(self.url, json=note, headers=self.headers())
        assert done.status_code == 202, f"notifications/initialized: {done.status_code}"
        return self

    def call(self, method: str, params: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        """One request (JSON reply expected); its ``result``."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = self.http.post(url or self.url, json=body, headers=self.headers())
        assert response.status_code == 200, f"{method}: {response.status_code} {response.text}"
        kind = response.headers["content-type"]
        assert kind.startswith("application/json"), f"{method}: {kind} {response.text[:500]}"
        message = response.json()
        assert "result" in message, f"{method}: {message}"
        return message["result"]  # type: ignore[no-any-return]

    def create(self, tool: str, arguments: dict[str, Any], url: str | None = None) -> str:
        params = {"name": tool, "arguments": arguments, "task": {"ttl": 60_000}}
        task = self.call("tools/call", params, url)["task"]
        assert task["status"] == "working", task
        return str(task["taskId"])

    def task(self, task_id: str, url: str | None = None) -> dict[str, Any]:
        return self.call("tasks/get", {"taskId": task_id}, url)

    def stream(self) -> contextlib.AbstractContextManager[httpx.Response]:
        """``GET /mcp``: the session's standalone stream."""
        return self.http.stream("GET", self.url, headers=self.headers("text/event-stream"))

    def close(self) -> None:
        if self.session_id:
            self.http.delete(self.url, headers=self.headers())


def _subscribers(stack: Stack, channel: str) -> int:
    """How many Redis connections listen on ``channel`` (a stream's watch holds one)."""
    with stack.redis_client() as r:
        return int(dict(r.pubsub_numsub(channel))[channel])


def _released(stack: Stack, channel: str, what: str) -> float:
    """Wait until no one listens on ``channel`` any more; returns how long that took."""
    started = time.monotonic()
    wait_until(
        lambda: _subscribers(stack, channel) == 0,
        timeout=20,
        interval=0.1,
        message=f"{what} to drop its Redis subscription after the client left",
    )
    return time.monotonic() - started


def _assert_streams(response: httpx.Response, what: str) -> None:
    kind = response.headers.get("content-type", "")
    if response.status_code != 200 or not kind.startswith("text/event-stream"):
        body = response.read()[:800]
        raise AssertionError(f"{what}: HTTP {response.status_code} {kind} {body!r}")


# -- 2025-11-25: the session's GET stream -----------------------------------------------------
def test_get_stream_pushes_the_sessions_task_statuses(stack: Stack) -> None:
    url_a, url_b = stack.url(0), stack.url(1)
    with _http() as http:
        mine, other = LegacySession(http, url_a).open(), LegacySession(http, url_a).open()
        channel = Keys().listing_events(listing_scope("anonymous", task_ref(mine.session_id)))
        started = time.monotonic()
        with mine.stream() as response:
            _assert_streams(response, "GET /mcp")
            events = EventStream(response, "the GET stream on A", read_s=READ_S)
            deadline = time.monotonic() + WAIT_S
            # The stream's watch is on (one Redis subscriber on the session's channel): no
            # change of the tasks below can fall before it.
            wait_until(
                lambda: _subscribers(stack, channel) == 1,
                timeout=10,
                message="the GET stream's Redis subscription",
            )
            # Our task, created on B (any replica serves the session).
            task_id = mine.create("slow_compute", {"seconds": 2, "label": "pushed"}, url=url_b)
            created_at = time.monotonic()

            def about_ours(m: dict[str, Any]) -> bool:
                return bool(m.get("params", {}).get("taskId") == task_id)

            events.until(deadline, about_ours)
            first_at = time.monotonic()
            # Another session's task runs start to end while ours still runs.
            other_id = other.create("slow_compute", {"seconds": 0.1, "label": "other"}, url_b)
            wait_until(
                lambda: other.task(other_id)["status"] == "completed",
                timeout=15,
                message="the other session's task to complete",
            )
            assert mine.task(task_id)["status"] == "working", "ours ends after the other's"
            events.until(
                deadline, lambda m: about_ours(m) and m["params"].get("status") == "completed"
            )
            completed_at = time.monotonic()
        released = _released(stack, channel, "the GET stream")
        print(
            f"\n[GET stream] open -> task created: {created_at - started:.2f}s; first push "
            f"{first_at - created_at:.2f}s after the create; completed pushed "
            f"{completed_at - created_at:.2f}s after it; {events.comments} keep-alives; "
            f"subscription dropped {released:.2f}s after the client left"
        )
        pushed = events.seen
        assert {m.get("method") for m in pushed} == {"notifications/tasks/status"}, events
        assert all("id" not in m for m in pushed), events
        ids = {m["params"].get("taskId") for m in pushed}
        assert other_id not in ids, f"another session's task on this stream: {events}"
        assert ids == {task_id}, events
        statuses = [m["params"]["status"] for m in pushed]
        assert set(statuses) == {"working", "completed"}, events
        assert statuses[-1] == "completed" and statuses.count("completed") == 1, events
        assert pushed[0]["params"].get("statusMessage") == "computing pushed", events
        final = pushed[-1]["params"]
        assert set(final) >= LEGACY_TASK_FIELDS and final["ttl"] == 60_000, final
        assert "result" not in final and "resultType" not in final, final
        assert final == mine.task(task_id, url_b), "the push is the task as tasks/get shows it"
        result = mine.call("tasks/result", {"taskId": task_id}, url_b)
        assert text_of(result) == "pushed: computed in 2s", result
        mine.close()
        other.close()


def test_get_stream_needs_a_live_session(stack: Stack) -> None:
    with _http() as http:
        # A session older than the tasks wire streams too (list changes, resource updates:
        # tests/e2e/test_resource_notices.py), without task statuses (it creates no tasks).
        older = LegacySession(http, stack.url(0), version="2025-06-18").open()
        with older.stream() as response:
            _assert_streams(response, "an older session's GET /mcp")
        older.close()
        gone = LegacySession(http, stack.url(1))
        gone.session_id = "no-such-session"
        with gone.stream() as response:
            body = response.read()
            assert response.status_code == 404, (response.status_code, body[:500])
        assert json.loads(body)["error"]["code"] == -32001, body


# -- 2026-07-28: subscriptions/listen ----------------------------------------------------------
@contextlib.contextmanager
def _listen(
    http: httpx.Client,
    url: str,
    rid: int,
    task_ids: list[str],
    *,
    tasks: bool = True,
    accept: str = ACCEPT,
) -> Iterator[httpx.Response]:
    capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}} if tasks else {}
    params = {
        "_meta": {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_INFO: {"name": "mcpq-push-test", "version": "0"},
            META_CLIENT_CAPABILITIES: capabilities,
        },
        "notifications": {"taskIds": task_ids},
    }
    body = {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}
    headers = {
        "Content-Type": "application/json",
        "Accept": accept,
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "subscriptions/listen",
    }
    with http.stream("POST", url, json=body, headers=headers) as response:
        yield response


def _json_error(response: httpx.Response, what: str) -> dict[str, Any]:
    kind = response.headers.get("content-type", "")
    assert kind.startswith("application/json"), f"{what}: HTTP {response.status_code} {kind}"
    message = json.loads(response.read())
    assert "error" in message, f"{what}: {message}"
    return message  # type: ignore[no-any-return]


def test_subscriptions_listen_pushes_a_tasks_changes(stack: Stack, client: McpClient) -> None:
    created = client.create_task("slow_compute", {"seconds": 2, "label": "listened"})
    task_id = created["taskId"]
    rid = 4242
    meta = {META_SUBSCRIPTION_ID: rid}
    channel = Keys().events(task_ref(task_id))
    with _http() as http, _listen(http, stack.url(1), rid, [task_id, "unknown-id"]) as response:
        _assert_streams(response, "subscriptions/listen")
        opened_at = time.monotonic()
        events = EventStream(response, "the listen stream on B", read_s=READ_S)
        deadline = opened_at + WAIT_S
        ack = events.next(deadline)
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": meta, "notifications": {"taskIds": [task_id]}},
        }, events
        assert _subscribers(stack, channel) == 1, "the ack comes once the watch is on"
        events.until(deadline, lambda m: m.get("params", {}).get("status") == "completed")
        completed_at = time.monotonic()
    released = _released(stack, channel, "the listen stream")
    print(
        f"\n[subscriptions/listen] completed pushed {completed_at - opened_at:.2f}s after the "
        f"stream opened; {len(events.seen) - 1} notifications/tasks, {events.comments} "
        f"keep-alives; subscription dropped {released:.2f}s after the client left"
    )
    pushed = events.seen[1:]
    assert {m.get("method") for m in pushed} == {"notifications/tasks"}, events
    for message in pushed:
        params = message["params"]
        assert "id" not in message, events
        assert params["_meta"] == meta, events
        assert params["taskId"] == task_id, events
        assert set(params) >= TASK_FIELDS, events
        assert "resultType" not in params, events
        assert params["ttlMs"] == created["ttlMs"], events
        assert params["pollIntervalMs"] == created["pollIntervalMs"], events
        assert params["createdAt"] == created["createdAt"], events
        assert params["status"] in {"working", "completed"}, events
    statuses = [m["params"]["status"] for m in pushed]
    assert statuses.count("completed") == 1, events
    final = dict(pushed[-1]["params"])
    assert text_of(final["result"]) == "listened: computed in 2s", final
    assert not final["result"].get("isError"), final
    # The full task, exactly as tasks/get shows it (less resultType and the _meta envelope).
    polled = client.task(task_id)
    del final["_meta"]
    polled = {k: v for k, v in polled.items() if k not in {"resultType", "_meta"}}
    assert final == polled


def test_subscriptions_listen_for_tasks_needs_the_extension(
    stack: Stack, client: McpClient
) -> None:
    task_id = client.create_task("slow_compute", {"seconds": 0.1, "label": "refused"})["taskId"]
    with _http() as http:
        with _listen(http, stack.url(1), 7, [task_id], tasks=False) as response:
            message = _json_error(response, "listen without the Tasks extension")
            assert response.status_code == 400, message
        assert message["id"] == 7, message
        error = message["error"]
        assert error["code"] == -32021, message
        assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        # The stream is the only way it answers: a JSON-only client is refused, not held.
        with _listen(http, stack.url(0), 8, [task_id], accept="application/json") as response:
            message = _json_error(response, "listen accepting JSON only")
            assert response.status_code == 400, message
        assert message["error"]["code"] == -32602, message
    client.wait_for_status(task_id, "completed", timeout=15)
