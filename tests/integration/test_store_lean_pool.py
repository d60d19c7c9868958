"""The Redis pools and connections of ``shared.store.lean``. The web tier's: an idle connection is
handed out and taken back without the pool's condition while nobody waits, a command is written
without a task per write, and each step redis-py would take where it matters still happens: a
waiter gets a released connection, a due health check pings, a write that cannot drain times
out and drops its connection. The workers': an idle connection goes out and back without
redis-py's bookkeeping, threads sharing the pool never share a connection, and a connection
left with an unread reply, or dropped, is not handed out as it is.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
import redis.exceptions as rexc

from mcpq.shared.settings import Settings
from mcpq.shared.store import AsyncTaskStore, Keys, NewTask, TaskStore, task_ref
from mcpq.shared.store.clients import async_client, sync_client
from mcpq.shared.store.lean import (
    LeanPool,
    LeanSyncPool,
    LeanWrites,
    lean_enabled,
    lean_sync_enabled,
)
from tests.support.redis_server import RedisProcess, redis_server

OWNER = "principal-alice"


@asynccontextmanager
async def _web_client(server: RedisProcess, **env: str) -> AsyncIterator[aioredis.Redis]:
    client = async_client(Settings.from_env({"REDIS_URL": server.url, **env}))
    try:
        yield client
    finally:
        await client.aclose()


def _run(body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(body())


def _pings(admin: redis.Redis) -> int:
    return int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))


def test_the_locked_redis_py_has_what_the_fast_paths_use() -> None:
    """Should a redis-py release rename what the fast paths use, they step aside (slower,
    never wrong): this fails then, so the change is seen rather than paid for unnoticed."""
    assert lean_enabled()
    assert lean_sync_enabled()


def test_the_web_client_is_built_on_the_fast_paths(redis_process: RedisProcess) -> None:
    async def body() -> None:
        async with _web_client(redis_process) as client:
            assert isinstance(client.connection_pool, LeanPool)
            assert issubclass(client.connection_pool.connection_class, LeanWrites)

    _run(body)


def test_an_idle_connection_goes_out_and_back_without_the_condition(
    redis_process: RedisProcess, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the pool holds an idle connection, a store call neither waits on the condition
    nor writes through ``asyncio.wait_for``; the connection is back in the pool after it."""
    ref = task_ref("lean-idle")

    async def body() -> None:
        async with _web_client(redis_process) as client:
            store = AsyncTaskStore(client, keys)
            new = NewTask(ref, "echo", "q", OWNER, {"text": "hi"}, {}, 60_000, 100)
            assert await store.create(new, 30_000) is not None
            pool: Any = client.connection_pool

            def refused(*_: Any, **__: Any) -> Any:
                raise AssertionError("redis-py's own path was taken")

            monkeypatch.setattr(aioredis.BlockingConnectionPool, "get_connection", refused)
            monkeypatch.setattr(aioredis.BlockingConnectionPool, "release", refused)
            monkeypatch.setattr(asyncio, "wait_for", refused)
            for _ in range(3):
                record, _inputs = await store.get(ref, OWNER)
                assert record.status == "working"
            assert not pool._in_use_connections
            assert len(pool._available_connections) == 1

    _run(body)


def test_a_waiter_gets_the_connection_released_to_the_pool(
    redis_process: RedisProcess,
) -> None:
    """A pool of one, its connection out, a second caller waiting: the release goes through
    the condition (so the waiter is woken) and the waiter gets the connection at once."""

    async def body() -> float:
        async with _web_client(redis_process) as client:
            pool: Any = client.connection_pool
            pool.max_connections = 1
            held = await pool.get_connection()
            waiter = asyncio.ensure_future(pool.get_connection())
            await asyncio.sleep(0.05)
            assert not waiter.done() and pool._condition._waiters  # it waits on the condition
            released = time.monotonic()
            await pool.release(held)
            got = await asyncio.wait_for(waiter, 2)
            took = time.monotonic() - released
            assert got is held
            await got.send_command("PING")
            assert await got.read_response() == "PONG"
            await pool.release(got)
            return took

    assert _run(body) < 0.5


def test_a_due_health_check_still_pings(redis_process: RedisProcess) -> None:
    admin = redis.Redis.from_url(redis_process.url)

    async def body() -> None:
        async with _web_client(redis_process) as client:
            assert await client.get("lean-nothing") is None
            pool: Any = client.connection_pool
            conn = await pool.get_connection()
            try:
                before = _pings(admin)
                await conn.send_command("GET", "lean-nothing")
                assert await conn.read_response() is None
                assert _pings(admin) == before  # not due: no PING
                conn.next_health_check = 0  # due
                await conn.send_command("GET", "lean-nothing")
                assert await conn.read_response() is None
                assert _pings(admin) == before + 1
            finally:
                await pool.release(conn)

    try:
        _run(body)
    finally:
        admin.close()


def test_a_write_that_cannot_drain_times_out_and_drops_its_connection() -> None:
    """Redis stopped (SIGSTOP), a command larger than the sockets' buffers: the write waits for
    the buffer to drain, bounded by the socket timeout, then the connection is dropped (a
    half-sent command must never be followed by another on it)."""
    with redis_server() as server:

        async def body() -> float:
            async with _web_client(server, MCPQ_REDIS_TIMEOUT_S="0.5") as client:
                assert await client.ping()
                pool: Any = client.connection_pool
                conn = await pool.get_connection()
                os.kill(server.pid, signal.SIGSTOP)
                try:
                    started = time.monotonic()
                    with pytest.raises(rexc.TimeoutError):
                        await conn.send_command("SET", "lean-big", b"x" * (64 << 20))
                    took = time.monotonic() - started
                    assert not conn.is_connected
                finally:
                    os.kill(server.pid, signal.SIGCONT)
                    await pool.release(conn)
                assert await client.ping()  # the pool carries on, on a new connection
                return took

        assert _run(body) < 5


# -- the workers' pool ------------------------------------------------------------------------


def _worker_client(server: RedisProcess, **env: str) -> redis.Redis:
    return sync_client(Settings.from_env({"REDIS_URL": server.url, **env}))


def _idle(pool: Any) -> int:
    """Connections (made ones, not empty slots) waiting in the pool's queue."""
    return sum(1 for connection in list(pool.pool.queue) if connection is not None)


def _slots(pool: Any, size: int) -> None:
    """Make ``pool`` (fresh, nothing checked out) a pool of ``size`` slots, filled as
    redis-py's ``reset()`` fills one: empty slots, connections made on demand."""
    pool.pool = type(pool.pool)(size)
    for _ in range(size):
        pool.pool.put_nowait(None)
    pool.max_connections = size


def _left_unread(conn: Any, value: str) -> None:
    """Send ``ECHO value`` on ``conn`` and wait until its reply has arrived, unread."""
    conn.send_command("ECHO", value)
    deadline = time.monotonic() + 5
    while not conn.can_read() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert conn.can_read()


def test_the_workers_client_is_built_on_the_fast_path(redis_process: RedisProcess) -> None:
    client = _worker_client(redis_process)
    try:
        assert isinstance(client.connection_pool, LeanSyncPool)
    finally:
        client.close()


def test_an_idle_connection_goes_out_and_back_without_redis_pys_bookkeeping(
    redis_process: RedisProcess, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the pool holds a connection, a store call takes it and puts it back without
    redis-py's own checkout and release; it is the same connection every time."""
    client = _worker_client(redis_process)
    try:
        store = TaskStore(client, keys)
        ref = task_ref("lean-sync-idle")
        new = NewTask(ref, "echo", "q", OWNER, {"text": "hi"}, {}, 60_000, 100)
        assert store.create(new, 30_000) is not None
        pool: Any = client.connection_pool
        assert _idle(pool) == 1
        (first,) = [c for c in pool.pool.queue if c is not None]

        def refused(*_: Any, **__: Any) -> Any:
            raise AssertionError("redis-py's own path was taken")

        monkeypatch.setattr(redis.BlockingConnectionPool, "get_connection", refused)
        monkeypatch.setattr(redis.BlockingConnectionPool, "release", refused)
        for _ in range(3):
            record = store.record(ref)
            assert record is not None and record.status == "working"
        assert _idle(pool) == 1
        assert [c for c in pool.pool.queue if c is not None] == [first]
    finally:
        client.close()


def test_threads_sharing_the_pool_never_share_a_connection(redis_process: RedisProcess) -> None:
    """16 threads, 4 connections, each thread's ECHO answered with its own value: a connection
    handed to two threads at once would cross their replies (or break the protocol). A thread
    may wait long for one of the 4 on a starved machine: that wait (2 s by default, then
    "no connection available") is not what this test is about, so it is long here."""
    client = _worker_client(redis_process, MCPQ_REDIS_TIMEOUT_S="30")
    pool: Any = client.connection_pool
    _slots(pool, 4)
    crossed: list[tuple[str, str]] = []
    failed: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(300):
                sent = f"t{n}-{i}"
                got = client.echo(sent)
                if got != sent:
                    crossed.append((sent, str(got)))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failed and not crossed
        assert 1 <= _idle(pool) <= 4 and pool.pool.qsize() == 4  # every slot back
    finally:
        client.close()


def test_a_connection_left_with_an_unread_reply_is_not_handed_out(
    redis_process: RedisProcess,
) -> None:
    """A command cut short between its write and its read (an exception raised into the thread)
    leaves a reply on the connection: the next checkout must not read it as its own. (A
    redis-py 8 pool as redis-py builds it fails this: with maintenance notifications "auto",
    its default, it skips the check and the next command reads "stale".)"""
    client = _worker_client(redis_process)
    try:
        assert client.ping()
        pool: Any = client.connection_pool
        conn = pool.get_connection()
        _left_unread(conn, "stale")
        pool.release(conn)  # with "stale" unread
        assert client.echo("fresh") == "fresh"
        assert client.echo("again") == "again"
    finally:
        client.close()


def test_a_dropped_connection_is_connected_again_by_redis_py(
    redis_process: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection dropped after an error goes back to the pool unconnected; the next checkout
    has redis-py connect it (its own path), and the round trip works."""
    client = _worker_client(redis_process)
    try:
        assert client.ping()
        pool: Any = client.connection_pool
        conn = pool.get_connection()
        conn.disconnect()
        pool.release(conn)
        taken: list[int] = []
        own = redis.BlockingConnectionPool.get_connection

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            taken.append(1)
            return own(self, *args, **kwargs)

        monkeypatch.setattr(redis.BlockingConnectionPool, "get_connection", counted)
        assert client.echo("back") == "back"
        assert taken == [1]
    finally:
        client.close()


def test_a_web_connection_left_with_an_unread_reply_is_not_handed_out(
    redis_process: RedisProcess,
) -> None:
    """The same on the web tier's pool (a request cancelled between a write and its read)."""

    async def body() -> None:
        async with _web_client(redis_process) as client:
            assert not client.connection_pool.maint_notifications_enabled()
            assert await client.ping()
            pool: Any = client.connection_pool
            conn = await pool.get_connection()
            await conn.send_command("ECHO", "stale")
            deadline = time.monotonic() + 5
            while not await conn.can_read() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # (can_read only looks: it reads nothing)
            assert await conn.can_read()
            await pool.release(conn)  # with "stale" unread
            assert await client.echo("fresh") == "fresh"

    _run(body)


def test_a_waiter_on_the_workers_pool_never_gets_an_unread_reply(
    redis_process: RedisProcess,
) -> None:
    """With every connection out, a thread waits in redis-py's own checkout; the connection it
    gets was released with an unread reply: redis-py's check (maintenance notifications off)
    drops it rather than handing it over."""
    client = _worker_client(redis_process)
    try:
        pool: Any = client.connection_pool
        assert not pool.maint_notifications_enabled()
        _slots(pool, 1)
        assert client.ping()
        conn = pool.get_connection()
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(client.echo("fresh")))
        waiter.start()
        time.sleep(0.2)  # the waiter is in redis-py's blocking get
        _left_unread(conn, "stale")
        pool.release(conn)
        waiter.join(10)
        assert got == ["fresh"]
    finally:
        client.close()
