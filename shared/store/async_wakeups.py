"""The web tier's watches of tasks: one pub/sub connection per process for every watch (sync
calls waiting for their run, ``tasks/result``, ``subscriptions/listen``, a session's GET stream),
so the number of Redis connections does not grow with the number of waiting requests.

The scripts publish a task's change on its channel (``publish`` in ``lua/_prelude.lua``). A watch
subscribes to its channels and waits until Redis confirmed, because the caller reads the task's
state next and no change may fall in between.

NOTE: one task, the reader, connects the watch connection, reads it, and replaces it when it
fails. A request only writes on it (``SUBSCRIBE``, ``UNSUBSCRIBE``), holding ``_writing``, which
the reader holds too to replace it, and only while it is connected: else the reader subscribes
every watched channel once it has connected. redis-py's ``PubSub`` is not safe for that sharing:
it reconnects inside ``subscribe`` and ``get_message`` alike, so when the connection was cut (a
primary killed) the reader and the requests subscribing at that moment each ran the connection's
handshake on the one socket at once ("read() called while another coroutine is already waiting
for incoming data": an error 500), and its ``aclose`` gave the connection back to the pool the
commands draw from while a request still reconnected it or wrote on it. On a Cluster, whose
pub/sub redis-py (8.1) takes from the node's own pool, a ``tasks/get`` then read on the socket a
request was reading, or read that request's replies. Here the connection goes back to its pool
only once disconnected and out of every request's reach (``_drop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.redis_errors import as_store_error

log = logging.getLogger("mcpq.store")

QUEUE_BOUND = 1024
"""Changes queued for one watcher at most; past it the oldest are dropped (a watcher re-reads
its tasks on a timer too, and a change only says "read again")."""

MAX_CONFIRM_S = 5.0
"""How long a watch waits for Redis to confirm its subscription before the request fails
(503: the store is unavailable)."""

READ_SLICE_S = 1.0
"""How long one read of the watch connection waits before the reader looks again whether anyone
still watches (and whether the connection is due a health check)."""

RECONNECT_PAUSE_S = 0.5
"""The reader's pause between a lost watch connection and the next."""


#: A task's own channel is its key (``…:t:<ref>``) and this (``Keys.events``); a listing scope's
#: ends alike but names no task.
EV_SUFFIX = ":ev"


class AsyncWatch:
    """The changes of the watched tasks, as refs, one at a time."""

    def __init__(self) -> None:
        self.changes: asyncio.Queue[str] = asyncio.Queue(QUEUE_BOUND)

    def push(self, task_key: str) -> None:
        if self.changes.full():
            self.changes.get_nowait()
        self.changes.put_nowait(task_key)

    async def next(self, timeout_s: float) -> str | None:
        """The ref of the next changed task, or ``None`` when ``timeout_s`` passed quietly."""
        if timeout_s <= 0:
            return None
        try:
            key = await asyncio.wait_for(self.changes.get(), timeout_s)
        except TimeoutError:
            return None
        return Keys.ref_of(key)  # the task key (of whichever shard) -> its ref


class AsyncWakeups:
    """Every watch of a web process on one pub/sub connection (see the module's NOTE)."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self._client, self._keys = client, keys
        #: The watch connection, and how it goes back to its pool; ``None`` between two.
        self._conn: AbstractConnection | None = None
        self._give_back: Callable[[], Awaitable[None]] | None = None
        #: Held to write on the watch connection, and by the reader to replace it.
        self._writing = asyncio.Lock()
        self._watches: dict[str, set[AsyncWatch]] = {}
        self._confirm: dict[str, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def watch(self, channels: Sequence[str]) -> AsyncIterator[AsyncWatch]:
        watch = AsyncWatch()
        new: list[str] = []
        pending: list[asyncio.Future[None]] = []
        for channel in dict.fromkeys(channels):
            watches = self._watches.setdefault(channel, set())
            if not watches:
                new.append(channel)
            elif (future := self._confirm.get(channel)) is not None and not future.done():
                # Another watch subscribed it and Redis has not confirmed yet: a change published
                # before the confirmation would not reach this watch either, so it waits too.
                pending.append(future)
            watches.add(watch)
        try:
            if new:
                await self._subscribe(new)
            if pending:
                await self._confirmed(pending)
            yield watch
        finally:
            gone = []
            for channel in dict.fromkeys(channels):
                watches = self._watches.get(channel, set())
                watches.discard(watch)
                if not watches:
                    self._watches.pop(channel, None)
                    self._confirm.pop(channel, None)  # nobody waits for it now
                    gone.append(channel)
            if gone:
                await self._send("UNSUBSCRIBE", *gone)

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None
        async with self._writing:
            await self._drop()

    async def _subscribe(self, channels: list[str]) -> None:
        loop = asyncio.get_running_loop()
        waits = []
        for channel in channels:
            future = self._confirm.get(channel)
            if future is None or future.done():
                future = loop.create_future()
                self._confirm[channel] = future
            waits.append(future)
        self._start()
        await self._send("SUBSCRIBE", *channels)
        await self._confirmed(waits)

    @staticmethod
    async def _confirmed(futures: list[asyncio.Future[None]]) -> None:
        """Wait until Redis confirmed these subscriptions (the reader resolves them, in order),
        bounded: a 503 past ``MAX_CONFIRM_S``. Shielded: a waiter that gives up leaves the
        subscription for the other watches that wait on it."""
        try:
            shielded = (asyncio.shield(future) for future in futures)
            await asyncio.wait_for(asyncio.gather(*shielded), MAX_CONFIRM_S)
        except TimeoutError:
            raise StoreUnavailable() from None

    async def _send(self, *command: str) -> None:
        """Write ``command`` on the watch connection if it is connected; else nothing: the
        reader subscribes every watched channel once it has connected. Never connects (only
        the reader does), and reads nothing (``check_health=False``: a health check reads)."""
        async with self._writing:
            conn = self._conn
            if conn is None or not conn.is_connected:
                return
            try:
                await conn.send_command(*command, check_health=False)
            except Exception as exc:  # failed, and disconnected: the reader replaces it
                if not isinstance(as_store_error(exc), StoreUnavailable):
                    raise

    # -- the reader ------------------------------------------------------------------------------
    def _start(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read(), name="mcpq-watch")

    async def _read(self) -> None:
        while self._watches or self._confirm:  # else nothing to read for: a watch starts it again
            try:
                conn = self._conn
                if conn is None or not conn.is_connected:
                    conn = await self._connect()
                # push_request: with RESP3 (redis-py's default) a message is a push, which the
                # parser hands its push handler, and returns only when asked to.
                reply = await conn.read_response(
                    timeout=READ_SLICE_S, disconnect_on_error=False, push_request=True
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis away: a new connection, subscribed to every watched channel
                log.warning("watch connection lost; resubscribing")
                async with self._writing:
                    await self._drop()
                await asyncio.sleep(RECONNECT_PAUSE_S)
                continue
            if reply is not None:
                self._deliver(reply)
            elif self._health_check_due(conn):
                await self._send("PING")

    @staticmethod
    def _health_check_due(conn: AbstractConnection) -> bool:
        """As redis-py's pub/sub checks a quiet connection: a ``PING`` once it read nothing for
        the client's ``health_check_interval`` (every reply read pushes the next check back)."""
        interval = conn.health_check_interval
        return bool(interval) and conn.next_health_check < asyncio.get_running_loop().time()

    async def _connect(self) -> AbstractConnection:
        """A new watch connection, subscribed to every watched channel. Changes published
        between the lost connection and this one are lost: once each subscription is confirmed,
        the watchers of a task are told to read it again (``_deliver``)."""
        async with self._writing:
            await self._drop()
            conn, give_back = await self._take()
            self._conn, self._give_back = conn, give_back  # (``_drop`` gives it back if it fails)
            await conn.connect()  # type: ignore[no-untyped-call]
            if self._watches:
                await conn.send_command("SUBSCRIBE", *self._watches, check_health=False)
            return conn

    async def _take(self) -> tuple[AbstractConnection, Callable[[], Awaitable[None]]]:
        """A connection of the client's pool, and how to give it back. On a Cluster, a node's
        at random (every node hears every ``PUBLISH`` of the cluster), so that the next try
        after a failure may go to another one: the node that failed may be gone."""
        client = self._client
        if isinstance(client, aioredis.RedisCluster):
            await client.initialize()  # nothing to do once the slot map is known
            node = client.get_random_node()
            conn = node.acquire_connection()

            async def give_back() -> None:
                node.release(conn)

            return conn, give_back
        pool = client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        return conn, functools.partial(pool.release, conn)

    async def _drop(self) -> None:
        """Disconnect the watch connection and give it back to its pool (``_writing`` held: no
        request can write on it any more, and the reader is not reading it)."""
        conn, give_back = self._conn, self._give_back
        self._conn = self._give_back = None
        if conn is None or give_back is None:
            return
        with contextlib.suppress(Exception):  # already broken: nothing more to close
            await conn.disconnect(nowait=True)
        await give_back()

    def _deliver(self, reply: Any) -> None:
        """A reply read on the watch connection: a subscription confirmed, or a change."""
        if not isinstance(reply, list) or len(reply) != 3:
            return  # a PING's
        kind, channel, data = (p.decode() if isinstance(p, bytes) else str(p) for p in reply)
        if kind == "subscribe":
            future = self._confirm.pop(channel, None)
            if future is not None and not future.done():
                future.set_result(None)
            elif future is None and channel.endswith(EV_SUFFIX) and ":t:" in channel:
                # Subscribed again on a new connection (``_connect``): a change published while
                # there was none is lost. Each watcher is told its task may have changed, and
                # reads it again now, after this confirmation: a later change is a message.
                for watch in list(self._watches.get(channel, ())):
                    watch.push(channel.removesuffix(EV_SUFFIX))
        elif kind == "message":
            for watch in list(self._watches.get(channel, ())):
                watch.push(data)
