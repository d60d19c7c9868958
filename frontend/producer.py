"""The Celery producer of the web tier. The web tier only publishes (the job contract is
``mcpq.shared.jobs``): it never holds an ``AsyncResult`` and never reads Celery's result backend.

Two ways out for a run's message:

- **in the create** (a Redis broker, the default): :meth:`CeleryProducer.message` builds the
  message exactly as Celery would send it (``mcpq.frontend.run_messages``), and the store pushes it
  in the script that creates the task. One round trip, and no task that exists unsent.
- **published** (other brokers, re-enqueues after answers, the sweeper): Celery's publishing is
  blocking, so it runs on a small thread pool, never on the event loop. On RabbitMQ every
  publish waits for the broker's confirm, bounded (``mcpq.shared.celery_config``): the caller marks
  the run enqueued only once the broker has it.

With a broker other than the store's Redis, the depth of its queues is the broker's to tell
(:func:`broker_queue_depths`: ``/metrics`` and ``mcpq status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol

from celery import Celery

from mcpq.frontend.run_messages import CapturingTransport, RunMessages
from mcpq.shared.celery_config import (
    CONFIRM_TIMEOUT_S,
    broker_is_amqp,
    broker_is_store,
    celery_config,
    publish_options,
)
from mcpq.shared.jobs import Message, Run, send_run
from mcpq.shared.settings import Settings

log = logging.getLogger("mcpq.web")

#: Publishing threads: on RabbitMQ each publish waits a round trip (and a disk write) for its
#: confirm, so a few more threads keep creates from queueing behind each other.
_PUBLISHERS = {False: 4, True: 8}


class Producer(Protocol):
    async def message(self, run: Run) -> Message | None:
        """The run's message for the store to push with the create, or ``None``: then the
        caller sends it with :meth:`enqueue`."""

    async def enqueue(self, run: Run) -> None: ...

    async def revoke(self, ref: str) -> None: ...


class CeleryProducer:
    def __init__(self, settings: Settings) -> None:
        self._app = Celery("mcpq-web")
        self._app.conf.update(celery_config(settings))
        # A few quick retries, then the caller gives up and leaves the run to the sweeper:
        # a request must not hang on a broker that is down.
        self._app.conf.task_publish_retry_policy = {
            "max_retries": 2,
            "interval_start": 0.1,
            "interval_step": 0.2,
            "interval_max": 0.5,
        }
        amqp = broker_is_amqp(settings)
        self._publish_options = publish_options(settings)
        self._pool = ThreadPoolExecutor(
            max_workers=_PUBLISHERS[amqp], thread_name_prefix="celery-producer"
        )
        self._messages: RunMessages | None = None
        self._opening = asyncio.Lock()
        if broker_is_store(settings) and not settings.task_events:
            # The broker is the store's Redis (``mcpq.shared.celery_config``): messages may go out
            # with the create. (Not with MCPQ_TASK_EVENTS: its task-sent event is Celery's to
            # send, when it publishes.)
            capture = Celery("mcpq-web-capture")
            capture.conf.update(celery_config(settings))
            capture.conf.update(broker_transport=CapturingTransport, task_send_sent_event=False)
            self._messages = RunMessages(capture)

    async def message(self, run: Run) -> Message | None:
        messages = self._messages
        if messages is None:
            return None
        try:
            if not messages.opened:
                async with self._opening:  # its one blocking step, once, off the event loop
                    if not messages.opened:
                        loop = asyncio.get_running_loop()
                        await loop.run_in_executor(self._pool, messages.open)
            return messages.build(run)  # no I/O
        except Exception as exc:  # Redis was down when the channel opened: publish instead
            log.warning("building the run message failed (%s)", type(exc).__name__)
            return None

    async def enqueue(self, run: Run) -> None:
        send = partial(send_run, self._app, run, **self._publish_options)
        await asyncio.get_running_loop().run_in_executor(self._pool, send)

    async def revoke(self, ref: str) -> None:
        # A broadcast on Celery's control exchange (Redis: pub/sub; RabbitMQ: the fanout
        # exchange ``celery.pidbox``): every worker adds the ref to its revoked set, so a
        # queued message is dropped when it arrives. The store already says ``cancelled``,
        # which a run that starts anyway sees at its claim.
        revoke = partial(self._app.control.revoke, ref)
        await asyncio.get_running_loop().run_in_executor(self._pool, revoke)

    async def queue_depths(self, queues: Sequence[str]) -> dict[str, int]:
        """The broker's count of runs waiting in each queue (see :func:`broker_queue_depths`)."""
        depths = partial(broker_queue_depths, self._app, queues)
        return await asyncio.get_running_loop().run_in_executor(self._pool, depths)


def broker_queue_depths(app: Celery, queues: Sequence[str]) -> dict[str, int]:
    """Messages ready in each queue, as the broker counts them (blocking), through a passive
    declare: it reads a queue and creates nothing. A queue no one declared yet holds nothing.
    Runs a worker took and has not acked are not counted (RabbitMQ's ``messages_ready``)."""
    depths: dict[str, int] = {}
    pool: Any = app.pool  # kombu's connection pool (its stubs type it as producers')
    with pool.acquire(block=True, timeout=CONFIRM_TIMEOUT_S) as conn:
        channel = conn.channel()
        try:
            for name in queues:
                try:
                    _, ready, _ = channel.queue_declare(queue=name, passive=True)
                except conn.channel_errors:
                    # No such queue: nothing waits in it. (RabbitMQ closes the channel.)
                    depths[name] = 0
                    with contextlib.suppress(Exception):
                        channel.close()
                    channel = conn.channel()
                    continue
                depths[name] = int(ready)
        finally:
            with contextlib.suppress(Exception):
                channel.close()
    return depths
