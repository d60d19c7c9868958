"""``tools/list`` and ``tools/call`` (the decision table of spec digest §2.3).

| opt-in | tool mode          | answer                                       |
| yes    | optional, required | ``CreateTaskResult`` (after any MRTR rounds) |
| yes/no | never              | the ``CallToolResult``, run synchronously     |
| no     | optional           | the ``CallToolResult``, run synchronously     |
| no     | required           | ``-32021`` with ``data.requiredCapabilities`` |

A legacy ``task`` param is ignored like any unknown field.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

from frontend import mrtr, sync_call
from frontend.envelope import RpcRequest
from frontend.services import Services
from shared.errors import INTERNAL_ERROR, McpError, invalid_params, missing_tasks_capability
from shared.keys import task_ref
from shared.logs import task_hash
from shared.records import iso
from shared.request_state import InvalidRequestState
from shared.results import error_result
from shared.store_calls import NewTask
from shared.tools import ArgumentsInvalid, Tool

log = logging.getLogger("mcpq.web")


async def list_tools(services: Services, req: RpcRequest) -> dict[str, Any]:
    tools = [t.listing() for t in services.registry.tools.values()]
    return {"resultType": "complete", "tools": tools, "ttlMs": 0, "cacheScope": "private"}


def _tool(services: Services, req: RpcRequest) -> Tool:
    name = req.params.get("name")
    if not isinstance(name, str):
        raise invalid_params("Invalid params: name must be a string")
    tool = services.registry.get(name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {name}")
    return tool


async def call_tool(services: Services, req: RpcRequest) -> dict[str, Any]:
    tool = _tool(services, req)
    raw_args = req.params.get("arguments", {})
    if raw_args is None:
        raw_args = {}
    if not isinstance(raw_args, dict):
        raise invalid_params("Invalid params: arguments must be an object")
    as_task = req.tasks_opt_in and tool.mode != "never"
    if tool.mode == "required" and not req.tasks_opt_in:
        raise missing_tasks_capability()
    try:
        arguments = tool.validate(raw_args)
    except ArgumentsInvalid as exc:  # a tool execution error, so the model can correct itself
        return error_result(str(exc))
    state = _open_state(services, req, tool, arguments)
    if state is not None and state.get("kind") == "sync":
        return await sync_call.resume(services, req, tool, arguments, state)
    pre: dict[str, Any] = {}
    if tool.ask_first is not None:
        pre, pending = mrtr.gather(services, req, tool, arguments, state)
        if pending is not None:
            return pending
    if as_task:
        return await create_task(services, req, tool, arguments, pre)
    return await sync_call.start(services, req, tool, arguments, pre)


def _open_state(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    if "requestState" not in req.params:
        return None
    try:
        return services.signer.open(
            req.params["requestState"], services.principal(), tool.name, arguments
        )
    except InvalidRequestState as exc:
        raise invalid_params(f"Invalid params: {exc}") from None


async def create_task(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], pre: dict[str, Any]
) -> dict[str, Any]:
    """Persist the task, enqueue its run, and only then hand out the ``taskId``."""
    s = services.settings
    task_id = secrets.token_urlsafe(32)
    ref = task_ref(task_id)
    ttl_ms = services.registry.effective_ttl(tool, s.default_ttl_ms)
    poll_ms = tool.poll_interval_ms or s.poll_interval_ms
    queue = tool.queue or s.default_queue
    task = NewTask(
        ref, tool.name, queue, services.principal(), arguments, req.caps, ttl_ms, poll_ms, pre
    )
    created_ms = await services.store.create(task, int(s.unclaimed_after_s * 1000))
    if created_ms is None:
        raise McpError(INTERNAL_ERROR, "Could not create the task")
    if s.fault_hook == "exit-after-persist":  # test-only: die between persisting and enqueueing
        os._exit(70)
    await services.enqueue(tool.name, ref, queue)
    log.info(
        "task created", extra={"task": task_hash(ref), "tool": tool.name, "transition": "created"}
    )
    stamp = iso(created_ms)
    return {
        "resultType": "task",
        "taskId": task_id,
        "status": "working",
        "createdAt": stamp,
        "lastUpdatedAt": stamp,
        "ttlMs": ttl_ms,
        "pollIntervalMs": poll_ms,
    }
