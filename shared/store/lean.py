"""redis-py's pools and asyncio connection, without the costs a round trip does not need: what
:mod:`mcpq.shared.store.clients` builds the web tier's client, and the workers' pool, from.

Every request of the web tier makes one or two Redis round trips, and on a process that serves
a request now and then (the usual case) redis-py's own layers cost more than the round trip:
measured on a 2-core VM with 2 ms pauses between calls, a bare asyncio round trip (``PING``)
took 98-120 µs; through a pooled redis-py connection it took 308 µs, of which the pool's
checkout and release (a condition and its lock, a timeout, observability hooks, an event
dispatch: eight awaits that do nothing here) were about 105-120 µs and the send (every write
wrapped in ``asyncio.wait_for``, which makes a task and a loop pass of it) about 60-75 µs.

Both fast paths are the slow path's own steps, minus what cannot matter at that moment, and
they step aside whenever it might:

- :class:`LeanPool` hands out an idle connection and takes one back without the condition when
  nobody is waiting for one, the only case where the condition does anything; a connection is
  still checked as redis-py checks it (``ensure_connection``), and one that must reconnect
  still does. While anyone waits, or while a maintenance notification rewrites the pool,
  redis-py's own path runs.
- :class:`LeanWrites` writes a command straight into the transport when its health check
  is not due: a write never blocks, so the timeout only ever applied to waiting for the buffer
  to drain, which is still waited for, bounded, when the socket did not take it all.

The workers' synchronous pool has the same kind of cost: every claim, finish, report and
renewal checks a connection out and back in, and redis-py's ``BlockingConnectionPool`` does
that with its observability bookkeeping (four counter updates, two clock reads and a wait-time
record per round trip, whether or not anything collects them) around a queue that is already
thread-safe. Measured on the same VM from a worker-like thread after 2 ms pauses: checkout and
release took 54-104 µs that way, against 47-57 µs for the same queue operations plus the check
of the connection. Sampled in a worker running no-op tools, redis-py's checkout and release
held the GIL about 8% of the time its threads did; this path, about 5%. :class:`LeanSyncPool`
takes an idle connection off the queue and puts it back directly, checking what redis-py checks
of a connection it hands out (connected, and no unread reply), and steps aside whenever
anything else might happen: the
queue is empty (then redis-py waits for one, bounded by the pool's timeout), a slot has no
connection yet (redis-py makes it), the process forked, a maintenance notification rewrites
the pool, or the connection is not the pool's own.

The workers' synchronous connections pack commands with :class:`LeanPacker`: hiredis directly,
as :class:`LeanWrites` does for the web's, without redis-py's pass over every argument (a
renewal round of 10,000 runs is 30,000 of them).

All rely on redis-py's pool and connection attributes (``_available_connections``,
``_in_use_connections``, ``_condition``, ``_writer``, the blocking pool's ``pool`` queue...).
:func:`lean_enabled` and :func:`lean_sync_enabled` check them on first use and, should a
redis-py release rename one, every call takes redis-py's own path: slower, never wrong. A test
fails then (``tests/integration/test_store_lean_pool.py``), so the change is seen.
"""

from __future__ import annotations

import asyncio
import functools
import os
import queue
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.utils import HIREDIS_AVAILABLE

_pack: Callable[..., bytes] | None = None
if HIREDIS_AVAILABLE:  # (a locked dependency: always, unless removed)
    from hiredis import pack_command as _pack

_POOL_ATTRIBUTES = ("_available_connections", "_in_use_connections", "_condition")
_CONNECTION_ATTRIBUTES = ("_writer", "_reader", "health_check_interval", "next_health_check")
_SYNC_POOL_ATTRIBUTES = (
    "pool",
    "pid",
    "cache",
    "_in_maintenance",
    "owns_connection",
)
_SYNC_CONNECTION_ATTRIBUTES = ("_sock", "can_read", "should_reconnect", "disconnect")


@functools.cache
def lean_enabled() -> bool:
    """Whether this redis-py has what the fast paths use (else they always step aside)."""
    pool = aioredis.BlockingConnectionPool(max_connections=1)
    connection = aioredis.Connection()
    return (
        all(hasattr(pool, name) for name in _POOL_ATTRIBUTES)
        and hasattr(pool._condition, "_waiters")  # asyncio.Condition's own (CPython 3.8+)
        and all(hasattr(connection, name) for name in _CONNECTION_ATTRIBUTES)
        and hasattr(connection, "re_auth")
    )


def _fast_pack(args: tuple[Any, ...]) -> list[bytes] | None:
    """``args`` packed by hiredis as they are, or ``None``: a command named in more than one
    word, an argument hiredis does not take (redis-py's way then, and its error)."""
    if _pack is not None and isinstance(args[0], str) and " " not in args[0]:
        try:
            return [_pack(args)]
        except TypeError:
            pass
    return None


class LeanWrites:
    """Mixed in before a redis-py asyncio connection class (TCP, TLS, Unix socket,
    Sentinel-managed): commands packed by hiredis, and written without a task per write."""

    def pack_command(self, *args: Any) -> list[bytes]:
        # redis-py's synchronous connections pack with hiredis; its asyncio ones pack in
        # Python, about 30 µs for a create's forty arguments. A command named in one word
        # (every one the store sends) of str, bytes and numbers goes to hiredis as it is;
        # redis-py's own serializer first rebuilds the tuple for what hiredis cannot take
        # (a memoryview, "SCRIPT LOAD" in one string), 6 µs more per command.
        if (fast := _fast_pack(args)) is not None:
            return fast
        packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
        return packed

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        conn: Any = self
        writer = conn._writer if lean_enabled() else None
        if (
            writer is None
            or conn._reader is None
            or not isinstance(command, list)
            or writer.transport.is_closing()
            or (
                check_health
                and conn.health_check_interval
                and asyncio.get_running_loop().time() > conn.next_health_check
            )
        ):
            # Not connected, a PING due, or a socket on its way out: redis-py's own path
            # (it connects, pings, and turns a dead socket into its ConnectionError).
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
            return
        # NOTE: the write never blocks: the transport sends what the socket takes and buffers
        # the rest. Only waiting for that rest is bounded by the socket timeout, as redis-py
        # bounds it; a socket that fails later fails the read that follows, as before.
        try:
            writer.writelines(command)
            if writer.transport.get_write_buffer_size():
                if conn.socket_timeout:
                    await asyncio.wait_for(writer.drain(), conn.socket_timeout)
                else:
                    await writer.drain()
        except TimeoutError:
            await _drop(conn, writer)
            raise rexc.TimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await _drop(conn, writer)
            raise rexc.ConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            await _drop(conn, writer)
            raise


async def _drop(conn: Any, writer: asyncio.StreamWriter) -> None:
    """A write cut short leaves a command half sent: the connection cannot be used again, and
    what is still buffered is thrown away (a close would go on sending it to Redis)."""
    writer.transport.abort()
    await conn.disconnect(nowait=True)


class LeanPool:
    """Mixed in before :class:`redis.asyncio.BlockingConnectionPool` (or Sentinel's flavour):
    checkout and release without the condition while nobody waits for a connection."""

    def _lean_now(self) -> bool:
        pool: Any = self
        # NOTE: nobody waiting is what makes skipping the condition safe: a release notifies
        # only waiters, and a checkout that finds an idle connection waits for nothing. The
        # pool's lists change below with no await in between, so under asyncio no other
        # checkout or release can interleave.
        return (
            lean_enabled()
            and not getattr(pool, "_in_maintenance", False)
            and not pool._condition._waiters
        )

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        pool: Any = self
        if args or kwargs or not self._lean_now() or not pool._available_connections:
            return await super().get_connection(*args, **kwargs)  # type: ignore[misc]
        connection = pool._available_connections.pop()
        pool._in_use_connections.add(connection)
        try:
            # redis-py's own check of a connection it hands out (connected; see its
            # ensure_connection for when it also refuses one with unread data).
            await pool.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: Any) -> None:
        pool: Any = self
        if not self._lean_now() or connection not in pool._in_use_connections:
            await super().release(connection)  # type: ignore[misc]
            return
        pool._in_use_connections.remove(connection)
        if connection.should_reconnect():
            await connection.disconnect()
        pool._available_connections.append(connection)
        # What redis-py's release event does by default (its only listener): a connection
        # whose credentials were renewed while it was out authenticates again.
        await connection.re_auth()


def lean_connections(pool: aioredis.ConnectionPool) -> aioredis.ConnectionPool:
    """``pool``'s connections, whatever their kind (TCP, TLS, Unix socket, Sentinel-managed),
    with :class:`LeanWrites`'s fast path."""
    kind = pool.connection_class
    if not issubclass(kind, LeanWrites):
        pool.connection_class = type(f"Lean{kind.__name__}", (LeanWrites, kind), {})
    return pool


class LeanPacker:
    """A synchronous connection's command packer (redis-py's ``command_packer``): a command named
    in one word, of str, bytes and numbers (every one the store sends), goes to hiredis as it is.
    redis-py's own hiredis packer first rebuilds the tuple of arguments, testing each one's
    type: a renewal round of 10,000 runs sends 30,000 arguments, and that pass was about a
    tenth of the lease keeper's time. Anything else takes redis-py's way, and its errors."""

    def __init__(self) -> None:
        self._other = redis.connection.HiredisRespSerializer()

    def pack(self, *args: Any) -> list[bytes]:
        if (fast := _fast_pack(args)) is not None:
            return fast
        packed: list[bytes] = self._other.pack(*args)
        return packed


def sync_packer() -> dict[str, Any]:
    """The connection option that packs with :class:`LeanPacker` (none without hiredis: then
    redis-py packs in Python, as it would anyway)."""
    return {"command_packer": LeanPacker()} if _pack is not None else {}


@functools.cache
def lean_sync_enabled() -> bool:
    """Whether this redis-py's blocking pool has what :class:`LeanSyncPool` uses."""
    pool = redis.BlockingConnectionPool(max_connections=1)  # type: ignore[no-untyped-call]
    connection = redis.Connection()  # type: ignore[no-untyped-call]
    return (
        all(hasattr(pool, name) for name in _SYNC_POOL_ATTRIBUTES)
        and isinstance(pool.pool, queue.LifoQueue)
        and all(hasattr(connection, name) for name in _SYNC_CONNECTION_ATTRIBUTES)
    )


class LeanSyncPool:
    """Mixed in before :class:`redis.BlockingConnectionPool` (or Sentinel's flavour): an idle
    connection out and back without redis-py's per-checkout bookkeeping.

    NOTE: thread-safe because the pool's queue is (a ``LifoQueue``): each connection is in the
    queue or with exactly one thread, as with redis-py's own path. A connection checked out here
    is released here too unless the pool changed meanwhile (a fork, a maintenance notification);
    redis-py's release then only counts it back into its idle/used gauges, which nothing here
    reads."""

    def _lean_now(self) -> bool:
        pool: Any = self
        return lean_sync_enabled() and pool.pid == os.getpid() and not pool._in_maintenance

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        pool: Any = self
        if args or kwargs or not self._lean_now():
            return super().get_connection(*args, **kwargs)  # type: ignore[misc]
        try:
            connection = pool.pool.get_nowait()
        except queue.Empty:  # all out: redis-py waits for one, up to the pool's timeout
            return super().get_connection()  # type: ignore[misc]
        if connection is None:
            # A slot with no connection yet: redis-py makes one (and counts it). The slot goes
            # back first; another thread may take it meanwhile, and then this one gets the next.
            pool.pool.put_nowait(None)
            return super().get_connection()  # type: ignore[misc]
        if connection._sock is None:
            # To be connected (first use, or dropped after an error): redis-py's own path,
            # which connects it, once (the LIFO hands it back out next).
            pool.pool.put_nowait(connection)
            return super().get_connection()  # type: ignore[misc]
        try:
            # redis-py's own check of a connection it hands out: no unread reply left by a
            # command cut short (an io pool raises TaskCancelled into a thread that ignored its
            # cancel, wherever it is). Without the maintenance-notification exemption redis-py
            # makes: our clients turn those off (NO_MAINT_NOTIFICATIONS in clients.py), and on
            # RESP2 no push message can be pending, so data here is always a stale reply.
            if connection.can_read() and pool.cache is None:
                raise redis.ConnectionError("Connection has data")
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            # Not fit to hand out: dropped, and redis-py's own path connects it again.
            connection.disconnect()
            pool.pool.put_nowait(connection)
            return super().get_connection()  # type: ignore[misc]
        except BaseException:
            pool.pool.put_nowait(connection)
            raise
        return connection

    def release(self, connection: Any) -> None:
        pool: Any = self
        # (owns_connection: this process's, and for Sentinel, a connection to the current
        # primary; any other goes through redis-py's release, which drops it.)
        if not self._lean_now() or not pool.owns_connection(connection):
            super().release(connection)  # type: ignore[misc]
            return
        if connection.should_reconnect():
            connection.disconnect()
        # Never full: the connection came out of this queue (each slot is in it or out).
        pool.pool.put_nowait(connection)
