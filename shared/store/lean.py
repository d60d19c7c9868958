"""redis-py's asyncio pool and connection, without the costs a round trip of the web tier does
not need: what :mod:`shared.store.clients` builds the web tier's client from.

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

Both rely on redis-py's pool and connection attributes (``_available_connections``,
``_in_use_connections``, ``_condition``, ``_writer``...). :func:`lean_enabled` checks them on
first use and, should a redis-py release rename one, every call takes redis-py's own path:
slower, never wrong. A test fails then (``tests/integration/test_store_lean_pool.py``), so the
change is seen.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

_POOL_ATTRIBUTES = ("_available_connections", "_in_use_connections", "_condition")
_CONNECTION_ATTRIBUTES = ("_writer", "_reader", "health_check_interval", "next_health_check")


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


class LeanWrites:
    """Mixed in before a redis-py asyncio connection class (TCP, TLS, Unix socket,
    Sentinel-managed): commands packed by hiredis, and written without a task per write."""

    _packer = HiredisRespSerializer() if HIREDIS_AVAILABLE else None

    def pack_command(self, *args: Any) -> list[bytes]:
        # redis-py's synchronous connections pack with hiredis; its asyncio ones pack in
        # Python, about 30 µs for a create's forty arguments.
        if self._packer is None:
            packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
            return packed
        packed = self._packer.pack(*args)
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
