"""Resource updates and list changes against real stacks: gunicorn replicas, a Celery worker, a
private Redis.

- A tool on the worker calls ``app.resource_updated(uri)`` (``tests.e2e.resource_tools``), called
  through replica A; the subscriber on replica B is told, on both wires: a 2025-era session's
  GET stream (``resources/subscribe`` made on A) gets ``notifications/resources/updated {uri}``,
  a 2026-07-28 ``subscriptions/listen`` stream that named the URI gets it with its
  ``_meta.subscriptionId``. Nobody is told of a URI they did not name.
- The refusals, as a read's: a URI nothing serves (-32602, ``data.uri``), a resource whose scopes
  the caller lacks (403); another principal holding a session's id meets an unknown session
  (404) and its own listen stream hears nothing of the other's subscription.
- A rolling deploy: with listeners on both replicas (2026 listen streams on A and B, a 2025 GET
  stream on B), a replica starts with one more tool module: every listener gets
  ``notifications/tools/list_changed`` (and nothing about prompts); the old replica goes, the
  other is restarted on the new release: nothing more is announced (nothing changed again).

Streams are read with httpx, their SSE ``data:`` lines parsed here; every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    PROTOCOL_VERSION,
)
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import Keys, task_ref
from mcpq.shared.store.announce import announce_list_changed
from mcpq.shared.store.api_keys import ApiKeys
from mcpq.shared.store.resource_events import uri_digest
from tests.e2e.resource_tools import BOARD, VAULT
from tests.support.sse_stream import EventStream
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOOLS = f"{DEFAULT_TOOLS},tests.e2e.resource_tools"
NOTE = "e2e://notes/groceries"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
READ_S = 25.0  # longest quiet spell on a stream: above the default 15 s keep-alive
WAIT_S = 30.0  # the most a stream may take to show what a test waits for
KEYS = Keys()


# -- the stacks ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    """Two replicas with API keys (``MCPQ_AUTH=apikey``) and one worker, serving the test's
    resources and the tool that announces their updates."""
    env = {**FAST_KNOBS, "MCPQ_AUTH": "apikey"}
    running = LiveStack("notices", tmp_path_factory.mktemp("notices"), tools=TOOLS, env=env)
    running.start(webs=2, workers=1, pool="io")
    yield running
    running.close()


@pytest.fixture(scope="module")
def tokens(stack: LiveStack) -> dict[str, str]:
    """API keys, as ``mcpq keys create`` makes them: alice, bob, and a keeper of the vault."""
    with stack.redis_client() as client:
        made = ApiKeys(client, KEYS)
        return {
            "alice": made.create("alice")[1],
            "bob": made.create("bob")[1],
            "keeper": made.create("keeper", ("vault",))[1],
        }


# -- streams and sessions, raw ---------------------------------------------------------------------
def _http() -> httpx.Client:
    return httpx.Client(timeout=httpx.Timeout(10.0, read=READ_S))


class LegacySession:
    """A 2025-era session, raw: ``initialize`` on one replica, then any replica (``url``)."""

    def __init__(self, http: httpx.Client, url: str, token: str | None) -> None:
        self.http, self.url, self.token = http, url, token
        self.session_id = ""
        self._ids = iter(range(1, 1_000_000))

    def headers(self, accept: str = ACCEPT) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if self.session_id:
            headers.update({"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY})
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def open(self) -> LegacySession:
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "e2e"}}
        reply = self.post("initialize", params)
        assert reply.status_code == 200, reply.text
        capabilities = reply.json()["result"]["capabilities"]
        assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
        self.session_id = reply.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.http.post(self.url, json=note, headers=self.headers()).status_code == 202
        return self

    def post(self, method: str, params: dict[str, Any], url: str | None = None) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self.http.post(url or self.url, json=body, headers=self.headers())

    def stream(self, url: str | None = None) -> contextlib.AbstractContextManager[httpx.Response]:
        """``GET /mcp``: the session's standalone stream."""
        headers = self.headers("text/event-stream")
        return self.http.stream("GET", url or self.url, headers=headers)

    @property
    def channel(self) -> str:
        return KEYS.session_events(task_ref(self.session_id))

    def close(self) -> None:
        self.http.delete(self.url, headers=self.headers())


@contextlib.contextmanager
def listening(
    http: httpx.Client, url: str, rid: int, notifications: dict[str, Any], token: str | None
) -> Iterator[httpx.Response]:
    """``subscriptions/listen`` (2026-07-28) with ``notifications`` as its filter."""
    params = {
        "_meta": {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_INFO: {"name": "e2e", "version": "0"},
            META_CLIENT_CAPABILITIES: {},
        },
        "notifications": notifications,
    }
    body = {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "subscriptions/listen",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with http.stream("POST", url, json=body, headers=headers) as response:
        yield response


def listened(stack: Stack, channel: str) -> None:
    """Wait until a stream's watch is on: ``channel`` has a subscriber."""

    def subscribed() -> bool:
        client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        try:
            return int(dict(client.pubsub_numsub(channel))[channel]) >= 1
        finally:
            client.close()

    wait_until(subscribed, timeout=10, interval=0.05, message=f"a subscriber on {channel}")


def announce(stack: Stack, token: str, uri: str) -> None:
    """The worker's tool announces ``uri``'s update; called through replica A."""
    with McpClient(stack.url(0), token=token) as client:
        reply = client.call_tool("announce_update", {"uri": uri}, tasks=False)
        assert text_of(reply.result) == "announced: True", reply


def updated(uri: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"uri": uri} if meta is None else {"_meta": meta, "uri": uri}
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}


# -- a tool's update, across replicas, on both wires -----------------------------------------------
def test_a_tools_update_reaches_a_sessions_get_stream_on_the_other_replica(
    stack: LiveStack, tokens: dict[str, str]
) -> None:
    url_a, url_b = stack.url(0), stack.url(1)
    with _http() as http:
        mine = LegacySession(http, url_a, tokens["alice"]).open()
        for uri in (NOTE, "e2e://notes/unrelated"):
            reply = mine.post("resources/subscribe", {"uri": uri})  # on A
            assert reply.json() == {"jsonrpc": "2.0", "id": reply.json()["id"], "result": {}}
        reply = mine.post("resources/unsubscribe", {"uri": "e2e://notes/unrelated"}, url_b)
        assert reply.json()["result"] == {}
        other = LegacySession(http, url_a, tokens["alice"]).open()
        assert other.post("resources/subscribe", {"uri": BOARD}).json()["result"] == {}
        with mine.stream(url_b) as response:  # the GET stream, on B
            events = EventStream(response, "the GET stream on B", read_s=READ_S, check=True)
            listened(stack, mine.channel)
            started = time.monotonic()
            for uri in (BOARD, "e2e://notes/unrelated", NOTE):
                announce(stack, tokens["alice"], uri)
            first = events.next(started + WAIT_S)
            told_at = time.monotonic()
        assert first == updated(NOTE), events  # neither the board nor the unsubscribed URI
        print(f"\n[GET stream] told {told_at - started:.2f}s after the first announcement")
        mine.close()
        other.close()


def test_a_tools_update_reaches_a_listen_stream_on_the_other_replica(
    stack: LiveStack, tokens: dict[str, str]
) -> None:
    wanted = {"resourceSubscriptions": [NOTE, BOARD], "toolsListChanged": True}
    with _http() as http, listening(http, stack.url(1), 4242, wanted, tokens["alice"]) as response:
        events = EventStream(response, "the listen stream on B", read_s=READ_S, check=True)
        deadline = time.monotonic() + WAIT_S
        meta = {META_SUBSCRIPTION_ID: 4242}
        assert events.next(deadline) == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": meta, "notifications": wanted},
        }
        for uri in ("e2e://notes/other", NOTE, BOARD):
            announce(stack, tokens["alice"], uri)
        assert [events.next(deadline), events.next(deadline)] == [
            updated(NOTE, meta),
            updated(BOARD, meta),
        ], events


# -- refusals --------------------------------------------------------------------------------------
def _error(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    kind = response.headers.get("content-type", "")
    assert kind.startswith("application/json"), f"HTTP {response.status_code} {kind}"
    message = json.loads(response.read())
    assert "error" in message, message
    return response.status_code, message["error"]


def test_a_subscription_is_refused_as_a_read_would_be(
    stack: LiveStack, tokens: dict[str, str]
) -> None:
    missing = "e2e://nothing-here"
    with _http() as http:
        session = LegacySession(http, stack.url(0), tokens["alice"]).open()
        status, error = _error(session.post("resources/subscribe", {"uri": missing}))
        assert (status, error["code"], error["data"]) == (200, -32602, {"uri": missing})
        status, error = _error(session.post("resources/subscribe", {"uri": VAULT}))
        assert (status, error["data"]) == (403, {"requiredScopes": ["vault"]})
        session.close()
        for token, uri, expected in (
            (tokens["alice"], missing, (400, -32602, {"uri": missing})),
            (tokens["alice"], VAULT, (403, -32600, {"requiredScopes": ["vault"]})),
        ):
            wanted = {"resourceSubscriptions": [uri]}
            with listening(http, stack.url(1), 9, wanted, token) as response:
                status, error = _error(response)
                assert (status, error["code"], error.get("data")) == expected
        keeper = {"resourceSubscriptions": [VAULT]}
        with listening(http, stack.url(1), 10, keeper, tokens["keeper"]) as response:
            ack = EventStream(response, "the keeper's listen", read_s=READ_S, check=True).next(
                time.monotonic() + WAIT_S
            )
            assert ack["params"]["notifications"] == keeper


def test_another_principal_neither_uses_nor_hears_a_subscription(
    stack: LiveStack, tokens: dict[str, str]
) -> None:
    with _http() as http:
        alice = LegacySession(http, stack.url(0), tokens["alice"]).open()
        assert alice.post("resources/subscribe", {"uri": NOTE}).json()["result"] == {}
        mallory = LegacySession(http, stack.url(1), tokens["bob"])
        mallory.session_id = alice.session_id  # the id leaked: the session is still alice's
        for response in (
            mallory.post("resources/subscribe", {"uri": BOARD}),
            mallory.post("resources/unsubscribe", {"uri": NOTE}),
        ):
            assert response.status_code == 404 and response.json()["error"]["code"] == -32001
        with mallory.stream() as response:
            assert response.status_code == 404
        # Bob's own listen stream (lists only) hears nothing of alice's URI: the first thing it
        # is told after its ack is the list change announced after the update.
        wanted = {"toolsListChanged": True}
        with listening(http, stack.url(1), 11, wanted, tokens["bob"]) as response:
            events = EventStream(response, "bob's listen stream", read_s=READ_S, check=True)
            deadline = time.monotonic() + WAIT_S
            assert events.next(deadline)["method"] == "notifications/subscriptions/acknowledged"
            announce(stack, tokens["alice"], NOTE)
            announce_list_changed(["tools"], stack.store())
            assert events.next(deadline)["method"] == "notifications/tools/list_changed", events
        with stack.redis_client() as client:  # bob's unsubscribe removed nothing of alice's
            index = KEYS.resource_subscribers(uri_digest(NOTE))
            assert task_ref(alice.session_id) in client.zrange(index, 0, -1)
            assert client.hkeys(KEYS.session_resources(task_ref(alice.session_id))) == [
                uri_digest(NOTE)
            ]
        alice.close()


# -- a rolling deploy ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    """Two replicas of a release (no worker: lists are the web's)."""
    running = LiveStack("deploy", tmp_path_factory.mktemp("deploy"), tools=DEFAULT_TOOLS)
    running.start(webs=2, workers=0)
    yield running
    running.close()


def _listed_tools(url: str) -> list[str]:
    with McpClient(url) as client:
        return [t["name"] for t in client.request("tools/list").result["tools"]]


def test_a_replica_with_one_more_tool_module_tells_every_listener(deploy: LiveStack) -> None:
    url_a, url_b = deploy.url(0), deploy.url(1)
    new_release = f"{DEFAULT_TOOLS},tests.e2e.deploy_tools"
    wanted_a = {"toolsListChanged": True, "promptsListChanged": True}
    with (
        _http() as http,
        listening(http, url_a, 1, wanted_a, None) as on_a,
        listening(http, url_b, 2, {"toolsListChanged": True}, None) as on_b,
    ):
        deadline = time.monotonic() + WAIT_S
        listen_a, listen_b = (
            EventStream(on_a, "listen on A", read_s=READ_S, check=True),
            EventStream(on_b, "listen on B", read_s=READ_S, check=True),
        )
        for events in (listen_a, listen_b):
            assert events.next(deadline)["method"] == "notifications/subscriptions/acknowledged"
        session = LegacySession(http, url_a, None).open()
        with session.stream(url_b) as response:
            get_b = EventStream(response, "the GET stream on B", read_s=READ_S, check=True)
            listened(deploy, session.channel)
            started = time.monotonic()
            # The new release's first replica (a rolling deploy starts it beside the old ones).
            url_c = deploy.start_web(MCPQ_TOOLS=new_release)
            started_c = time.monotonic()
            assert listen_a.next(deadline) == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {META_SUBSCRIPTION_ID: 1}},
            }, listen_a
            assert listen_b.next(deadline)["method"] == "notifications/tools/list_changed"
            assert get_b.next(deadline) == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {},
            }
            told = time.monotonic()
        print(
            f"\n[deploy] replica C up {started_c - started:.2f}s after its start; listeners "
            f"told {told - started_c:.2f}s later"
        )
        session.close()
    assert "added_by_the_deploy" in _listed_tools(f"{url_c}/mcp")
    assert "added_by_the_deploy" not in _listed_tools(url_a)
    # The old replicas go, one of them restarted on the new release: nothing changed any more,
    # so nothing is announced (the nudge that follows is the next thing a listener hears).
    wanted_c = {"toolsListChanged": True, "promptsListChanged": True}
    with _http() as http, listening(http, f"{url_c}/mcp", 3, wanted_c, None) as on_c:
        deadline = time.monotonic() + WAIT_S
        listen_c = EventStream(on_c, "listen on C", read_s=READ_S, check=True)
        assert listen_c.next(deadline)["method"] == "notifications/subscriptions/acknowledged"
        deploy.stop_child(deploy.webs[1])
        deploy.stop_child(deploy.webs[0])
        url_a2 = deploy.start_web(MCPQ_TOOLS=new_release)  # ready: its start has compared
        assert "added_by_the_deploy" in _listed_tools(f"{url_a2}/mcp")
        announce_list_changed(["prompts"], deploy.store())
        assert listen_c.next(deadline)["method"] == "notifications/prompts/list_changed"
