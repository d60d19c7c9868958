"""The worker's Celery consumer, with its broker reconnects bounded by ``MCPQ_BROKER_WAIT_S``.

Celery 5's consumer (re)connects in ``Consumer.ensure_connected``: kombu's
``ensure_connection`` with ``broker_connection_max_retries`` retries, waits growing by 2 s up
to 30 s. With ``None`` (mcpq's setting, which publishers share) it never gives up: a worker
whose broker is gone for good retries forever and its platform never restarts it. With a
number, exceeding it raises kombu's ``OperationalError``, which the consumer does not count as
recoverable: the worker logs "Unrecoverable error" with a traceback and stops *warm*, waiting
for every running tool; and a count of retries is a poor measure of time.

So this consumer connects with kombu's ``timeout`` (seconds, over all attempts) instead, waits
capped well below the deadline, and when the broker stays unreachable it logs one line (the
URL, password hidden; what to check) and raises ``WorkerTerminate``: a cold shutdown (the pool
stops at once; prefork children are terminated, the io pool hands its runs back) with the exit
status of ``ops.runtime.broker_wait``, 3. An outage shorter than the wait is ridden out as before:
the consumer reconnects and consumes again, and says so in a second line (the outage's end). It
is used for the first connection too (the broker may go away between ``mcpq worker``'s check and
Celery's start).

Installed by ``mcpq.workers.celery_app`` as Celery's ``worker_consumer``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol, runtime_checkable

from celery.exceptions import WorkerTerminate
from celery.worker.consumer import Consumer
from celery.worker.state import maybe_shutdown
from kombu.exceptions import OperationalError

from mcpq.shared.celery_config import broker_origin, connection_problem, unreachable
from mcpq.shared.redis_urls import redact_url
from mcpq.shared.settings import Settings
from mcpq.workers.event_loop_guard import EVENT_LOOP

log = logging.getLogger("mcpq.worker")

#: The worker's exit status when its broker stays unreachable: ``ops.runtime.broker_wait``'s
#: (workers do not import ops).
EXIT_UNREACHABLE = 3


def retry_intervals(wait_s: float) -> dict[str, float]:
    """kombu's waits between attempts: Celery's (2 s, growing by 2 s), capped at a tenth of the
    wait (at least 1 s, at most Celery's 30 s), so the worker gives up about ``wait_s`` after
    the first failure, not up to 30 s later."""
    cap = min(30.0, max(1.0, wait_s / 10))
    return {"interval_start": min(2.0, cap), "interval_step": min(2.0, cap), "interval_max": cap}


@runtime_checkable
class Configured(Protocol):
    """The consumer's Celery app, as the worker's is (``mcpq.workers.celery_app.WorkerApp``): it
    holds mcpq's settings. Looked up on the app Celery gives the consumer, which Celery builds
    from the app's configuration (``worker_consumer``), not from an import of ours."""

    settings: Settings


#: This process's consumer, once made (its pid with it: a forked pool process inherits the
#: reference, not the consumer's connection).
_consumer: tuple[int, Any] | None = None


def task_event_dispatcher() -> Any | None:
    """The consumer's event dispatcher, when it sends task events now (``-E``,
    ``MCPQ_TASK_EVENTS``, or Flower's ``enable_events``, which adds the ``task`` group); ``None``
    when it does not, or in a process with no consumer of its own (a prefork pool process)."""
    held = _consumer
    if held is None or held[0] != os.getpid():
        return None
    dispatcher = getattr(held[1], "event_dispatcher", None)
    if dispatcher is None or not dispatcher.enabled:
        return None
    groups = dispatcher.groups  # None: every group, as with task events on from the start
    return dispatcher if not groups or "task" in groups else None


def has_consumer() -> bool:
    """Whether this process runs the worker's consumer (an io pool's process does; a prefork
    pool process does not)."""
    return _consumer is not None and _consumer[0] == os.getpid()


class BoundedConsumer(Consumer):
    """Celery's consumer, with :meth:`ensure_connected` bounded in time, and without Gossip."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global _consumer
        super().__init__(*args, **kwargs)
        _consumer = (os.getpid(), self)

    # celery-types declares Consumer.Blueprint a variable, not the class it is.
    class Blueprint(Consumer.Blueprint):  # type: ignore[misc,valid-type]
        """Celery's consumer steps but Gossip, as ``--without-gossip`` would have them: mcpq's
        workers never read each other's events, and Celery's Gossip step fails to stop after a
        lost connection (it closes its channel on the connection Celery has just dropped:
        ``'NoneType' object has no attribute 'connection_errors'``), an error with a traceback
        at every broker outage."""

        default_steps = tuple(
            s for s in Consumer.Blueprint.default_steps if not s.endswith(":Gossip")
        )

    def connect(self) -> Any:
        conn = super().connect()
        if getattr(self, "hub", None) is not None:  # (untyped in the stubs)
            # The consumer's connection: its reconnects are its own (bounded here), while any
            # other connection on the loop gets one attempt (mcpq.workers.event_loop_guard).
            EVENT_LOOP.consumer(conn)
        return conn

    def ensure_connected(self, conn: Any) -> Any:
        app = self.app
        if not isinstance(app, Configured):
            raise TypeError("BoundedConsumer needs mcpq's Celery app (mcpq.workers.celery_app)")
        return self._ensure_within(conn, app.settings)

    def _ensure_within(self, conn: Any, settings: Settings) -> Any:
        wait_s = settings.broker_wait_s
        url, setting = broker_origin(settings)
        said = False
        lost = time.monotonic()

        def errback(exc: BaseException, interval: float) -> None:
            # One line per outage, not one per attempt.
            nonlocal said
            if not said:
                said = True
                log.warning(
                    "cannot reach the broker at %s (%s): trying again for up to %g s",
                    redact_url(url),
                    connection_problem(exc, url),
                    wait_s,
                )

        try:
            conn.ensure_connection(
                errback,
                # 0: give up at the first failure; kombu reads a timeout of 0 as "none".
                max_retries=0 if wait_s == 0 else None,
                timeout=wait_s or None,
                callback=maybe_shutdown,  # a SIGTERM while waiting still stops the worker
                **retry_intervals(wait_s),
            )
        except (OperationalError, *conn.recoverable_connection_errors) as exc:
            log.critical(
                "%s; stopping the worker", unreachable("the broker", url, setting, wait_s, exc)
            )
            # Celery's worker exits with its controller's exitcode (untyped in the stubs).
            if (controller := getattr(self, "controller", None)) is not None:
                controller.exitcode = EXIT_UNREACHABLE
            # Cold: a warm stop would wait for every running tool, with no broker to ack to.
            raise WorkerTerminate(EXIT_UNREACHABLE) from None
        if said:  # the outage's other end, so a reader of the log knows it is over
            log.warning(
                "reached the broker at %s again after %.0f s",
                redact_url(url),
                time.monotonic() - lost,
            )
        # Celery's bookkeeping after a connection (its own ensure_connected does the same).
        self.first_connection_attempt = False
        self.broker_connection_retry_attempt = 0
        return conn
