"""How both stores run their scripts on a single Redis: ``EVALSHA`` on one pooled connection
of the configured client (``_evalsha``), not through redis-py's generic command path, with what
``Script.__call__`` and the client gave: a script Redis forgot is loaded and run again, a
connection that died is dropped and the call retried on a new one, and a server that is gone is
still ``StoreUnavailable`` (a 503), at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.settings import Settings
from mcpq.shared.store import AsyncTaskStore, Keys, NewTask, Reply, TaskStatus, TaskStore, task_ref
from mcpq.shared.store.clients import async_client, sync_client
from tests.support.redis_server import RedisProcess

OWNER = "principal-alice"


def _new(ref: str) -> NewTask:
    return NewTask(ref, "echo", "tools-q", OWNER, {"text": "hi"}, {}, 60_000, 100)


def _kill_other_connections(admin: redis.Redis) -> int:
    """Close, server side, every connection but ``admin``'s: how many there were."""
    return int(admin.execute_command("CLIENT", "KILL", "USER", "default", "SKIPME", "yes") or 0)


@pytest.fixture
def worker_store(redis_process: RedisProcess, keys: Keys) -> Iterator[TaskStore]:
    """The workers' store on the configured client (its pool and retry policy)."""
    client = sync_client(Settings.from_env({"REDIS_URL": redis_process.url}))
    try:
        yield TaskStore(client, keys)
    finally:
        client.close()


async def _on_web_store(
    server: RedisProcess, keys: Keys, body: Callable[[AsyncTaskStore], Awaitable[Any]]
) -> Any:
    client = async_client(Settings.from_env({"REDIS_URL": server.url}))
    try:
        return await body(AsyncTaskStore(client, keys))
    finally:
        await client.aclose()


def test_the_web_store_runs_its_scripts_without_the_clients_command_path(
    redis_process: RedisProcess, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request of the web tier runs a script; the client's generic path is not used."""

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("a script went through Redis.execute_command")

    ref = task_ref("script-path-web")

    async def body(store: AsyncTaskStore) -> Any:
        await store.now_ms()  # the clock's TIME goes through the client: read it first
        monkeypatch.setattr(aioredis.Redis, "execute_command", refused)
        assert await store.create(_new(ref), 30_000) is not None
        record, _ = await store.get(ref, OWNER)
        return record

    assert asyncio.run(_on_web_store(redis_process, keys, body)).status == "working"


def test_the_worker_store_runs_its_scripts_without_the_clients_command_path(
    worker_store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = worker_store
    ref = task_ref("script-path-worker")
    store.now_ms()

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("a script went through Redis.execute_command")

    monkeypatch.setattr(redis.Redis, "execute_command", refused)
    assert store.create(_new(ref), 30_000) is not None
    claim = store.claim(ref, 10_000)
    assert claim.record is not None
    assert store.finish(ref, claim.gen, TaskStatus.COMPLETED, {"content": []}) is Reply.OK


def test_a_script_redis_forgot_is_loaded_and_run_once(
    redis_process: RedisProcess, keys: Keys, redis_client: redis.Redis, worker_store: TaskStore
) -> None:
    """After ``SCRIPT FLUSH`` (a restarted Redis, a promoted replica) both stores load the
    script again, and the call runs exactly once: a claim that ran twice would be the 2nd."""
    worker = worker_store
    first, second = task_ref("forgot-1"), task_ref("forgot-2")
    assert worker.create(_new(first), 30_000) is not None
    redis_client.script_flush()
    claim = worker.claim(first, 10_000)
    assert claim.record is not None and claim.gen == 1

    async def body(store: AsyncTaskStore) -> Any:
        redis_client.script_flush()
        assert await store.create(_new(second), 30_000) is not None
        redis_client.script_flush()
        return await store.get(second, OWNER)

    record, _ = asyncio.run(_on_web_store(redis_process, keys, body))
    assert record.status == "working"
    redis_client.script_flush()
    assert worker.claim(second, 10_000).gen == 1


def test_a_connection_redis_closed_is_dropped_and_the_call_retried(
    redis_process: RedisProcess, keys: Keys, redis_client: redis.Redis, worker_store: TaskStore
) -> None:
    """A pooled connection the server closed (a restart, a proxy's idle timeout) costs one
    retry on a new connection, not an error: as the client's own retry policy gives."""
    worker = worker_store
    ref = task_ref("killed-connection")
    assert worker.create(_new(ref), 30_000) is not None
    assert _kill_other_connections(redis_client) >= 1
    claim = worker.claim(ref, 10_000)  # a script, on the pooled connection that was closed
    assert claim.record is not None and claim.gen == 1

    async def body(store: AsyncTaskStore) -> Any:
        record, _ = await store.get(ref, OWNER)
        assert record.status == "working"
        assert _kill_other_connections(redis_client) >= 1
        record, _ = await store.get(ref, OWNER)
        return record

    assert asyncio.run(_on_web_store(redis_process, keys, body)).status == "working"


def test_a_server_that_is_gone_is_store_unavailable_on_both_paths() -> None:
    """Retried once on a new connection, a refused one is still a 503, at once."""
    keys = Keys(prefix="gone")
    with RedisProcess() as doomed:
        settings = Settings(redis_url=doomed.url, redis_timeout_s=1.0)
        worker = TaskStore(sync_client(settings), keys)
        ref = task_ref("gone")
        assert worker.create(_new(ref), 30_000) is not None
        worker.claim(ref, 10_000)  # the pool holds a live connection
        client = async_client(settings)

        async def web_read() -> None:
            store = AsyncTaskStore(client, keys)
            await store.get(ref, OWNER)
            doomed.kill()
            try:
                started = time.monotonic()
                with pytest.raises(StoreUnavailable):
                    await store.get(ref, OWNER)
                assert time.monotonic() - started < 1.0
            finally:
                await client.aclose()

        asyncio.run(web_read())
        with pytest.raises(StoreUnavailable):
            worker.claim(ref, 10_000)
        worker._redis.close()
