"""Shared wake-ups (``mcpq.shared.store.wakeups``): however many runs or requests wait, a process
holds one pub/sub connection; a change wakes exactly the runs and watches of its task."""

from __future__ import annotations

import asyncio
import threading
import time

import redis

from mcpq.shared.settings import Settings
from mcpq.shared.store import AsyncTaskStore, Keys, task_ref
from mcpq.shared.store.clients import async_client, sync_client
from mcpq.shared.store.wakeups import Wakeups
from tests.support.redis_server import RedisProcess

KEYS = Keys("wakeups-test")


def clients(server: RedisProcess) -> int:
    probe = redis.Redis.from_url(server.url)
    try:
        return int(probe.info("clients")["connected_clients"])
    finally:
        probe.close()


def test_a_thousand_async_watches_share_one_connection_and_wake_only_their_own(
    redis_process: RedisProcess,
) -> None:
    settings = Settings(redis_url=redis_process.url)
    publisher = redis.Redis.from_url(redis_process.url)
    before = clients(redis_process)

    async def scenario() -> tuple[int, list[str | None], str | None]:
        store = AsyncTaskStore(async_client(settings), KEYS)
        refs = [task_ref(f"task-{i}") for i in range(1000)]
        async with contextlib_stack(store, refs) as watches:
            during = clients(redis_process) - before
            target = refs[417]
            publisher.publish(KEYS.events(target), KEYS.task(target))
            woke = await watches[417].next(2.0)
            others = await asyncio.gather(*(w.next(0.2) for w in watches[:5]))
        await store.aclose()
        return during, others, woke

    during, others, woke = asyncio.run(scenario())
    assert during <= 3, f"{during} connections for 1000 watches"
    assert woke == task_ref("task-417")
    assert others == [None] * 5


class contextlib_stack:  # noqa: N801 (an async context manager of many watches)
    def __init__(self, store: AsyncTaskStore, refs: list[str]) -> None:
        self.store, self.refs = store, refs
        self.managers: list[object] = []

    async def __aenter__(self) -> list[object]:
        watches = []
        for ref in self.refs:
            manager = self.store.watch([ref])
            watches.append(await manager.__aenter__())
            self.managers.append(manager)
        return watches

    async def __aexit__(self, *exc: object) -> None:
        for manager in self.managers:
            await manager.__aexit__(None, None, None)  # type: ignore[attr-defined]


def test_threads_waiting_on_their_tasks_share_one_connection(redis_process: RedisProcess) -> None:
    settings = Settings(redis_url=redis_process.url)
    hub = Wakeups(sync_client(settings), KEYS)
    publisher = redis.Redis.from_url(redis_process.url)
    before = clients(redis_process)
    woke: dict[int, float] = {}
    ready = threading.Barrier(301)

    def run(i: int) -> None:
        with hub.watch(task_ref(f"run-{i}")) as watch:
            assert watch.ready()
            ready.wait()
            if watch.wait(3.0):
                woke[i] = time.monotonic()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(300)]
    for thread in threads:
        thread.start()
    ready.wait()
    during = clients(redis_process) - before
    sent = time.monotonic()
    publisher.publish(KEYS.wake(task_ref("run-7")), "answer")
    for thread in threads:
        thread.join()
    assert during <= 2, f"{during} connections for 300 waiting runs"
    assert list(woke) == [7]
    assert woke[7] - sent < 0.5
    assert hub.watching == 0  # every run unsubscribed when it ended


def test_a_run_subscribes_only_when_it_first_waits(redis_process: RedisProcess) -> None:
    settings = Settings(redis_url=redis_process.url)
    hub = Wakeups(sync_client(settings), KEYS)
    publisher = redis.Redis.from_url(redis_process.url)
    channel = KEYS.wake(task_ref("lazy"))
    with hub.watch(task_ref("lazy")) as watch:
        # A run that never waits costs no SUBSCRIBE (and no UNSUBSCRIBE)
        assert hub.watching == 0
        assert publisher.pubsub_numsub(channel) == [(channel.encode(), 0)]
        # Its first wait subscribes, confirmed before it returns
        assert watch.ready()
        assert hub.watching == 1
        assert publisher.pubsub_numsub(channel) == [(channel.encode(), 1)]
        assert watch.ready()  # again: the same subscription
        publisher.publish(channel, "answer")
        assert watch.wait(2.0)
    assert hub.watching == 0
