"""The web tier's watch connection (``mcpq.shared.store.async_wakeups``) cut again and again while
requests watch tasks and read them: every call answers or is unavailable (503), never an internal
error, and the process still holds one pub/sub connection.

Given many requests watching and reading tasks at once, when Redis closes the watch connection
every ~0.1 s (``CLIENT KILL TYPE pubsub``, as a primary killed in a failover), then no request
fails otherwise than with ``StoreUnavailable``. With redis-py's ``PubSub`` shared by the reader
and the requests, the reader and the requests subscribing at that moment each reconnected the one
connection and ran its handshake at once ("read() called while another coroutine is already
waiting for incoming data"), and its ``aclose`` gave the connection back to the pool the commands
draw from while a request still used it: on a Cluster a ``tasks/get`` read on that socket too,
or read a handshake's reply ("unknown subcommand 'SETINFO'"), and subscribed connections leaked.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.errors import StoreUnavailable, TaskNotFound
from mcpq.shared.settings import Settings
from mcpq.shared.store import WebStore
from mcpq.shared.store.clients import open_web_store
from tests.support.redis_cluster import LocalCluster, cluster_binaries
from tests.support.redis_server import RedisProcess

STORM_S = 3.0
CUT_EVERY_S = 0.1
READERS = WATCHERS = 20


class Outcomes:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.unexpected: list[str] = []

    def failed(self, what: str, exc: Exception) -> None:
        self.unexpected.append(f"{what}: {type(exc).__name__}: {exc}")


async def _read_tasks(store: WebStore, until: float, outcomes: Outcomes) -> None:
    while time.monotonic() < until:
        try:
            await store.tasks.get(uuid.uuid4().hex, "principal-alice")
        except TaskNotFound:
            outcomes.counts["read"] += 1
        except StoreUnavailable:
            outcomes.counts["read 503"] += 1
        except Exception as exc:  # what the test looks for
            outcomes.failed("tasks/get", exc)


async def _watch_tasks(store: WebStore, until: float, outcomes: Outcomes) -> None:
    while time.monotonic() < until:
        try:
            async with store.tasks.watch([uuid.uuid4().hex], mark=False):
                await asyncio.sleep(0.005)
            outcomes.counts["watch"] += 1
        except StoreUnavailable:
            outcomes.counts["watch 503"] += 1
        except Exception as exc:  # what the test looks for
            outcomes.failed("watch", exc)


def _cut_watch_connections(admins: list[redis.Redis], until: float) -> int:
    cut = 0
    while time.monotonic() < until:
        time.sleep(CUT_EVERY_S)
        for admin in admins:
            cut += admin.client_kill_filter(_type="pubsub")
    return cut


def _subscribed_connections(admins: list[redis.Redis]) -> int:
    return sum(
        1 for admin in admins for client in admin.client_list() if int(client.get("sub", 0)) > 0
    )


async def _storm(settings: Settings, admins: list[redis.Redis]) -> None:
    store = open_web_store(settings)
    try:
        await store.stats.live_workers(1)  # connected (on a Cluster: the slot map read) first
        outcomes = Outcomes()
        until = time.monotonic() + STORM_S
        cutting = asyncio.ensure_future(asyncio.to_thread(_cut_watch_connections, admins, until))
        await asyncio.gather(
            *(_read_tasks(store, until, outcomes) for _ in range(READERS)),
            *(_watch_tasks(store, until, outcomes) for _ in range(WATCHERS)),
        )
        cut = await cutting
        assert outcomes.unexpected == [], outcomes.unexpected[:5]
        assert cut >= 3, f"the watch connection was cut {cut} times ({outcomes.counts})"
        assert outcomes.counts["read"] > 0 and outcomes.counts["watch"] > 0, outcomes.counts
        # Once Redis stays up: one watch connection again, and every watch confirmed.
        async with store.tasks.watch([uuid.uuid4().hex], mark=False):
            assert _subscribed_connections(admins) == 1
    finally:
        await store.aclose()
    # The client closed its socket; the server drops the connection when its loop reads the
    # close, which on a busy machine may come a moment later. A leak never goes.
    wait_until(
        lambda: _subscribed_connections(admins) == 0,
        timeout=5,
        interval=0.05,
        message="no pub/sub connection left once the store is closed",
    )


@pytest.fixture
def own_server(redis_process: RedisProcess) -> Iterator[RedisProcess]:
    """A server of the same version as ``redis_process``, for this test alone: it counts every
    pub/sub connection the server holds."""
    server = RedisProcess(executable=redis_process.executable).start()
    try:
        yield server
    finally:
        server.close()


def test_a_watch_connection_cut_again_and_again_is_never_an_internal_error(
    own_server: RedisProcess,
) -> None:
    admins = [redis.Redis.from_url(own_server.url, decode_responses=True)]
    try:
        asyncio.run(_storm(Settings(redis_url=own_server.url), admins))
    finally:
        admins[0].close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    if cluster_binaries() is None:
        pytest.skip("needs Redis 7 and redis-cli")
    made = LocalCluster(tmp_path / "cluster", replicas=0).start()
    try:
        yield made
    finally:
        made.close()


def test_on_a_cluster_a_cut_watch_connection_never_reaches_the_commands(
    cluster: LocalCluster,
) -> None:
    # On a Cluster the watch connection is a node's, from the pool its commands use.
    settings = Settings(redis_url=cluster.url, redis_cluster=True, store_shards=6)
    admins = [cluster.client(node) for node in cluster.nodes]
    try:
        asyncio.run(_storm(settings, admins))
    finally:
        for admin in admins:
            admin.close()


def test_a_watcher_reads_its_task_again_once_its_connection_is_back(
    own_server: RedisProcess,
) -> None:
    """A change published while the watch connection was down (a Redis restart, a failover) is
    lost to pub/sub: once the new connection confirmed its subscription, every watcher of a task
    is told it may have changed, with no message, and reads it again (a push stream that missed
    a task's end across a Redis restart showed it working until the client gave up)."""
    admin = redis.Redis.from_url(own_server.url, decode_responses=True)

    async def go() -> None:
        store = open_web_store(Settings(redis_url=own_server.url))
        try:
            ref = uuid.uuid4().hex
            async with store.tasks.watch([ref], mark=False) as watch:
                assert await watch.next(0.2) is None, "nothing changed"
                assert admin.client_kill_filter(_type="pubsub") == 1
                assert await watch.next(5.0) == ref, "told to read again after the reconnect"
                assert await watch.next(0.3) is None, "once"
        finally:
            await store.aclose()

    try:
        asyncio.run(go())
    finally:
        admin.close()
