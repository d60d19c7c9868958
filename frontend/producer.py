"""The Celery producer of the web tier. The web tier only publishes (the job contract is
``shared.jobs``): it never holds an ``AsyncResult`` and never reads Celery's result backend.

Two ways out for a run's message:

- **in the create** (a Redis broker, the default): :meth:`CeleryProducer.message` builds the
  message exactly as Celery would send it (``frontend.run_messages``), and the store pushes it
  in the script that creates the task. One round trip, and no task that exists unsent.
- **published** (other brokers, re-enqueues after answers, the sweeper): Celery's publishing is
  blocking, so it runs on a small thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Protocol

from celery import Celery

from frontend.run_messages import CapturingTransport, RunMessages
from shared.celery_config import broker_is_store, celery_config
from shared.jobs import Message, Run, send_run
from shared.settings import Settings

log = logging.getLogger("mcpq.web")


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
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="celery-producer")
        self._messages: RunMessages | None = None
        self._opening = asyncio.Lock()
        if broker_is_store(settings) and not settings.task_events:
            # The broker is the store's Redis (``shared.celery_config``): messages may go out
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
        await asyncio.get_running_loop().run_in_executor(self._pool, send_run, self._app, run)

    async def revoke(self, ref: str) -> None:
        revoke = partial(self._app.control.revoke, ref)
        await asyncio.get_running_loop().run_in_executor(self._pool, revoke)
