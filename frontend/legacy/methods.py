"""The methods of a 2025-era session: ``ping``, ``tools/list``, ``tools/call`` and, from
2025-11-25, the SEP-1686 tasks wire (``tasks/get``, ``tasks/result``, ``tasks/list``,
``tasks/cancel``), all on the task store the 2026-07-28 methods use.

What differs from 2026-07-28, and is written here only:

| tool mode | plain ``tools/call``                | ``tools/call`` with ``params.task`` |
| never     | run synchronously                   | -32601 (``forbidden``)              |
| optional  | run synchronously                   | a task: ``{"task": Task}``          |
| required  | 2025-11-25: -32601; older: run sync | a task                              |

Older versions have no tasks at all, so a ``required`` tool runs synchronously for them (its run
is as durable as any). The task's view on this wire is :class:`shared.wire.LegacyTask`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from frontend import params, sync_call
from frontend.envelope import RpcRequest
from frontend.services import REQUEST_ID, Services
from frontend.streams import Follow, StreamReply, follow
from shared.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, McpError, TaskNotFound, invalid_params
from shared.protocol import LEGACY_TASKS_VERSION, META_RELATED_TASK
from shared.results import error_result
from shared.store import Position, Reply, TaskRecord, TaskStatus, task_ref
from shared.tools import ArgumentsInvalid, Tool
from shared.wire import (
    Ack,
    CallToolResult,
    CreateTaskResult,
    Initialized,
    LegacyTask,
    LegacyToolsList,
    ListTasksResult,
    Result,
    iso,
    legacy_dump,
)

Handler = Callable[[Services, RpcRequest], Awaitable[Result | StreamReply]]

#: Page size of ``tasks/list``.
LIST_PAGE = 50
_TASK_SUPPORT = {"never": "forbidden", "optional": "optional", "required": "required"}


def initialized(services: Services, version: str) -> Initialized:
    capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
    if version >= LEGACY_TASKS_VERSION:
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return Initialized(
        protocol_version=version,
        capabilities=capabilities,
        server_info=services.server_info,
        instructions=(
            "Long-running tools run as durable tasks: call them with params.task "
            "(protocol 2025-11-25) or as plain calls, which stream progress."
        ),
    )


async def ping(services: Services, rpc: RpcRequest) -> Ack:
    return Ack()


async def list_tools(services: Services, rpc: RpcRequest) -> LegacyToolsList:
    tools = []
    for tool in services.registry.tools.values():
        listing = tool.listing()
        if rpc.version >= LEGACY_TASKS_VERSION:
            listing["execution"] = {"taskSupport": _TASK_SUPPORT[tool.mode]}
        tools.append(listing)
    return LegacyToolsList(tools=tools)


async def call_tool(services: Services, rpc: RpcRequest) -> Result | StreamReply:
    name = params.tool_name(rpc)
    tool = services.registry.get(name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {name}")
    services.auth.require(rpc.principal, tool.scopes, f"tool {name}")
    services.tasks.rate_gate(rpc.owner)
    raw_args = params.tool_arguments(rpc, services.settings.max_arguments_bytes)
    task = rpc.params.get("task") if rpc.version >= LEGACY_TASKS_VERSION else None
    if task is not None and not isinstance(task, dict):
        raise invalid_params("Invalid params: task must be an object")
    if task is not None and tool.mode == "never":
        raise McpError(METHOD_NOT_FOUND, f"Tool {name} does not support task-augmented calls")
    if task is None and tool.mode == "required" and rpc.version >= LEGACY_TASKS_VERSION:
        raise McpError(METHOD_NOT_FOUND, f"Tool {name} must be called as a task (params.task)")
    if tool.ask_first is not None:
        # Its questions come before any run exists: only MRTR (2026-07-28) can ask them.
        text = f"Tool {name} asks its questions before it starts: call it with protocol 2026-07-28"
        raise McpError(INTERNAL_ERROR, text)
    try:
        arguments = tool.validate(raw_args)
    except ArgumentsInvalid as exc:  # a tool execution error, so the model can correct itself
        return error_result(str(exc))
    if task is not None:
        return await _create_task(services, rpc, tool, arguments, task.get("ttl"))
    return await sync_call.start(services, rpc, tool, arguments, {})


async def _create_task(
    services: Services, rpc: RpcRequest, tool: Tool, arguments: dict[str, Any], ttl: Any
) -> CreateTaskResult:
    assert rpc.session is not None
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        raise invalid_params("Invalid params: task.ttl must be a positive integer (ms)")
    created = await services.tasks.create(
        rpc.owner,
        tool,
        arguments,
        rpc.caps,
        {},
        request_id=REQUEST_ID.get(),
        ttl_ms=ttl,
        listed_in=rpc.session.scope,
    )
    stamp = iso(created.created_ms)
    task = LegacyTask(
        task_id=created.task_id,
        status=TaskStatus.WORKING,
        created_at=stamp,
        last_updated_at=stamp,
        ttl=created.ttl_ms,
        poll_interval=created.poll_ms,
    )
    return CreateTaskResult(task=legacy_dump(task))


# -- tasks/* (2025-11-25) --------------------------------------------------------------------------
async def _task(services: Services, rpc: RpcRequest) -> tuple[str, TaskRecord]:
    task_id = params.task_id(rpc)
    record, _ = await services.tasks.get(rpc.owner, task_ref(task_id))
    return task_id, record


async def get_task(services: Services, rpc: RpcRequest) -> LegacyTask:
    task_id, record = await _task(services, rpc)
    return LegacyTask.of(record, task_id)


def _related(task_id: str) -> Callable[[TaskRecord], CallToolResult]:
    def final(record: TaskRecord) -> CallToolResult:
        if record.status is TaskStatus.CANCELLED:
            raise McpError(INTERNAL_ERROR, "Task was cancelled")
        result = sync_call.outcome(record)
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
    spec = Follow(record.ref, final=final, related_task=task_id)
    if not rpc.streams:
        # No stream: the JSON reply waits, bounded like a plain synchronous call.
        return await sync_call.await_end(services, rpc, record.ref, final)
    return StreamReply(follow(services, rpc, spec))


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
    ref = task_ref(task_id)
    cancelled = await services.tasks.cancel(rpc.owner, ref, "Cancelled by client")
    if cancelled.reply is Reply.NOTFOUND:
        raise TaskNotFound()
    if cancelled.reply is Reply.TERMINAL:
        raise invalid_params("Invalid params: the task has already ended")
    record, _ = await services.tasks.get(rpc.owner, ref)
    return LegacyTask.of(record, task_id)


_BASE: dict[str, Handler] = {"ping": ping, "tools/list": list_tools, "tools/call": call_tool}
_TASKS: dict[str, Handler] = {
    **_BASE,
    "tasks/get": get_task,
    "tasks/result": task_result,
    "tasks/list": list_tasks,
    "tasks/cancel": cancel_task,
}


def for_version(version: str) -> dict[str, Handler]:
    """The methods a session of ``version`` may call."""
    return _TASKS if version >= LEGACY_TASKS_VERSION else _BASE
