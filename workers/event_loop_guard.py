"""A worker's broker connections never hold its event loop in a reconnect loop: the guard both
of the workers' kombu transports (``mcpq.workers.redis_transport``,
``mcpq.workers.amqp_transport``) put on their reconnects.

On the loop's thread, a connection other than the consumer's that connected before gets one
attempt at reconnecting (:class:`EventLoopGuard`). Celery's worker heartbeat is published there,
every 2 s, with kombu's unbounded retry: a broker lost as a heartbeat went out kept the loop
retrying it until the broker came back, so the consumer never noticed the loss (nor gave up
after ``MCPQ_BROKER_WAIT_S``). Seen on Redis, then on RabbitMQ. Now that reconnect raises
:class:`BrokerLostOnEventLoop` after its one attempt, the heartbeat is buffered (Celery's
dispatcher keeps events while offline), and the loop goes on to read the closed sockets and
reconnect the consumer its own way (``mcpq.workers.broker_watch``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any


class BrokerLostOnEventLoop(Exception):
    """A connection lost the broker on the worker's event loop and could not reconnect at once.

    Not one of kombu's connection errors on purpose: kombu would retry those there, and for as long
    as the broker stays away when the caller set no bound (Celery's heartbeat sets none)."""


#: How long the other connections on the loop stop trying after one lost the broker, unless the
#: consumer reaches it again first (a connection lost alone, the consumer's still up, retries
#: after this).
QUIET_S = 30.0


class EventLoopGuard:
    """Where the worker's consumer runs its event loop, and which connections may reconnect there.

    Celery registers connections with the loop on the loop's thread: the consumer's at each
    (re)connect (``Consumer.connect``), and on RabbitMQ the event dispatcher's too (the loop reads
    its AMQP heartbeats). That thread and process are the loop's (:meth:`on_loop`, from the
    transport). Which connection is the consumer's is told apart by the consumer itself
    (:meth:`consumer`, from ``mcpq.workers.broker_watch``), not by the registration: on
    RabbitMQ the dispatcher's registration comes after the consumer's. On the loop's thread, a
    connection that connected before and is not the consumer's (the event dispatcher's, a pooled
    producer's) gets a single attempt per reconnect. The consumer's own reconnects are
    untouched: its connection after a loss is a new one (bounded by
    ``mcpq.workers.broker_watch``), and its current one reconnects with a bound of kombu's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: tuple[int, int] | None = None  # the loop's (pid, thread id)
        self._consumer: weakref.ref[Any] | None = None  # the consumer's kombu Connection
        self._connected: weakref.WeakSet[Any] = weakref.WeakSet()  # kombu Connections, once up
        #: Until when a single attempt fails at once, without trying (monotonic; 0: tries).
        self._quiet_until = 0.0

    def on_loop(self) -> None:
        """A connection was registered with the worker's event loop on this thread: the loop's."""
        with self._lock:
            self._loop = (os.getpid(), threading.get_ident())

    def consumer(self, connection: Any) -> None:
        """``connection`` (a kombu Connection) is the consumer's, the one that feeds the loop."""
        with self._lock:
            self._consumer = weakref.ref(connection)
            self._quiet_until = 0.0  # it has just reached the broker: the others may try again

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

    def establish(self, client: Any, connect: Callable[[], Any]) -> Any:
        """``connect()``, a transport's own ``establish_connection`` for ``client`` (the kombu
        Connection, which outlives the transport: kombu makes a new one for each reconnect);
        one attempt only where :meth:`single_attempt` says so.

        Once such an attempt has failed, the next ones fail at once, without trying, until the
        consumer has reached the broker again (or :data:`QUIET_S` has passed): an attempt at a
        broker that went silent blocks the loop for a whole connect timeout, and the heartbeat
        would make one every 2 s, leaving the loop too little time to notice the loss."""
        if client is None or not self.single_attempt(client):
            established = connect()
            if client is not None:
                self.connected(client)
            return established
        if time.monotonic() < self._quiet_until:
            raise BrokerLostOnEventLoop("the broker was lost on the worker's event loop")
        try:
            return connect()
        except client.recoverable_connection_errors as exc:
            self._quiet_until = time.monotonic() + QUIET_S
            raise BrokerLostOnEventLoop(
                f"lost the broker on the worker's event loop: {exc!r}"
            ) from exc


#: The process's guard (one event loop per worker process).
EVENT_LOOP = EventLoopGuard()


class GuardedReconnects:
    """A kombu transport's reconnects under :data:`EVENT_LOOP` (a mixin, first among the
    transport's bases): a connection registered with the event loop marks the loop's thread,
    and every connection's (re)connect goes through :meth:`EventLoopGuard.establish`."""

    client: Any  # the kombu Connection (kombu's Transport sets it)

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)  # type: ignore[misc]
        EVENT_LOOP.on_loop()

    def establish_connection(self) -> Any:
        return EVENT_LOOP.establish(self.client, super().establish_connection)  # type: ignore[misc]
