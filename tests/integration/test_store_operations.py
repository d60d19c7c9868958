"""What the store offers operators and the sweeper beside the transitions: the deployment-wide
lock, worker heartbeats, and the one stats snapshot behind ``/metrics`` and ``mcpq status``."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from mcpq.shared.store import AsyncTaskStore, Keys, web_store
from tests.support.redis_server import RedisProcess
from tests.support.white_box import WhiteBoxStore


def test_the_lock_is_held_by_one_caller_at_a_time_and_released_by_its_holder(
    store: WhiteBoxStore, redis_client
) -> None:
    other = WhiteBoxStore(redis_client, store.keys)
    with store.lock("sweeper", 10_000) as held:
        assert held
        token = store.redis.get(store.keys.lock("sweeper"))
        assert 0 < store.redis.pttl(store.keys.lock("sweeper")) <= 10_000  # never without a TTL
        with other.lock("sweeper", 10_000) as also:
            assert not also  # taken: the second caller does not get it
        assert store.redis.get(store.keys.lock("sweeper")) == token  # and did not release it
    assert not store.redis.exists(store.keys.lock("sweeper"))  # released on exit
    with other.lock("sweeper", 10_000) as held_now:
        assert held_now


def test_a_lock_that_expired_and_was_taken_over_is_not_released_by_its_old_holder(
    store: WhiteBoxStore, clock
) -> None:
    with store.lock("sweeper", 50) as held:
        assert held
        clock.wait_past(clock.now_ms() + 60)  # the holder stalled past its TTL...
        store.redis.set(store.keys.lock("sweeper"), "successor", px=10_000)  # ...and lost it
    assert store.redis.get(store.keys.lock("sweeper")) == "successor"


def test_one_snapshot_has_counters_gauges_queues_workers_and_the_oldest_task(
    store: WhiteBoxStore, tasks, clock
) -> None:
    # Given two unfinished tasks (one waiting for input), one completed, two worker heartbeats
    oldest, _ = tasks.waiting("name")
    clock.tick()
    tasks.new()
    done, gen = tasks.running()
    store.finish(done, gen, "completed", {"content": []})
    store.beat_worker("w1@host")
    store.beat_worker("w2@host")
    store.redis.rpush("tools-q", "message-1", "message-2")
    try:
        # When the snapshot is read
        snap = store.stats(["tools-q", "empty-q"])
    finally:
        store.redis.delete("tools-q")
    # Then it holds all of it
    assert snap.totals["created"] == {"echo": 3} and snap.totals["completed"] == {"echo": 1}
    assert snap.states == {"working": 1, "input_required": 1}
    assert (snap.inputs, snap.parked, snap.unfinished) == (1, 0, 2)
    assert snap.queues == {"tools-q": 2, "empty-q": 0}
    assert set(snap.workers) == {"w1@host", "w2@host"}
    assert snap.workers_alive(window_s=60) == 2
    created = int(store.redis.hget(store.keys.task(oldest), "created_ms"))
    assert snap.oldest_created_ms == created


def test_the_web_tier_counts_live_workers(redis_process: RedisProcess, keys: Keys, store) -> None:
    store.beat_worker("w1@host")

    async def count() -> tuple[int, int]:
        client = aioredis.Redis.from_url(redis_process.url, decode_responses=True)
        try:
            web = web_store(AsyncTaskStore(client, keys))
            live = await web.stats.live_workers(60)
            return live, (await web.stats.snapshot([])).workers_alive(60)
        finally:
            await client.aclose()

    assert asyncio.run(count()) == (1, 1)
