"""``subscriptions/listen`` with ``notifications.taskIds``: the Tasks extension's optional push.

The stream opens with ``notifications/subscriptions/acknowledged`` naming the ids it will report
on (the caller's tasks among those asked; others are left out exactly as unknown ones, so an id
reveals nothing), then one ``notifications/tasks`` per change: the full task as ``tasks/get``
shows it, without ``resultType``, with ``_meta.subscriptionId`` (the listen request's id).
"""

from __future__ import annotations

from typing import Any

from mcpq.frontend import params, replies
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import DISCONNECTED, Services
from mcpq.frontend.streams import StreamReply, watch_stream
from mcpq.shared.errors import (
    INVALID_PARAMS,
    McpError,
    TaskNotFound,
    missing_tasks_capability,
)
from mcpq.shared.protocol import META_SUBSCRIPTION_ID
from mcpq.shared.wire import Task


async def listen(services: Services, rpc: RpcRequest) -> StreamReply:
    ids = params.listen_task_ids(rpc)
    if ids is not None and not rpc.tasks_opt_in:
        raise missing_tasks_capability()
    if not rpc.streams:
        raise McpError(
            INVALID_PARAMS, "subscriptions/listen answers on a stream: accept text/event-stream"
        )
    principal, tasks = rpc.owner, services.tasks
    accepted: list[str] = []
    for task_id in ids or []:
        try:
            await tasks.get(principal, task_id)
        except TaskNotFound:
            continue
        accepted.append(task_id)
    meta = {META_SUBSCRIPTION_ID: rpc.id}
    ack_params: dict[str, Any] = {"_meta": meta}
    if ids is not None:
        ack_params["notifications"] = {"taskIds": accepted}
    ack = replies.notification("notifications/subscriptions/acknowledged", ack_params)

    async def render(task_id: str) -> dict[str, Any] | None:
        try:
            record, inputs = await tasks.get(principal, task_id)
        except TaskNotFound:
            return None
        task = Task.of(record, task_id, inputs).dump()
        del task["resultType"]  # a notification, not a result
        return replies.notification("notifications/tasks", {"_meta": meta, **task})

    events = watch_stream(
        services,
        watching=tasks.watch(accepted),
        render=render,
        first=[ack],
        snapshot=accepted,
        gone=DISCONNECTED.get(),
    )
    return StreamReply(events)
