"""Resource subscriptions, updates and list changes on a real Redis (``resource_subscribe.lua``,
``resource_refresh.lua``, ``resource_updated.lua``, ``lists_changed.lua``): who is told, in one
step with the subscribe; entries that lapse; every key with a TTL but the listings' digests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from mcpq.shared.store import Keys, Session, resource_events
from mcpq.shared.store.announce import announce_list_changed, announce_updated
from mcpq.shared.store.resource_events import LIST_MESSAGE, RESOURCE_MESSAGE, uri_digest
from mcpq.shared.store.sessions import open_session
from tests.integration.conftest import RedisClock
from tests.support.white_box import WhiteBoxStore

URI = "shop://orders/42"
SESSION_TTL_MS = 60_000


def open_one(store: WhiteBoxStore, sref: str, ttl_ms: int = SESSION_TTL_MS) -> None:
    session = Session(sref, "2025-11-25", {}, "anonymous", f"s.{sref}")
    store.pipeline(open_session(store.keys, session, ttl_ms))


def subscribe(store: WhiteBoxStore, sref: str, uri: str = URI, ttl_ms: int = SESSION_TTL_MS) -> int:
    return store.run(resource_events.subscribe(store.keys, sref, uri, ttl_ms))


@pytest.fixture
def listener(redis_client: redis.Redis) -> Iterator[redis.client.PubSub]:
    pubsub = redis_client.pubsub()
    yield pubsub
    pubsub.close()


def heard(pubsub: redis.client.PubSub, channels: list[str]) -> list[tuple[str, str]]:
    """Subscribe first (confirmed), as a stream does; returns the list ``drain`` fills."""
    pubsub.subscribe(*channels)
    for _ in channels:
        message = pubsub.get_message(timeout=2)
        assert message is not None and message["type"] == "subscribe", message
    return []


def drain(pubsub: redis.client.PubSub) -> list[tuple[str, str]]:
    got = []
    while (message := pubsub.get_message(timeout=0.2)) is not None:
        got.append((message["channel"], message["data"]))
    return got


def test_an_update_reaches_the_listen_channel_and_each_subscribed_session(
    store: WhiteBoxStore, keys: Keys, listener: redis.client.PubSub
) -> None:
    digest = uri_digest(URI)
    for sref in ("a" * 32, "b" * 32, "c" * 32):
        open_one(store, sref)
    assert subscribe(store, "a" * 32) == 1
    assert subscribe(store, "b" * 32) == 1
    assert subscribe(store, "c" * 32, "shop://orders/43") == 1
    channels = [keys.resource_events(digest), *(keys.session_events(s * 32) for s in "abc")]
    heard(listener, channels)
    assert announce_updated(URI, store) == 2
    message = RESOURCE_MESSAGE + digest
    assert sorted(drain(listener)) == sorted(
        [
            (keys.resource_events(digest), message),
            (keys.session_events("a" * 32), message),
            (keys.session_events("b" * 32), message),
        ]
    )
    # Unsubscribed: no longer told (the session's channel), the listen channel still is.
    store.pipeline(resource_events.unsubscribe(keys, "a" * 32, URI))
    assert announce_updated(URI, store) == 1
    assert {channel for channel, _ in drain(listener)} == {
        keys.resource_events(digest),
        keys.session_events("b" * 32),
    }


def test_a_subscription_is_refused_for_a_session_gone_or_full(
    store: WhiteBoxStore, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert subscribe(store, "0" * 32) == 0
    assert not store.redis.exists(keys.session_resources("0" * 32))
    assert not store.redis.exists(keys.resource_subscribers(uri_digest(URI)))
    monkeypatch.setattr(resource_events, "MAX_SESSION_SUBSCRIPTIONS", 2)
    open_one(store, "1" * 32)
    assert [subscribe(store, "1" * 32, f"shop://orders/{n}") for n in range(3)] == [1, 1, -1]
    assert subscribe(store, "1" * 32, "shop://orders/0") == 1  # one it holds


def test_keys_expire_with_the_session_and_the_longest_entry(
    store: WhiteBoxStore, keys: Keys
) -> None:
    open_one(store, "d" * 32, ttl_ms=5_000)
    assert subscribe(store, "d" * 32, ttl_ms=5_000) == 1
    assert 0 < store.redis.pttl(keys.session_resources("d" * 32)) <= 5_000
    index = keys.resource_subscribers(uri_digest(URI))
    assert 4_000 < store.redis.pttl(index) <= 5_000
    open_one(store, "e" * 32)
    assert subscribe(store, "e" * 32) == 1
    assert store.redis.pttl(index) > 5_000  # the longest entry's
    open_one(store, "f" * 32, ttl_ms=5_000)
    assert subscribe(store, "f" * 32, ttl_ms=5_000) == 1
    assert store.redis.pttl(index) > 5_000  # never shortened


def test_a_lapsed_entry_is_dropped_and_a_refresh_brings_it_back(
    store: WhiteBoxStore, keys: Keys, clock: RedisClock
) -> None:
    sref, index = "9" * 32, keys.resource_subscribers(uri_digest(URI))
    open_one(store, sref)
    assert subscribe(store, sref, ttl_ms=20) == 1
    clock.wait_past(int(store.redis.zscore(index, sref) or 0))
    assert announce_updated(URI, store) == 0  # lapsed: dropped
    assert not store.redis.exists(index)
    digests = store.pipeline(resource_events.session_digests(keys, sref))
    assert digests == [uri_digest(URI)]
    assert store.run(resource_events.refresh(keys, sref, digests, SESSION_TTL_MS)) is True
    assert announce_updated(URI, store) == 1
    store.redis.delete(keys.session(sref))
    assert store.run(resource_events.refresh(keys, sref, digests, SESSION_TTL_MS)) is False


@pytest.mark.keys_without_ttl  # the listings' digests stay (a start compares with them)
def test_a_list_change_is_stored_and_announced_once(
    store: WhiteBoxStore, keys: Keys, listener: redis.client.PubSub
) -> None:
    heard(listener, [keys.listing_changes])
    first = {"tools": "t1", "prompts": "p1", "resources": "r1"}
    assert store.run(resource_events.lists_changed(keys, first)) == list(first)
    assert store.run(resource_events.lists_changed(keys, first)) == []
    assert store.run(resource_events.lists_changed(keys, {**first, "tools": "t2"})) == ["tools"]
    announce_list_changed(["prompts"], store)  # a nudge: nothing stored
    assert store.redis.hgetall(keys.listings) == {**first, "tools": "t2"}
    got = [data for _, data in drain(listener)]
    assert got == [LIST_MESSAGE + n for n in ("tools", "prompts", "resources", "tools", "prompts")]
    with pytest.raises(ValueError, match="no list"):
        resource_events.lists_changed(keys, {"everything": "x"})
