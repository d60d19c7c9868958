"""``subscriptions/listen`` with ``notifications.taskIds``: the Tasks extension's optional push.

The stream opens with ``notifications/subscriptions/acknowledged`` naming the ids it will report
on (the caller's tasks among those asked; others are left out exactly as unknown ones, so an id
reveals nothing), then one ``notifications/tasks`` per change: the full task as ``tasks/get``
shows it, without ``resultType``, with ``_meta.subscriptionId`` (the listen request's id).
"""

from __future__ import annotations

from typing import Any

from frontend import replies
from frontend.envelope import RpcRequest
from frontend.services import DISCONNECTED, Services
from frontend.streams import StreamReply, watch_stream
from shared.errors import (
    INVALID_PARAMS,
    McpError,
    TaskNotFound,
    invalid_params,
    missing_tasks_capability,
)
from shared.protocol import META_SUBSCRIPTION_ID
from shared.store import task_ref
from shared.wire import Task

#: The most task ids one listen request may name.
MAX_TASK_IDS = 100


def _task_ids(req: RpcRequest) -> list[str] | None:
    notifications = req.params.get("notifications")
    if notifications is None:
        return None
    if not isinstance(notifications, dict):
        raise invalid_params("Invalid params: notifications must be an object")
    ids = notifications.get("taskIds")
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise invalid_params("Invalid params: notifications.taskIds must be a list of taskIds")
    if len(ids) > MAX_TASK_IDS:
        raise invalid_params(f"Invalid params: at most {MAX_TASK_IDS} taskIds per subscription")
    return list(dict.fromkeys(ids))


async def listen(services: Services, req: RpcRequest) -> StreamReply:
    ids = _task_ids(req)
    if ids is not None and not req.tasks_opt_in:
        raise missing_tasks_capability()
    if not req.streams:
        raise McpError(
            INVALID_PARAMS, "subscriptions/listen answers on a stream: accept text/event-stream"
        )
    principal, tasks = req.owner, services.tasks
    accepted: dict[str, str] = {}  # ref -> taskId
    for task_id in ids or []:
        try:
            await tasks.get(principal, task_ref(task_id))
        except TaskNotFound:
            continue
        accepted[task_ref(task_id)] = task_id
    meta = {META_SUBSCRIPTION_ID: req.id}
    ack_params: dict[str, Any] = {"_meta": meta}
    if ids is not None:
        ack_params["notifications"] = {"taskIds": list(accepted.values())}
    ack = replies.notification("notifications/subscriptions/acknowledged", ack_params)

    async def render(ref: str) -> dict[str, Any] | None:
        task_id = accepted.get(ref)
        if task_id is None:
            return None
        try:
            record, inputs = await tasks.get(principal, ref)
        except TaskNotFound:
            return None
        task = Task.of(record, task_id, inputs).dump()
        del task["resultType"]  # a notification, not a result
        return replies.notification("notifications/tasks", {"_meta": meta, **task})

    events = watch_stream(
        services,
        refs=list(accepted),
        render=render,
        first=[ack],
        snapshot=True,
        gone=DISCONNECTED.get(),
    )
    return StreamReply(events)
