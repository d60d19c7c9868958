"""The web tier's side of what a deployment serves, changing: list changes and resource updates.

- **List changes.** A web process, as it starts (ASGI lifespan: :class:`ListingAnnouncer`),
  digests each list it serves (``tools``, ``prompts``, ``resources`` with the templates) and
  hands the digests to the store, which announces each list that differs from the one stored
  (``resource_events``): a replica restarted with one more tool module tells every listener,
  on every replica, once.
- **The messages** a notification stream reads from its watch (``res:<digest>``,
  ``list:<name>``, beside the task ids or refs a task watch gives): :func:`notice_of`; the
  notifications they become: :func:`list_changed`, :func:`resource_updated`.
- **One stream, several watches**: :func:`merged` (a listen stream's tasks and its resources; a
  GET stream's tasks and its session's notices).

NOTE: nothing here learns or logs a URI that no client of this process named.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from mcpq.frontend import replies
from mcpq.frontend.principal import Principal
from mcpq.frontend.replies import Message
from mcpq.frontend.streams import Changes
from mcpq.shared.errors import McpError
from mcpq.shared.registry import Registry
from mcpq.shared.store import ResourceEvents
from mcpq.shared.store.resource_events import LIST_MESSAGE, LIST_NAMES, RESOURCE_MESSAGE

log = logging.getLogger("mcpq.web")

#: How long one read of a merged watch's part waits before it looks again (its pump's slice).
PUMP_SLICE_S = 1.0
#: Messages queued for a merged watch at most; past it the oldest go (as ``AsyncWatch``).
MERGED_BOUND = 1024
#: The first pause before a start's announcement is tried again (the store was unreachable),
#: doubled each time up to the last.
RETRY_FIRST_S, RETRY_MOST_S = 0.5, 30.0


# -- list changes ---------------------------------------------------------------------------------
def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def listing_digests(registry: Registry) -> dict[str, str]:
    """A digest of each list as this process serves it: what a client would list (in order),
    and what a listing does not show but a client meets (a tool's task mode)."""
    tools = [{**tool.listing(), "mode": tool.mode} for tool in registry.tools.values()]
    prompts = [p.listing() for p in registry.prompts.values()]
    resources = {
        "resources": [r.listing() for r in registry.resources.values()],
        "templates": [t.listing() for t in registry.templates.values()],
    }
    return {"tools": _digest(tools), "prompts": _digest(prompts), "resources": _digest(resources)}


class ListingAnnouncer:
    """Falcon middleware that does one thing, at the process's start (ASGI lifespan): tell the
    store what this process serves, so that a changed list is announced to every listener.

    Before the process serves (a replica that answers has told), unless the store is not there
    yet: then in the background, tried again with a growing pause until the store answers,
    and the process serves meanwhile."""

    def __init__(self, events: ResourceEvents, registry: Registry) -> None:
        self._events, self._digests = events, listing_digests(registry)
        self._task: asyncio.Task[list[str]] | None = None

    async def process_startup(self, scope: Mapping[str, Any], event: Mapping[str, Any]) -> None:
        try:
            changed = await self._events.announce_lists(self._digests)
        except McpError:  # the store is unavailable (503): later
            log.warning("the served lists could not be compared yet: the store is away")
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self.announce(RETRY_FIRST_S), name="mcpq-lists")
            return
        except Exception:  # a notice is not worth a process that does not start
            log.exception("the served lists could not be compared")
            return
        self._told(changed)

    async def process_shutdown(self, scope: Mapping[str, Any], event: Mapping[str, Any]) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def announce(self, pause: float = 0.0) -> list[str]:
        """The lists that changed (announced), once the store has answered; first after
        ``pause``, then after longer and longer ones."""
        while True:
            if pause:
                await asyncio.sleep(pause)
            try:
                changed = await self._events.announce_lists(self._digests)
            except McpError:
                pause = min(max(pause * 2, RETRY_FIRST_S), RETRY_MOST_S)
                continue
            except Exception:
                log.exception("the served lists could not be compared")
                return []
            self._told(changed)
            return changed

    @staticmethod
    def _told(changed: list[str]) -> None:
        if changed:
            log.info("served lists changed: announced", extra={"lists": ",".join(changed)})


# -- the messages and the notifications they become ---------------------------------------------
@dataclass(frozen=True)
class Notice:
    """A message of a notices watch: a list changed (``kind`` ``list``, ``name`` the list), or
    a resource was updated (``res``, ``name`` its URI's digest)."""

    kind: str
    name: str


def notice_of(item: str) -> Notice | None:
    """The notice a watch's message is, or ``None`` for another kind (a task's id or ref:
    neither has a colon)."""
    if item.startswith(LIST_MESSAGE):
        name = item.removeprefix(LIST_MESSAGE)
        return Notice("list", name) if name in LIST_NAMES else None
    if item.startswith(RESOURCE_MESSAGE):
        return Notice("res", item.removeprefix(RESOURCE_MESSAGE))
    return None


def list_changed(name: str, meta: dict[str, Any] | None = None) -> Message:
    """``notifications/<name>/list_changed`` (on a listen stream, with its ``_meta``)."""
    return replies.notification(f"notifications/{name}/list_changed", _with_meta({}, meta))


def resource_updated(uri: str, meta: dict[str, Any] | None = None) -> Message:
    return replies.notification("notifications/resources/updated", _with_meta({"uri": uri}, meta))


def _with_meta(params: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any]:
    return {"_meta": meta, **params} if meta is not None else params


def may_read(registry: Registry, principal: Principal, uri: str) -> bool:
    """Whether ``principal`` may read the resource at ``uri`` now (at delivery, as at the
    subscribe: a token with fewer scopes may stream the same session)."""
    found = registry.find_resource(uri)
    return found is not None and not principal.missing(found[0].scopes)


# -- one stream, several watches ----------------------------------------------------------------
class _Merged:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue(MERGED_BOUND)

    def push(self, item: str) -> None:
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(item)

    async def next(self, timeout_s: float) -> str | None:
        if timeout_s <= 0:
            return None
        try:
            return await asyncio.wait_for(self.queue.get(), timeout_s)
        except TimeoutError:
            return None


@contextlib.asynccontextmanager
async def merged(*parts: AbstractAsyncContextManager[Changes]) -> AsyncIterator[Changes]:
    """The changes of every part as one watch. Every part is entered (its subscriptions
    confirmed) before the caller goes on: the order a stream needs (subscribe, then read).

    One pump per part moves its changes to the merged queue, so no read of a part is ever cut
    short (a cancelled read could drop the change it had just taken); pumps stop only with the
    stream."""
    if len(parts) == 1:
        async with parts[0] as only:
            yield only
        return
    async with contextlib.AsyncExitStack() as stack:
        watches = [await stack.enter_async_context(part) for part in parts]
        out = _Merged()

        async def pump(watch: Changes) -> None:
            while True:
                item = await watch.next(PUMP_SLICE_S)
                if item is not None:
                    out.push(item)

        loop = asyncio.get_running_loop()
        pumps = [loop.create_task(pump(watch), name="mcpq-merge") for watch in watches]
        try:
            yield out
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
