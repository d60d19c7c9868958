"""The Celery producer of the web tier. Celery's publishing is blocking, so it runs on a small
thread pool, never on the event loop. The web tier only publishes: it never holds an
``AsyncResult`` and never reads Celery's result backend."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Protocol

from celery import Celery

from shared.celery_config import celery_config
from shared.settings import Settings

log = logging.getLogger("mcpq.web")


class Producer(Protocol):
    async def enqueue(self, tool: str, ref: str, queue: str, request_id: str = "") -> None: ...

    async def revoke(self, ref: str) -> None: ...


class CeleryProducer:
    def __init__(self, settings: Settings) -> None:
        self._app = Celery("mcpq-web")
        self._app.conf.update(celery_config(settings))
        self._app.conf.task_publish_retry_policy = {
            "max_retries": 2,
            "interval_start": 0.1,
            "interval_step": 0.2,
            "interval_max": 0.5,
        }
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="celery-producer")

    async def enqueue(self, tool: str, ref: str, queue: str, request_id: str = "") -> None:
        send = partial(
            self._app.send_task,
            tool,
            args=[ref],
            task_id=ref,
            queue=queue,
            headers={"mcpq_request_id": request_id},
        )
        await asyncio.get_running_loop().run_in_executor(self._pool, send)

    async def revoke(self, ref: str) -> None:
        revoke = partial(self._app.control.revoke, ref)
        await asyncio.get_running_loop().run_in_executor(self._pool, revoke)
