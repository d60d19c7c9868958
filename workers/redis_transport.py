"""The workers' kombu transport on a Redis broker: kombu's own, without its Redis-side ack
emulation, because the task store already does what that emulation is for.

kombu's Redis transport emulates acks: every message a worker takes is written to an
``unacked`` hash and index (``MULTI ZADD HSET EXEC``) and deleted again on ack (``MULTI ZREM
HDEL EXEC``), so that a message held by a worker that dies is restored after the visibility
timeout. That is eight commands per run, for a recovery mcpq never uses: the visibility
timeout is a week (``mcpq.shared.celery_config``), and a task's run is recovered by the store
instead: the task stays on the store's unclaimed watch list until a run claims it (the
sweeper sends its message again otherwise), and once claimed its lease covers it.

So this transport keeps the taken messages in memory only, which is all Celery's flow control
(prefetch) needs, and pushes one back onto its queue itself when it must go back: rejected with
requeue (a prefork child died, ``task_reject_on_worker_lost``) or still unstarted when the
worker shuts down. A worker killed outright loses the messages it held; their tasks are sent
again by the sweeper (``MCPQ_REQUEUE_UNSTARTED_S`` after their last send), or resume from
their lease.

A connection of this transport never holds the worker's event loop in a reconnect loop
(:class:`EventLoopGuard`): on the loop's thread, a connection other than the consumer's that
connected before gets one attempt at reconnecting. Celery's worker heartbeat is published there
with kombu's unbounded retry; a broker lost as a heartbeat went out kept the loop retrying it until
the broker came back, so the consumer never noticed the loss (nor gave up after
``MCPQ_BROKER_WAIT_S``). Now the heartbeat is buffered (Celery's dispatcher keeps events while
offline), and the loop goes on to read the closed sockets and reconnect the consumer its own way.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual


class BrokerLostOnEventLoop(Exception):
    """A connection lost the broker on the worker's event loop and could not reconnect at once.

    Not one of kombu's connection errors on purpose: kombu would retry those there, and for as long
    as the broker stays away when the caller set no bound (Celery's heartbeat sets none)."""


class EventLoopGuard:
    """Where the worker's consumer runs its event loop, and which connections may reconnect there.

    Celery registers the consumer's connection with the loop (``Consumer.connect``, on the loop's
    thread, at each (re)connect): that thread and process are the loop's. On them, a connection
    that connected before and is not the consumer's (the event dispatcher's, a pooled producer's)
    gets a single attempt per reconnect. The consumer's own reconnects are untouched: its
    connection after a loss is a new one (bounded by ``mcpq.workers.broker_watch``), and its
    current one reconnects with a bound of kombu's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: tuple[int, int] | None = None  # the loop's (pid, thread id)
        self._consumer: weakref.ref[Any] | None = None  # the consumer's kombu Connection
        self._connected: weakref.WeakSet[Any] = weakref.WeakSet()  # kombu Connections, once up

    def register(self, consumer: Any) -> None:
        """``consumer`` (a kombu Connection) feeds the event loop that runs on this thread."""
        with self._lock:
            self._loop = (os.getpid(), threading.get_ident())
            self._consumer = weakref.ref(consumer)

    def connected(self, client: Any) -> None:
        with self._lock:
            self._connected.add(client)

    def single_attempt(self, client: Any) -> bool:
        """Whether a reconnect of ``client`` (a kombu Connection) gets one attempt only: it
        connected before, it is not the consumer's, and this is the loop's thread."""
        with self._lock:
            consumer = self._consumer() if self._consumer is not None else None
            return (
                self._loop == (os.getpid(), threading.get_ident())
                and client is not consumer
                and client in self._connected
            )


#: The process's guard (one event loop per worker process).
EVENT_LOOP = EventLoopGuard()


class MemoryQoS(kombu_redis.QoS):
    """Prefetch accounting in memory (kombu's generic QoS), nothing in Redis."""

    def append(self, message: Any, delivery_tag: str) -> None:
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # With requeue: back at the head of its queue (the generic QoS calls the channel's
        # _restore_at_beginning, below), then forgotten.
        virtual.QoS.reject(self, delivery_tag, requeue=requeue)

    def restore_unacked(self, client: Any = None) -> None:
        # At shutdown: every message taken and not acked goes back (the channel's _restore).
        virtual.QoS.restore_unacked(self)

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        """Nothing is ever in kombu's unacked set (its periodic scan would only cost commands)."""


class Channel(kombu_redis.Channel):
    QoS = MemoryQoS

    def _restore(self, message: Any, leftmost: bool = False) -> None:
        """Push a taken message back onto its queue, from memory (kombu's own reads it from
        the unacked hash this transport never writes)."""
        info = message.delivery_info
        with self.conn_or_acquire() as client:
            pipe = client.pipeline()
            self._do_restore_message(  # type: ignore[attr-defined]  # (not in stubs)
                message._raw, info["exchange"], info["routing_key"], pipe, leftmost
            )
            pipe.execute()


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The same channel on a Redis reached through Sentinel: kombu's ``SentinelChannel`` finds
    the primary (and finds it again after a failover); acks stay in memory as above."""


class Transport(kombu_redis.Transport):
    Channel = Channel

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # Through Sentinel when the broker options name the service (``mcpq.shared.celery_config``
        # sets ``master_name`` for a ``redis+sentinel://`` URL): one transport name for the
        # workers either way, as kombu's ``SentinelTransport`` differs only in its channel.
        if (client.transport_options or {}).get("master_name"):
            self.Channel = SentinelChannel
            self.default_port = kombu_redis.SentinelTransport.default_port

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        EVENT_LOOP.register(self.client)

    def establish_connection(self) -> Any:
        """kombu's, but a reconnect the event loop would wait out gets one attempt
        (:class:`EventLoopGuard`); ``self.client`` is the kombu Connection, which outlives the
        transport (kombu makes a new one for each reconnect)."""
        client = self.client
        if client is None or not EVENT_LOOP.single_attempt(client):
            established = super().establish_connection()
            if client is not None:
                EVENT_LOOP.connected(client)
            return established
        try:
            return super().establish_connection()
        except client.recoverable_connection_errors as exc:
            raise BrokerLostOnEventLoop(
                f"lost the broker on the worker's event loop: {exc!r}"
            ) from exc


#: Celery's ``broker_transport`` for this transport.
TRANSPORT = f"{__name__}:Transport"
