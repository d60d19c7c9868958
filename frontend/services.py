"""The dependencies of the method handlers, built once by ``create_app`` (the composition root)."""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar
from dataclasses import dataclass

from frontend.producer import Producer
from shared.async_store import AsyncTaskStore
from shared.request_state import RequestStateSigner
from shared.settings import Settings
from shared.tools import Registry

log = logging.getLogger("mcpq.web")

#: The id of the MCP request being served; it travels with the Celery message to the worker.
REQUEST_ID: ContextVar[str] = ContextVar("mcpq_request_id", default="")
#: Set once the client of the request being served has gone away (if the server tells us).
DISCONNECTED: ContextVar[asyncio.Event | None] = ContextVar("mcpq_disconnected", default=None)


@dataclass
class Services:
    settings: Settings
    store: AsyncTaskStore
    producer: Producer
    registry: Registry
    signer: RequestStateSigner

    async def enqueue(self, tool: str, ref: str, queue: str) -> None:
        """Publish a run, then give it ``MCPQ_REQUEUE_UNSTARTED_S`` on the unclaimed watch list
        to be started. If publishing fails the task keeps its short deadline there and the
        workers' sweeper enqueues it."""
        try:
            await self.producer.enqueue(tool, ref, queue, REQUEST_ID.get())
        except Exception as exc:  # the broker is down; recovery is the sweeper's job
            log.warning("enqueue failed (%s); the sweeper will retry", type(exc).__name__)
            return
        await self.store.mark_enqueued(ref, int(self.settings.requeue_unstarted_s * 1000))

    def principal(self) -> str:
        """Who is calling. Authentication is not configured yet: everyone is anonymous."""
        return "anonymous"
