"""The web tier's watch connection has one connector (``mcpq.shared.store.async_wakeups``): requests
that watch while it is down (a process just started, a connection just cut) neither connect it
nor read it; the reader alone does, once, and subscribes every watched channel. Two handshakes on
one socket were a request's error 500 ("read() called while another coroutine is already waiting
for incoming data"); the real connection cut again and again is in
``tests/integration/test_store_watch_connection.py``."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import redis.exceptions as rexc

from mcpq.shared.store import async_wakeups
from mcpq.shared.store.async_wakeups import AsyncWakeups
from mcpq.shared.store.keyspace import Keys

REQUESTS = 20
CUT = ["(cut)"]


def _task() -> str:
    task = asyncio.current_task()
    return task.get_name() if task is not None else "?"


class FakeConnection:
    """A watch connection that records which task connects it and which reads it."""

    health_check_interval = 0
    next_health_check = 0.0

    def __init__(self) -> None:
        self.is_connected = False
        self.connected_by: list[str] = []
        self.read_by: set[str] = set()
        self.replies: asyncio.Queue[list[str]] = asyncio.Queue()

    async def connect(self) -> None:
        self.connected_by.append(_task())
        await asyncio.sleep(0.01)  # a handshake takes a while: requests come meanwhile
        self.is_connected = True

    async def send_command(self, *args: str, check_health: bool = True) -> None:
        assert self.is_connected and not check_health
        if args[0] == "SUBSCRIBE":
            for channel in args[1:]:
                self.replies.put_nowait(["subscribe", channel, "1"])

    async def read_response(self, timeout: float, **_: Any) -> list[str] | None:
        self.read_by.add(_task())
        try:
            reply = await asyncio.wait_for(self.replies.get(), timeout)
        except TimeoutError:
            return None
        if reply is CUT:
            self.is_connected = False
            raise rexc.ConnectionError("Connection closed by server.")
        return reply

    async def disconnect(self, nowait: bool = False) -> None:
        self.is_connected = False


class FakePool:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn, self.given_back = conn, 0

    async def get_connection(self) -> FakeConnection:
        return self.conn

    async def release(self, conn: FakeConnection) -> None:
        assert not conn.is_connected, "a connection goes back to its pool disconnected"
        self.given_back += 1


class FakeClient:
    def __init__(self, pool: FakePool) -> None:
        self.connection_pool = pool


async def _watch_at_once(hub: AsyncWakeups, first: int) -> None:
    async def request(i: int) -> None:
        async with hub.watch([f"ch{i}"]):
            pass

    await asyncio.gather(
        *(asyncio.create_task(request(i), name=f"request-{i}") for i in range(first, REQUESTS))
    )


async def _cold_then_cut() -> tuple[FakeConnection, FakePool]:
    conn = FakeConnection()
    pool = FakePool(conn)
    hub = AsyncWakeups(cast(Any, FakeClient(pool)), Keys())
    async with hub.watch(["held"]):  # keeps the reader reading throughout
        await _watch_at_once(hub, 0)  # a process just started: no connection yet
        assert conn.connected_by == ["mcpq-watch"]
        conn.is_connected = False  # Redis closed it (a primary killed); the reader reads so:
        later = asyncio.create_task(_watch_at_once(hub, REQUESTS // 2))
        await asyncio.sleep(0.005)
        conn.replies.put_nowait(CUT)
        await later  # every one confirmed once the reader reconnected
    await hub.aclose()
    return conn, pool


def test_only_the_reader_connects_and_reads_the_watch_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(async_wakeups, "RECONNECT_PAUSE_S", 0.01)
    conn, pool = asyncio.run(_cold_then_cut())
    assert conn.connected_by == ["mcpq-watch", "mcpq-watch"]
    assert conn.read_by == {"mcpq-watch"}
    assert pool.given_back == 2  # the cut connection, then the last one at close


async def _second_watch_while_the_first_is_unconfirmed() -> list[str]:
    conn = FakeConnection()
    hub = AsyncWakeups(cast(Any, FakeClient(FakePool(conn))), Keys())
    order: list[str] = []
    held = asyncio.Event()
    real_send = conn.send_command

    async def slow_confirmation(*args: str, check_health: bool = True) -> None:
        # SUBSCRIBE is written; its confirmation comes only once the second watch has begun.
        if args[0] == "SUBSCRIBE":
            await held.wait()
        await real_send(*args, check_health=check_health)

    conn.send_command = slow_confirmation  # type: ignore[method-assign]

    async def first() -> None:
        async with hub.watch(["ch"]):
            order.append("first watching")
            await asyncio.sleep(0.05)

    async def second() -> None:
        await asyncio.sleep(0.02)  # the first has subscribed, unconfirmed
        async with hub.watch(["ch"]):
            order.append("second watching")

    async def confirm_later() -> None:
        await asyncio.sleep(0.04)
        order.append("confirmed")
        held.set()

    await asyncio.gather(first(), second(), confirm_later())
    await hub.aclose()
    return order


def test_a_second_watch_of_a_channel_waits_for_its_subscription_to_be_confirmed() -> None:
    """A change published between a SUBSCRIBE and its confirmation reaches no watch of that
    channel: a second watch, which reads its task next, must not read before it either."""
    order = asyncio.run(_second_watch_while_the_first_is_unconfirmed())
    assert order.index("confirmed") < order.index("second watching")
    assert order.index("confirmed") < order.index("first watching")
