"""The Celery producer of the web tier. The web tier only publishes (the job contract is
``shared.jobs``): it never holds an ``AsyncResult`` and never reads Celery's result backend.

Two ways out for a run's message:

- **in the create** (a Redis broker, the default): :meth:`CeleryProducer.message` has Celery
  build the message exactly as it would send it, but a capturing kombu channel hands back what
  kombu's Redis transport would ``LPUSH`` instead of pushing it; the store pushes it in the
  script that creates the task. One round trip, and no task that exists unsent.
- **published** (other brokers, re-enqueues after answers, the sweeper): Celery's publishing is
  blocking, so it runs on a small thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol

from celery import Celery
from kombu import Producer as KombuProducer
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

from shared.celery_config import celery_config
from shared.jobs import Message, Run, send_run
from shared.settings import Settings

log = logging.getLogger("mcpq.web")


class Producer(Protocol):
    async def message(self, run: Run) -> Message | None:
        """The run's message for the store to push with the create, or ``None``: then the
        caller sends it with :meth:`enqueue`."""

    async def enqueue(self, run: Run) -> None: ...

    async def revoke(self, ref: str) -> None: ...


_captured = threading.local()


class _CapturingChannel(kombu_redis.Channel):
    """kombu's Redis channel, but the last step of a publish (``_put``: ``LPUSH`` of the
    serialized message onto the queue's list) hands the list and the message back instead."""

    def _put(self, queue: str, message: dict[str, Any], **_: Any) -> None:
        priority = self._get_message_priority(message, reverse=False)
        key = self._q_for_pri(queue, priority)  # type: ignore[attr-defined]  # (not in stubs)
        _captured.message = Message(key, dumps(message))


class CapturingTransport(kombu_redis.Transport):
    Channel = _CapturingChannel


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
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="celery-producer")
        self._capture: Celery | None = None
        self._capturer: KombuProducer | None = None
        self._opening = asyncio.Lock()
        redis_broker = settings.redis_url.startswith(("redis://", "rediss://", "unix://"))
        if redis_broker and not settings.task_events:
            # The broker is the store's Redis (``shared.celery_config``): messages may go out
            # with the create. (Not with MCPQ_TASK_EVENTS: its task-sent event is Celery's to
            # send, when it publishes.)
            self._capture = Celery("mcpq-web-capture")
            self._capture.conf.update(celery_config(settings))
            self._capture.conf.update(
                broker_transport=CapturingTransport, task_send_sent_event=False
            )

    def _open_capture(self) -> None:
        """The capturing channel (kombu connects and pings once when it opens one; never
        again: nothing is sent through it)."""
        assert self._capture is not None
        channel = self._capture.connection_for_write().default_channel
        self._capturer = KombuProducer(channel, auto_declare=False)

    async def message(self, run: Run) -> Message | None:
        if self._capture is None:
            return None
        try:
            if self._capturer is None:
                async with self._opening:  # its one blocking step, once, off the event loop
                    if self._capturer is None:
                        loop = asyncio.get_running_loop()
                        await loop.run_in_executor(self._pool, self._open_capture)
            _captured.message = None
            # No I/O from here: the channel exists, and declare=[] declares nothing through it
            # (workers declare their queues; a list is consumed whether declared or not).
            send_run(self._capture, run, producer=self._capturer, declare=[])
        except Exception as exc:  # Redis was down when the channel opened: publish instead
            log.warning("building the run message failed (%s)", type(exc).__name__)
            return None
        message: Message | None = _captured.message
        return message

    async def enqueue(self, run: Run) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, send_run, self._app, run)

    async def revoke(self, ref: str) -> None:
        revoke = partial(self._app.control.revoke, ref)
        await asyncio.get_running_loop().run_in_executor(self._pool, revoke)
