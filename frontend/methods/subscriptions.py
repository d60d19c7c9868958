"""``subscriptions/listen``: the 2026-07-28 notification stream, with the filter the client opts
in to (``params.notifications``, every field optional, nothing sent that was not asked for):

- ``taskIds`` (the Tasks extension's): ``notifications/tasks`` per change of those tasks, the
  full task as ``tasks/get`` shows it, without ``resultType``; only the caller's tasks (others
  are left out exactly as unknown ones, so an id reveals nothing);
- ``toolsListChanged``, ``promptsListChanged``, ``resourcesListChanged``:
  ``notifications/<list>/list_changed`` when that list changes (a replica starts serving
  another one: ``mcpq.frontend.notices``), whichever replica holds the stream;
- ``resourceSubscriptions``: ``notifications/resources/updated {uri}`` when
  ``app.resource_updated(uri)`` announces one of those URIs. Each is checked as a read of it
  would be (-32602 with ``data.uri`` for a URI nothing serves, 403 for a resource whose scopes
  the caller lacks), before the stream starts.

The stream opens with ``notifications/subscriptions/acknowledged`` naming what it honours (the
subset of the filter), then the notifications, each with ``_meta.subscriptionId`` (the listen
request's id). A subscription is the stream's own: nothing of it is stored, and nothing of one
client's reaches another's stream.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from mcpq.frontend import params, replies
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.methods.subscribe import readable
from mcpq.frontend.notices import list_changed, merged, notice_of, resource_updated
from mcpq.frontend.services import DISCONNECTED, Services
from mcpq.frontend.streams import Changes, StreamReply, watch_stream
from mcpq.shared.errors import (
    INVALID_PARAMS,
    McpError,
    TaskNotFound,
    invalid_params,
    missing_tasks_capability,
)
from mcpq.shared.protocol import META_SUBSCRIPTION_ID
from mcpq.shared.store.resource_events import uri_digest
from mcpq.shared.wire import Task

#: The filter's list flags, by the list they name.
LIST_FLAGS = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
#: The most resources one listen stream may name.
MAX_LISTEN_RESOURCES = 100


@dataclass(frozen=True)
class ListenFilter:
    """What a listen request opts in to (``None``: that field was not given)."""

    task_ids: list[str] | None
    lists: tuple[str, ...]
    resources: list[str] | None

    def acknowledged(self, accepted: list[str]) -> dict[str, Any]:
        """The subset honoured: every field asked for, ``taskIds`` as far as they are the
        caller's (``accepted``)."""
        honoured: dict[str, Any] = {}
        if self.task_ids is not None:
            honoured["taskIds"] = accepted
        for name in self.lists:
            honoured[LIST_FLAGS[name]] = True
        if self.resources is not None:
            honoured["resourceSubscriptions"] = self.resources
        return honoured


def listen_filter(rpc: RpcRequest) -> ListenFilter:
    """``params.notifications``, each field checked (-32602 naming it)."""
    notifications = rpc.params.get("notifications")
    if notifications is None:
        notifications = {}
    if not isinstance(notifications, dict):
        raise invalid_params("Invalid params: notifications must be an object")
    lists = []
    for name, flag in LIST_FLAGS.items():
        value = notifications.get(flag)
        if value is not None and not isinstance(value, bool):
            raise invalid_params(f"Invalid params: notifications.{flag} must be a boolean")
        if value:
            lists.append(name)
    uris = notifications.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
            text = "notifications.resourceSubscriptions must be a list of resource URIs"
            raise invalid_params(f"Invalid params: {text}")
        if len(uris) > MAX_LISTEN_RESOURCES:
            limit = MAX_LISTEN_RESOURCES
            raise invalid_params(f"Invalid params: at most {limit} resources per subscription")
        uris = list(dict.fromkeys(uris))
    return ListenFilter(params.listen_task_ids(rpc), tuple(lists), uris)


async def listen(services: Services, rpc: RpcRequest) -> StreamReply:
    wanted = listen_filter(rpc)
    if wanted.task_ids is not None and not rpc.tasks_opt_in:
        raise missing_tasks_capability()
    if not rpc.streams:
        raise McpError(
            INVALID_PARAMS, "subscriptions/listen answers on a stream: accept text/event-stream"
        )
    # A resource is listened to only by who may read it, refused as its read would be.
    for uri in wanted.resources or []:
        readable(services, rpc.principal, uri)
    principal, tasks = rpc.owner, services.tasks
    accepted: list[str] = []
    for task_id in wanted.task_ids or []:
        try:
            await tasks.get(principal, task_id)
        except TaskNotFound:
            continue
        accepted.append(task_id)
    meta = {META_SUBSCRIPTION_ID: rpc.id}
    ack_params = {"_meta": meta, "notifications": wanted.acknowledged(accepted)}
    ack = replies.notification("notifications/subscriptions/acknowledged", ack_params)
    by_digest = {uri_digest(uri): uri for uri in wanted.resources or []}

    async def render(item: str) -> dict[str, Any] | None:
        notice = notice_of(item)
        if notice is None:  # a task's id
            try:
                record, inputs = await tasks.get(principal, item)
            except TaskNotFound:
                return None
            task = Task.of(record, item, inputs).dump()
            del task["resultType"]  # a notification, not a result
            return replies.notification("notifications/tasks", {"_meta": meta, **task})
        if notice.kind == "list":
            return list_changed(notice.name, meta) if notice.name in wanted.lists else None
        uri = by_digest.get(notice.name)
        return resource_updated(uri, meta) if uri is not None else None

    # Every watch is on (confirmed by Redis) before the acknowledgement goes out, and the
    # tasks are read after it: nothing that changes once the client holds the ack is missed.
    parts: list[AbstractAsyncContextManager[Changes]] = []
    if accepted or not (wanted.lists or by_digest):
        parts.append(tasks.watch(accepted))
    if wanted.lists or by_digest:
        parts.append(services.events.watch(wanted.resources or (), lists=bool(wanted.lists)))
    events = watch_stream(
        services,
        watching=merged(*parts),
        render=render,
        first=[ack],
        snapshot=accepted,
        gone=DISCONNECTED.get(),
    )
    return StreamReply(events)
