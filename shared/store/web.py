"""What the web tier holds of the store: one face per concern, all on one Redis client.

:class:`WebStore` bundles them, built by :func:`web_store` around the task face (tests: on a
client of their own) or by ``clients.open_web_store`` (a server: from ``Settings``). Only
``mcpq.frontend.task_service`` holds the task face; the others go to the part of the web tier whose
concern they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpq.shared.store.aio import AsyncTaskStore
from mcpq.shared.store.api_keys import ApiKeyLookup
from mcpq.shared.store.listing import TaskListing
from mcpq.shared.store.resource_events import ResourceEvents
from mcpq.shared.store.sessions import SessionStore
from mcpq.shared.store.stats import DeploymentStats


@dataclass(frozen=True)
class WebStore:
    #: Tasks: create, answer, cancel, read, watch (``TaskService``'s).
    tasks: AsyncTaskStore
    #: 2025-era sessions and the requests and calls in flight on them.
    sessions: SessionStore
    #: ``tasks/list`` (2025-11-25): a scope's tasks with their ids.
    listing: TaskListing
    #: The API key a request's token names.
    api_keys: ApiKeyLookup
    #: Worker heartbeats and the deployment's counters (``/readyz``, ``/metrics``).
    stats: DeploymentStats
    #: Resource subscriptions and updates, list changes (on the tasks' watch connection).
    events: ResourceEvents

    async def aclose(self) -> None:
        """Close the watch connection and the client they share (tests; a server just exits)."""
        await self.tasks.aclose()


def web_store(tasks: AsyncTaskStore) -> WebStore:
    """Every face of the web tier, on the client, key schema and payloads of ``tasks``."""
    io, keys, payloads = tasks.io, tasks.plans.keys, tasks.plans.payloads
    return WebStore(
        tasks=tasks,
        sessions=SessionStore(io, keys, tasks.plans, payloads),
        listing=TaskListing(io, keys, payloads),
        api_keys=ApiKeyLookup(io, keys),
        stats=DeploymentStats(io, keys),
        events=ResourceEvents(io, keys, tasks.plans, payloads, tasks.wakeups),
    )
