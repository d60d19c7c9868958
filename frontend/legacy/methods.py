"""The methods only a 2025-era session has: ``initialize``'s result, ``ping`` and, from
2025-11-25, the SEP-1686 tasks wire (``tasks/get``, ``tasks/result``, ``tasks/list``,
``tasks/cancel``), all on the tasks the 2026-07-28 methods serve. The task's view on this wire is
:class:`mcpq.shared.wire.LegacyTask`. (``tools/list`` and ``tools/call`` serve both wires:
``mcpq.frontend.methods.tools``, ``mcpq.frontend.calls``.)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from mcpq.frontend import params
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import Services
from mcpq.frontend.streams import Follow, StreamReply, follow, settle
from mcpq.shared.errors import INTERNAL_ERROR, McpError, TaskNotFound, invalid_params
from mcpq.shared.protocol import LEGACY_TASKS_VERSION, META_RELATED_TASK, SERVER_FEATURES
from mcpq.shared.store import Position, Reply, TaskRecord, TaskStatus
from mcpq.shared.tool_context import LOG_LEVELS
from mcpq.shared.wire import (
    Ack,
    CallToolResult,
    Initialized,
    LegacyTask,
    ListTasksResult,
    Result,
    call_outcome,
    legacy_dump,
)

#: Page size of ``tasks/list``.
LIST_PAGE = 50


def initialized(services: Services, version: str) -> Initialized:
    # ``logging``: a synchronous call's stream carries its tool's log messages (``ctx.info``...).
    # ``listChanged`` (and ``resources.subscribe``): told on the session's GET stream.
    capabilities: dict[str, Any] = {"tools": {"listChanged": True}, **SERVER_FEATURES}
    if version >= LEGACY_TASKS_VERSION:
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return Initialized(
        protocol_version=version,
        capabilities=capabilities,
        server_info=services.server_info,
        instructions=services.registry.instructions
        or (
            "Long-running tools run as durable tasks: call them with params.task "
            "(protocol 2025-11-25) or as plain calls, which stream progress."
        ),
    )


async def ping(services: Services, rpc: RpcRequest) -> Ack:
    return Ack()


async def set_level(services: Services, rpc: RpcRequest) -> Ack:
    """``logging/setLevel``: the session's calls stream the log messages at ``level`` and above."""
    level = rpc.params.get("level")
    if level not in LOG_LEVELS:
        raise invalid_params(f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}")
    assert rpc.session is not None  # a 2025-era method: only a session's requests reach it
    if not await services.sessions.set_log_level(rpc.session.sref, str(level)):
        raise McpError(INTERNAL_ERROR, "The session ended")
    return Ack()


# -- tasks/* (2025-11-25) --------------------------------------------------------------------------
async def _task(services: Services, rpc: RpcRequest) -> tuple[str, TaskRecord]:
    task_id = params.task_id(rpc)
    record, _ = await services.tasks.get(rpc.owner, task_id)
    return task_id, record


async def get_task(services: Services, rpc: RpcRequest) -> LegacyTask:
    task_id, record = await _task(services, rpc)
    return LegacyTask.of(record, task_id)


def _related(task_id: str) -> Callable[[TaskRecord], CallToolResult]:
    def final(record: TaskRecord) -> CallToolResult:
        if record.status is TaskStatus.CANCELLED:
            raise McpError(INTERNAL_ERROR, "Task was cancelled")
        result = call_outcome(record)
        meta = {**(result.meta or {}), META_RELATED_TASK: {"taskId": task_id}}
        return result.model_copy(update={"meta": meta})

    return final


async def task_result(services: Services, rpc: RpcRequest) -> Result | StreamReply:
    """Blocks until the task ends, then answers what the call would have answered. While it
    waits (on a stream), the task's input requests go to the client as server→client requests
    with the related-task ``_meta``; their answers come back as POSTed responses."""
    task_id, record = await _task(services, rpc)
    final = _related(task_id)
    if record.terminal:
        return final(record)
    if not rpc.streams:
        # No stream: the JSON reply waits, bounded like a plain synchronous call; the task's
        # run goes on either way (a task, not a call).
        waiting = Follow(
            task_id,
            final=final,
            limit_s=services.settings.sync_timeout_s,
            limit_text="The task has not ended yet: call tasks/result again, or accept SSE",
        )
        return await settle(services, rpc, waiting)
    return StreamReply(follow(services, rpc, Follow(task_id, final=final, related_task=task_id)))


def _cursor(position: Position) -> str:
    raw = f"{position.created_ms}.{position.ref}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _position(cursor: Any) -> Position:
    try:
        if not isinstance(cursor, str):
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, ref = raw.split(".", 1)
        if not ref.isalnum() or len(ref) > 64:
            raise ValueError
        return Position(int(created), ref)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid_params("Invalid params: cursor is not one this server gave") from None


async def list_tasks(services: Services, rpc: RpcRequest) -> ListTasksResult:
    assert rpc.session is not None
    cursor = rpc.params.get("cursor")
    after = _position(cursor) if cursor is not None else None
    page, last = await services.tasks.list_page(rpc.session.scope, rpc.owner, after, LIST_PAGE)
    tasks = [legacy_dump(LegacyTask.of(item.record, item.task_id)) for item in page]
    if last is None:
        return ListTasksResult(tasks=tasks)
    return ListTasksResult(tasks=tasks, next_cursor=_cursor(last))


async def cancel_task(services: Services, rpc: RpcRequest) -> LegacyTask:
    """Cancels and answers the task, now ``cancelled``; a task already ended is -32602 (the
    2025-11-25 rule; 2026-07-28 acknowledges instead)."""
    task_id = params.task_id(rpc)
    cancelled = await services.tasks.cancel(rpc.owner, task_id, "Cancelled by client")
    if cancelled.reply is Reply.NOTFOUND:
        raise TaskNotFound()
    if cancelled.reply is Reply.TERMINAL:
        raise invalid_params("Invalid params: the task has already ended")
    record, _ = await services.tasks.get(rpc.owner, task_id)
    return LegacyTask.of(record, task_id)
