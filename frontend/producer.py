"""The Celery producer of the web tier. Celery's publishing is blocking, so it runs on a small
thread pool, never on the event loop. The web tier only publishes (the job contract is
``shared.jobs``): it never holds an ``AsyncResult`` and never reads Celery's result backend."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Protocol

from celery import Celery

from shared.celery_config import celery_config
from shared.jobs import Run, send_run
from shared.settings import Settings


class Producer(Protocol):
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

    async def enqueue(self, run: Run) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, send_run, self._app, run)

    async def revoke(self, ref: str) -> None:
        revoke = partial(self._app.control.revoke, ref)
        await asyncio.get_running_loop().run_in_executor(self._pool, revoke)
