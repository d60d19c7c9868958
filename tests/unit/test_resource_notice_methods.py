"""Resource updates and list changes on fakes (``mcpq.frontend.notices``, the 2025-era
``resources/subscribe`` and GET stream, ``subscriptions/listen``'s filters,
``mcpq.shared.store.resource_events``): what is declared, what is stored (never a URI in plain
text), what is refused (as a read would be), and what each stream is told when an update or a
list change is announced by another process (the synchronous store, as a worker's tool does)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import fakeredis
import fakeredis.aioredis
import falcon.testing
import orjson
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import mcpq
from mcpq import App, ToolContext
from mcpq.frontend import notices
from mcpq.frontend.app import create_app
from mcpq.frontend.principal import Principal
from mcpq.shared.protocol import META_SUBSCRIPTION_ID
from mcpq.shared.registry import Registry
from mcpq.shared.sealing import new_data_key
from mcpq.shared.store import AsyncTaskStore, Keys, resource_events, task_ref, web_store
from mcpq.shared.store import announce as announcing
from mcpq.shared.store.payloads import Payloads
from mcpq.shared.store.resource_events import uri_digest
from mcpq.shared.store.sync import TaskStore
from tests.unit.fakes import Mcp, Reply

V = "2025-11-25"
STREAM_S = 3.0  # how long a test's notification stream stays open (MCPQ_STREAM_MAX_S): room for
# an announcement from another thread on a loaded host
TODAY, STAFF = "notes://today", "notes://staff"

app = App("notes")


@app.resource(TODAY, mime_type="text/plain")
def today() -> str:
    return "buy milk"


@app.resource("notes://yesterday")
def yesterday() -> str:
    return "bought bread"


@app.resource(STAFF, scopes=("staff",))
def staff() -> str:
    return "for staff"


@app.resource("notes://day/{n}")
def day(n: int) -> str:
    return f"day {n}"


@app.prompt
def summarize(text: str) -> str:
    return f"Summarize: {text}"


@app.tool(task="optional")
def echo(ctx: ToolContext, text: str) -> str:
    return text


def served(extra: App | None = None) -> Registry:
    registry = Registry()
    registry._add_app(app)
    if extra is not None:
        registry._add_app(extra)
    return registry


@pytest.fixture
def notes(make_mcp: Callable[..., Mcp]) -> Mcp:
    mcp = make_mcp(tools=served(), stream_max_s=STREAM_S)
    # What it serves, as if told already: falcon.testing runs the app's start (its lifespan)
    # around every simulated request, which would announce the lists as changed the first time.
    mcp.peek.hset(mcp.keys.listings, mapping=notices.listing_digests(served()))
    return mcp


class Session:
    """A 2025-era session, raw (``initialize`` then one POST per message), with the app's
    token when it has one."""

    def __init__(self, mcp: Mcp, version: str = V) -> None:
        self.mcp, self.version, self.id = mcp, version, ""
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "u"}}
        reply = self.request("initialize", params, rid=0)
        assert reply.status == 200, reply.content
        self.capabilities = reply.result["capabilities"]
        self.id = reply.headers["mcp-session-id"]
        self.sref = task_ref(self.id)

    def headers(self, accept: str = "application/json") -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self.id:
            headers.update({"Mcp-Session-Id": self.id, "MCP-Protocol-Version": self.version})
        if self.mcp.token is not None:
            headers["Authorization"] = f"Bearer {self.mcp.token}"
        return headers

    def request(self, method: str, params: dict[str, Any] | None = None, rid: int = 1) -> Reply:
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        return self.mcp.raw(orjson.dumps(body), self.headers())

    def subscribe(self, uri: Any) -> Reply:
        return self.request("resources/subscribe", {"uri": uri})

    def unsubscribe(self, uri: Any) -> Reply:
        return self.request("resources/unsubscribe", {"uri": uri})

    def stream(self) -> Reply:
        """``GET /mcp``, until the stream's time is up (``STREAM_S``)."""
        return self.mcp.raw(b"", self.headers("text/event-stream"), method="GET")


def sync_store(mcp: Mcp) -> TaskStore:
    """The synchronous store on the app's (fake) Redis: what a worker's tool announces on."""
    return TaskStore(mcp.peek, mcp.keys)


def when_heard(mcp: Mcp, channels: list[str], *actions: Callable[[], Any]) -> threading.Thread:
    """Run ``actions`` in another thread (another process, as far as the stream can tell) once
    every one of ``channels`` has a subscriber: the stream's watch is on."""

    def run() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            heard = dict(mcp.peek.pubsub_numsub(*channels))
            if all(heard.get(c, 0) >= 1 for c in channels):
                break
            time.sleep(0.01)
        for action in actions:
            action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def methods_of(reply: Reply) -> list[str]:
    return [m.get("method", "") for m in reply.messages]


# -- what is declared ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", V])
def test_every_session_is_told_of_list_changes_and_may_subscribe(notes: Mcp, version: str) -> None:
    capabilities = Session(notes, version).capabilities
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}


# -- 2025-era: resources/subscribe, resources/unsubscribe ------------------------------------------
def test_a_subscription_is_the_sessions_own_and_no_uri_is_stored_in_plain_text(
    make_mcp: Callable[..., Mcp],
) -> None:
    keys = Keys("unit")
    sealed = Payloads.from_setting(new_data_key(), keys)
    server = fakeredis.FakeServer()
    fake = fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
    mcp = make_mcp(store=web_store(AsyncTaskStore(fake, keys, payloads=sealed)), tools=served())
    peek = fakeredis.FakeRedis(server=server, decode_responses=True)
    session = Session(mcp)
    assert session.subscribe(TODAY).result == {}
    assert session.subscribe(TODAY).result == {}  # again: still one subscription
    digest = uri_digest(TODAY)
    stored = peek.hgetall(keys.session_resources(session.sref))
    assert list(stored) == [digest]
    assert peek.zrange(keys.resource_subscribers(digest), 0, -1) == [session.sref]
    assert not [t for t in stored_text(peek) if "notes://" in t], "a URI in plain text"
    # It expires with the session, and goes when it ends.
    assert 0 < peek.pttl(keys.session_resources(session.sref)) <= 3_600_000
    assert session.unsubscribe(TODAY).result == {}
    assert session.unsubscribe(TODAY).result == {}  # idempotent
    assert session.unsubscribe("notes://never-served").result == {}
    assert not peek.exists(keys.session_resources(session.sref))
    assert peek.zrange(keys.resource_subscribers(digest), 0, -1) == []


def stored_text(peek: Any) -> list[str]:
    """Every key of the fake Redis, and every field, member and value in it."""
    found: list[str] = []
    for key in peek.keys("*"):
        found.append(key)
        kind = peek.type(key)
        if kind == "hash":
            found += [f"{f}={v}" for f, v in peek.hgetall(key).items()]
        elif kind == "zset":
            found += peek.zrange(key, 0, -1)
        elif kind == "set":
            found += list(peek.smembers(key))
        elif kind == "list":
            found += peek.lrange(key, 0, -1)
        elif kind == "string":
            found.append(peek.get(key))
    return found


def test_a_subscription_slides_and_ends_with_its_session(notes: Mcp) -> None:
    session = Session(notes)
    assert session.subscribe(TODAY).result == {}
    key = notes.keys.session_resources(session.sref)
    notes.peek.pexpire(key, 1000)
    assert session.request("ping").result == {}  # any request slides the session's keys
    assert notes.peek.pttl(key) > 1000
    index = notes.keys.resource_subscribers(uri_digest(TODAY))
    assert notes.peek.zscore(index, session.sref) is not None
    headers = {"Mcp-Session-Id": session.id, "MCP-Protocol-Version": V}
    assert notes.raw(b"", headers, method="DELETE").status == 204
    assert not notes.peek.exists(key)
    # Out of the resource's index too: an update after the end counts and tells nobody.
    assert notes.peek.zscore(index, session.sref) is None
    assert announcing.announce_updated(TODAY, sync_store(notes)) == 0


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("notes://nothing-here", "Resource not found"),
        ("notes://day/not-a-number", "Invalid params: notes://day/not-a-number"),
    ],
)
def test_subscribing_to_what_cannot_be_read_is_refused_as_its_read(
    notes: Mcp, uri: str, why: str
) -> None:
    session = Session(notes)
    reply = session.subscribe(uri)
    assert reply.code() == (200, -32602), reply.body  # a 2025-era error travels with 200
    assert reply.error["data"] == {"uri": uri}
    assert reply.error["message"].startswith(why)
    read = session.request("resources/read", {"uri": uri})
    assert read.error["code"] == -32602 and read.error["data"] == {"uri": uri}
    assert not notes.peek.exists(notes.keys.session_resources(session.sref))


@pytest.mark.parametrize("uri", [None, "", 7, ["notes://today"], "notes://" + "x" * 2050])
def test_a_bad_uri_is_invalid_params(notes: Mcp, uri: Any) -> None:
    session = Session(notes)
    for reply in (session.subscribe(uri), session.unsubscribe(uri)):
        assert reply.code() == (200, -32602), reply.body
        assert reply.error["message"].startswith("Invalid params")


def test_a_session_holds_a_bounded_number_of_subscriptions(
    notes: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource_events, "MAX_SESSION_SUBSCRIPTIONS", 3)
    session = Session(notes)
    for n in range(3):
        assert session.subscribe(f"notes://day/{n}").result == {}
    assert session.subscribe("notes://day/1").result == {}  # one it holds: fine
    refused = session.subscribe("notes://day/9")
    assert refused.code() == (200, -32602)
    assert "at most" in refused.error["message"]


def test_a_resource_with_scopes_needs_them_to_be_subscribed_to(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(tools=served(), auth=("apikey",))
    mcp.token = mcp.api_key("reader")
    session = Session(mcp)
    refused = session.subscribe(STAFF)
    assert refused.status == 403, refused.content
    assert refused.error["data"] == {"requiredScopes": ["staff"]}
    assert not mcp.peek.exists(mcp.keys.session_resources(session.sref))
    mcp.token = mcp.api_key("clerk", "staff")
    assert Session(mcp).subscribe(STAFF).result == {}


def test_another_principal_can_neither_use_nor_see_a_sessions_subscriptions(
    make_mcp: Callable[..., Mcp],
) -> None:
    mcp = make_mcp(tools=served(), auth=("apikey",), stream_max_s=0.3)
    mcp.token = mcp.api_key("alice")
    alice = Session(mcp)
    assert alice.subscribe(TODAY).result == {}
    mcp.token = mcp.api_key("mallory")
    for reply in (alice.subscribe(STAFF), alice.unsubscribe(TODAY), alice.stream()):
        assert reply.status == 404, reply.content  # exactly an unknown session
        assert orjson.loads(reply.content)["error"]["code"] == -32001
    stored = mcp.peek.hgetall(mcp.keys.session_resources(alice.sref))
    assert list(stored) == [uri_digest(TODAY)]


def test_subscribe_is_not_a_2026_method(notes: Mcp) -> None:
    for method in ("resources/subscribe", "resources/unsubscribe"):
        reply = notes.post(method, {"uri": TODAY}, opt_in=False)
        assert reply.code() == (404, -32601), reply.body


# -- 2025-era: the GET stream ----------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2025-06-18", V])
def test_the_get_stream_tells_the_subscribed_resources_and_the_list_changes(
    notes: Mcp, version: str
) -> None:
    session, other = Session(notes, version), Session(notes, version)
    assert session.subscribe(TODAY).result == {}
    assert session.subscribe("notes://day/7").result == {}
    assert other.subscribe("notes://yesterday").result == {}
    assert session.subscribe("notes://yesterday").result == {}
    assert session.unsubscribe("notes://yesterday").result == {}
    store = sync_store(notes)
    told: list[int] = []
    when_heard(
        notes,
        [notes.keys.session_events(session.sref), notes.keys.listing_changes],
        lambda: told.append(announcing.announce_updated(TODAY, store)),
        lambda: told.append(announcing.announce_updated("notes://yesterday", store)),
        lambda: told.append(announcing.announce_updated("notes://day/7", store)),
        lambda: announcing.announce_list_changed(["tools"], store),
    )
    reply = session.stream()
    assert reply.status == 200 and reply.streamed, reply.content
    assert reply.messages == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": TODAY}},
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "notes://day/7"},
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}},
    ]
    # yesterday: the other session (not streaming) was told on its own channel only.
    assert told == [1, 1, 1]


def test_a_streaming_session_stays_in_the_index_of_what_it_subscribed_to(notes: Mcp) -> None:
    """An entry lasts a session TTL from the subscribe; the GET stream renews it (at its start
    and at each keep-alive), so an update finds a session that streams for longer."""
    session = Session(notes)
    assert session.subscribe(TODAY).result == {}
    index = notes.keys.resource_subscribers(uri_digest(TODAY))
    notes.peek.zadd(index, {session.sref: 1})  # as if its entry had lapsed long ago
    store = sync_store(notes)

    def refreshed() -> None:
        # The stream subscribes, then refreshes its entries: an update announced between the
        # two finds the entry lapsed and tells nobody, by design (frontend/legacy/session.py).
        # So the update is announced once the stream's refresh is seen.
        deadline = time.monotonic() + 5
        while (notes.peek.zscore(index, session.sref) or 0) < time.time() * 1000:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        announcing.announce_updated(TODAY, store)

    when_heard(notes, [notes.keys.session_events(session.sref)], refreshed)
    assert methods_of(session.stream()) == ["notifications/resources/updated"]
    assert notes.peek.zscore(index, session.sref) > time.time() * 1000


def test_a_lapsed_entry_is_dropped_by_the_next_update(notes: Mcp) -> None:
    session = Session(notes)
    assert session.subscribe(TODAY).result == {}
    index = notes.keys.resource_subscribers(uri_digest(TODAY))
    notes.peek.zadd(index, {session.sref: 1})
    assert announcing.announce_updated(TODAY, sync_store(notes)) == 0
    assert notes.peek.exists(index) == 0


def test_delivery_checks_what_the_streams_caller_may_read() -> None:
    registry = served()
    clerk, reader = Principal("key:c", frozenset({"staff"})), Principal("key:r", frozenset())
    assert notices.may_read(registry, clerk, STAFF)
    assert not notices.may_read(registry, reader, STAFF)
    assert notices.may_read(registry, reader, TODAY)
    assert not notices.may_read(registry, clerk, "notes://gone-in-this-deploy")


# -- 2026-07-28: subscriptions/listen's filters ----------------------------------------------------
def listen(mcp: Mcp, notifications: Any, rid: Any = 77, **kw: Any) -> Reply:
    return mcp.post("subscriptions/listen", {"notifications": notifications}, rid=rid, **kw)


def test_listen_sends_only_what_it_was_asked_for(notes: Mcp) -> None:
    store = sync_store(notes)
    wanted: dict[str, Any] = {"toolsListChanged": True, "promptsListChanged": False}
    wanted["resourceSubscriptions"] = [TODAY, "notes://day/3", TODAY]
    when_heard(
        notes,
        [notes.keys.resource_events(uri_digest(TODAY)), notes.keys.listing_changes],
        lambda: announcing.announce_updated("notes://yesterday", store),
        lambda: announcing.announce_list_changed(["prompts", "resources"], store),
        lambda: announcing.announce_updated(TODAY, store),
        lambda: announcing.announce_list_changed(["tools"], store),
    )
    reply = listen(notes, wanted, opt_in=False)
    assert reply.status == 200 and reply.streamed, reply.content
    meta = {META_SUBSCRIPTION_ID: 77}
    assert reply.messages == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "_meta": meta,
                "notifications": {
                    "toolsListChanged": True,
                    "resourceSubscriptions": [TODAY, "notes://day/3"],
                },
            },
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"_meta": meta, "uri": TODAY},
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": meta}},
    ]


def test_listen_tells_tasks_and_resources_on_one_stream(notes: Mcp) -> None:
    task_id = notes.new_task()
    store = sync_store(notes)
    when_heard(
        notes,
        [notes.keys.resource_events(uri_digest(TODAY)), notes.keys.events(task_ref(task_id))],
        lambda: announcing.announce_updated(TODAY, store),
        lambda: announcing.announce_list_changed(["resources"], store),
    )
    wanted = {"taskIds": [task_id], "resourceSubscriptions": [TODAY], "resourcesListChanged": True}
    reply = listen(notes, wanted)
    ack, *rest = reply.messages
    assert ack["params"]["notifications"] == {
        "taskIds": [task_id],
        "resourcesListChanged": True,
        "resourceSubscriptions": [TODAY],
    }
    assert rest[0]["method"] == "notifications/tasks"  # the snapshot, read after the watch
    assert sorted(methods_of(reply)[2:]) == [
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    ]


def test_an_empty_filter_is_acknowledged_as_empty(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp(tools=served(), stream_max_s=0.2)
    notifications: dict[str, Any] | None
    for notifications in ({}, None):
        reply = listen(mcp, notifications, opt_in=False)
        [ack] = reply.messages
        assert ack["params"]["notifications"] == {}, ack


@pytest.mark.parametrize(
    ("notifications", "status", "code", "data"),
    [
        ({"resourceSubscriptions": ["notes://nothing"]}, 400, -32602, {"uri": "notes://nothing"}),
        ({"resourceSubscriptions": ["notes://day/x"]}, 400, -32602, {"uri": "notes://day/x"}),
        ({"resourceSubscriptions": [STAFF]}, 403, -32600, {"requiredScopes": ["staff"]}),
        ({"resourceSubscriptions": "notes://today"}, 400, -32602, None),
        ({"resourceSubscriptions": [TODAY, 3]}, 400, -32602, None),
        ({"resourceSubscriptions": [f"notes://day/{n}" for n in range(101)]}, 400, -32602, None),
        ({"toolsListChanged": "yes"}, 400, -32602, None),
        ({"promptsListChanged": 1}, 400, -32602, None),
        ([], 400, -32602, None),
    ],
)
def test_listen_refuses_what_it_cannot_honour_before_the_stream(
    make_mcp: Callable[..., Mcp], notifications: Any, status: int, code: int, data: Any
) -> None:
    mcp = make_mcp(tools=served(), auth=("apikey",))
    mcp.token = mcp.api_key("reader")
    reply = listen(mcp, notifications, opt_in=False)
    assert not reply.streamed
    assert reply.code() == (status, code), reply.body
    assert reply.error.get("data") == data
    assert reply.body["id"] == 77


def test_a_listen_stream_is_its_own_client_s(make_mcp: Callable[..., Mcp]) -> None:
    """Another principal's stream is told of its own filter only, and nothing of one stream
    is stored for another to find."""
    mcp = make_mcp(tools=served(), auth=("apikey",), stream_max_s=STREAM_S)
    clerk, reader = mcp.api_key("clerk", "staff"), mcp.api_key("reader")
    store = sync_store(mcp)
    when_heard(
        mcp,
        [mcp.keys.resource_events(uri_digest(TODAY))],
        lambda: announcing.announce_updated(STAFF, store),
        lambda: announcing.announce_updated(TODAY, store),
    )
    before = set(mcp.peek.keys("*"))
    mcp.token = reader
    reply = listen(mcp, {"resourceSubscriptions": [TODAY]}, opt_in=False)
    uris = [m["params"].get("uri") for m in reply.messages[1:]]
    assert uris == [TODAY], reply.messages
    mcp.token = clerk
    assert not [k for k in set(mcp.peek.keys("*")) - before if ":r:" in k or ":res" in k]


# -- list changes: what a process serves, told at its start ----------------------------------
def test_a_start_announces_the_lists_that_changed_once(notes: Mcp) -> None:
    more = App("more")

    @more.tool
    def extra() -> str:
        return "one more"

    notes.peek.delete(notes.keys.listings)  # a new deployment

    async def starts() -> list[list[str]]:
        events = notes.web.events
        first = notices.ListingAnnouncer(events, served())
        same = notices.ListingAnnouncer(events, served())
        grown = notices.ListingAnnouncer(events, served(more))
        return [await first.announce(), await same.announce(), await grown.announce()]

    assert asyncio.run(starts()) == [["tools", "prompts", "resources"], [], ["tools"]]


def test_the_digests_follow_what_is_served() -> None:
    plain, again = notices.listing_digests(served()), notices.listing_digests(served())
    assert plain == again
    more = App("more")

    @more.prompt
    def hello() -> str:
        return "hi"

    grown = notices.listing_digests(served(more))
    assert [name for name in plain if plain[name] != grown[name]] == ["prompts"]


def test_the_app_tells_the_store_what_it_serves_when_it_starts(notes: Mcp) -> None:
    application = create_app(notes.settings, store=notes.web, tools=served())

    async def start_and_stop() -> None:
        async with falcon.testing.ASGIConductor(application):
            deadline = time.monotonic() + 5
            while not notes.peek.exists(notes.keys.listings) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

    asyncio.run(start_and_stop())
    assert notes.peek.hgetall(notes.keys.listings) == notices.listing_digests(served())


def test_a_start_waits_for_a_store_that_is_not_there_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notices, "RETRY_FIRST_S", 0.01)
    calls: list[int] = []

    class Flaky:
        async def announce_lists(self, digests: dict[str, str]) -> list[str]:
            calls.append(1)
            if len(calls) < 3:
                from mcpq.shared.errors import StoreUnavailable

                raise StoreUnavailable()
            return ["tools"]

    announcer = notices.ListingAnnouncer(Flaky(), served())  # type: ignore[arg-type]
    assert asyncio.run(announcer.announce()) == ["tools"]
    assert len(calls) == 3

    async def start_then_stop() -> None:
        calls.clear()
        await announcer.process_startup({}, {})  # the store is away: the process starts anyway
        assert len(calls) == 1
        while len(calls) < 3:
            await asyncio.sleep(0.01)
        await announcer.process_shutdown({}, {})

    asyncio.run(start_then_stop())


# -- the public API ------------------------------------------------------------------------------
def test_resource_updated_announces_on_a_given_store_or_the_processs_own(
    notes: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = Session(notes)
    assert session.subscribe(TODAY).result == {}
    channel = notes.keys.session_events(session.sref)
    pubsub = notes.peek.pubsub()
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    store = sync_store(notes)
    assert mcpq.resource_updated(TODAY, store=store) is True
    monkeypatch.setattr(announcing, "process_store", lambda: store)
    assert app.resource_updated(TODAY) is True
    heard = [pubsub.get_message(timeout=1) for _ in range(2)]
    assert [m["data"] for m in heard if m] == [f"res:{uri_digest(TODAY)}"] * 2
    pubsub.close()
    with pytest.raises(ValueError, match="non-empty string"):
        mcpq.resource_updated("")


def test_resource_updated_is_best_effort_and_logs_no_uri(caplog: pytest.LogCaptureFixture) -> None:
    away = redis.Redis(port=1, decode_responses=True, retry=Retry(NoBackoff(), 0))
    with caplog.at_level(logging.WARNING):
        assert mcpq.resource_updated("notes://secret-name", store=TaskStore(away)) is False
    assert "not announced" in caplog.text
    assert "secret-name" not in caplog.text


def test_the_process_store_is_built_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(announcing, "_process_store", None)
    first = announcing.process_store()
    assert announcing.process_store() is first
    monkeypatch.setattr(announcing, "_process_store", (-1, first))  # as after a fork
    assert announcing.process_store() is not first
    monkeypatch.setattr(announcing, "_process_store", None)


# -- merged watches ------------------------------------------------------------------------------
class Scripted:
    def __init__(self, items: list[str]) -> None:
        self.items = items

    async def next(self, timeout_s: float) -> str | None:
        if self.items:
            return self.items.pop(0)
        await asyncio.sleep(min(timeout_s, 0.01))
        return None


def test_merged_watches_deliver_every_parts_changes() -> None:
    import contextlib

    @contextlib.asynccontextmanager
    async def part(items: list[str]) -> Any:
        yield Scripted(items)

    async def read() -> list[str]:
        got: list[str] = []
        async with notices.merged(part(["a", "b"]), part(["list:tools"])) as changes:
            while len(got) < 3:
                item = await changes.next(1.0)
                assert item is not None
                got.append(item)
            assert await changes.next(0) is None
        return got

    assert sorted(asyncio.run(read())) == ["a", "b", "list:tools"]


def test_notices_are_told_apart_from_task_ids() -> None:
    assert notices.notice_of("list:tools") == notices.Notice("list", "tools")
    assert notices.notice_of("list:everything") is None
    assert notices.notice_of("res:abc") == notices.Notice("res", "abc")
    assert notices.notice_of("Zq3-_taskid") is None
