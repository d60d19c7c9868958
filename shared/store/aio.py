"""The task store, asyncio flavour: a task's operations of the web tier (``redis.asyncio``).

Create, answer, cancel, read (``tasks/get``, one round trip) and the enqueue mark are the plans
of ``task_plans``, the same steps the synchronous store takes, run on this store's driver
(``async_driver``); watching tasks change (pub/sub, ``wakeups``) is this store's own. The web
tier's other concerns have faces of their own on the same client (``web``): sessions,
``tasks/list``, API keys, the deployment's numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis.asyncio as aioredis

from mcpq.shared.store import client_calls
from mcpq.shared.store.async_driver import AsyncDriver
from mcpq.shared.store.async_wakeups import AsyncWakeups, AsyncWatch
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.payloads import PLAIN, Payloads
from mcpq.shared.store.plans import Plan
from mcpq.shared.store.tally import StatsTally
from mcpq.shared.store.task_plans import TaskPlans

P = ParamSpec("P")
T = TypeVar("T")


def awaited(
    plan: Callable[Concatenate[TaskPlans, P], Plan[T]],
) -> Callable[Concatenate[AsyncTaskStore, P], Coroutine[Any, Any, T]]:
    """A method of :class:`AsyncTaskStore` that runs ``plan`` on its driver: same parameters,
    same documentation, its result awaited."""

    @functools.wraps(plan)
    async def method(store: AsyncTaskStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await store.io.drive(plan(store.plans, *args, **kwargs))

    return method


class AsyncTaskStore:
    # -- the client's side of a task: the steps both stores take (task_plans), awaited --------
    create = awaited(TaskPlans.create)
    mark_enqueued = awaited(TaskPlans.mark_enqueued)
    answer = awaited(TaskPlans.answer)
    cancel = awaited(TaskPlans.cancel)
    get = awaited(TaskPlans.get)
    logs = awaited(TaskPlans.logs)
    #: Redis's time (``mcpq.shared.store.clock``).
    now_ms = awaited(TaskPlans.now_ms)

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys | None = None,
        *,
        payloads: Payloads = PLAIN,
        tally: StatsTally | None = None,
        min_replicas: int = 0,
        replica_wait_ms: int = 1000,
    ) -> None:
        #: Its driver: the client, and how each op of a plan is done on it (the web tier's
        #: other faces share it: ``mcpq.shared.store.web``).
        self.io = AsyncDriver(client)
        self._keys = keys or Keys()
        #: The steps this store shares with the synchronous one (and its clock: ``now_ms``).
        self.plans = TaskPlans(
            self._keys,
            payloads,
            tally=tally,
            min_replicas=min_replicas,
            replica_wait_ms=replica_wait_ms,
        )
        self._wakeups = AsyncWakeups(client, self._keys)

    @property
    def wakeups(self) -> AsyncWakeups:
        """The process's one watch connection, which the web's other watches share
        (``resource_events``, through ``web``)."""
        return self._wakeups

    async def aclose(self) -> None:
        """Close the shared watch connection and the client (tests; a server just exits)."""
        await self._wakeups.aclose()
        await self.io.client.aclose()

    # -- push: the changes the scripts publish ---------------------------------------------------
    @contextlib.asynccontextmanager
    async def watch(
        self, refs: Sequence[str] = (), scopes: Sequence[str] = (), *, mark: bool = True
    ) -> AsyncIterator[AsyncWatch]:
        """Subscribe to the changes of tasks ``refs`` and of the tasks of listing ``scopes``.

        NOTE: subscribe first, read the task second: the scripts publish in the same step as the
        change, so nothing falls between the read and the first message (see ``publish`` in
        ``lua/_prelude.lua``). Messages published while the watch connection is down are lost:
        once it is back, each watcher of a task is told to read it again
        (``mcpq.shared.store.async_wakeups``).

        A task's changes are published only once it is marked watched: here, after subscribing
        (``mark``), or by the caller's first read (``get(..., watching=True)``, no round trip
        of its own: ``mark=False``). A task that ends is not marked (nothing more to push).
        """
        channels = [self._keys.events(ref) for ref in refs]
        channels += [self._keys.listing_events(scope) for scope in scopes]
        # Every watch of this process shares one connection (mcpq.shared.store.wakeups): a thousand
        # waiting synchronous calls hold one Redis connection, not a thousand.
        async with self._wakeups.watch(channels) as watch:
            if mark and refs:
                # After the subscription is in place (the order the NOTE above needs).
                marks = client_calls.mark_watched(self._keys, refs)
                await asyncio.gather(*(self.io.drive(self.plans.run(call)) for call in marks))
            yield watch
