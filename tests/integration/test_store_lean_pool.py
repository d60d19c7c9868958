"""The web tier's Redis pool and connections (``shared.store.lean``): an idle connection is handed
out and taken back without the pool's condition while nobody waits, a command is written
without a task per write, and each step redis-py would take where it matters still happens:
a waiter gets a released connection, a due health check pings, a write that cannot drain times
out and drops its connection.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
import redis.exceptions as rexc

from shared.settings import Settings
from shared.store import AsyncTaskStore, Keys, NewTask, task_ref
from shared.store.clients import async_client
from shared.store.lean import LeanPool, LeanWrites, lean_enabled
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
