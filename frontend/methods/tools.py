"""``tools/list`` and ``tools/call`` (the decision table of spec digest §2.3).

| opt-in | tool mode          | answer                                       |
| yes    | optional, required | ``CreateTaskResult`` (after any MRTR rounds) |
| yes/no | never              | the ``CallToolResult``, run synchronously     |
| no     | optional           | the ``CallToolResult``, run synchronously     |
| no     | required           | ``-32021`` with ``data.requiredCapabilities`` |

A legacy ``task`` param is ignored like any unknown field.
"""

from __future__ import annotations

from typing import Any

from frontend import mrtr, params, sync_call
from frontend.envelope import RpcRequest
from frontend.services import REQUEST_ID, Services
from frontend.streams import StreamReply
from frontend.task_service import Once
from shared.errors import invalid_params, missing_tasks_capability
from shared.request_state import InvalidRequestState
from shared.results import error_result
from shared.store import TaskStatus
from shared.tools import ArgumentsInvalid, Tool
from shared.wire import Result, Task, ToolsList, iso


async def list_tools(services: Services, req: RpcRequest) -> ToolsList:
    tools = [t.listing() for t in services.registry.tools.values()]
    return ToolsList(tools=tools, ttl_ms=0, cache_scope="private")


def _tool(services: Services, req: RpcRequest) -> Tool:
    name = params.tool_name(req)
    tool = services.registry.get(name)
    if tool is None:
        raise invalid_params(f"Unknown tool: {name}")
    services.auth.require(req.principal, tool.scopes, f"tool {name}")
    # Before the arguments are read: a principal over its rate costs as little as possible.
    services.tasks.rate_gate(req.owner)
    return tool


async def call_tool(services: Services, req: RpcRequest) -> Result | StreamReply:
    tool = _tool(services, req)
    raw_args = params.tool_arguments(req, services.settings.max_arguments_bytes)
    # The opt-in is per request (its _meta capabilities), not per connection: there is none.
    as_task = req.tasks_opt_in and tool.mode != "never"
    if tool.mode == "required" and not req.tasks_opt_in:
        raise missing_tasks_capability()
    try:
        arguments = tool.validate(raw_args)
    except ArgumentsInvalid as exc:  # a tool execution error, so the model can correct itself
        return error_result(str(exc))
    # Arguments are validated before the requestState is opened: the state is bound to a
    # digest of the validated arguments, so a retry with other arguments is refused.
    state = _open_state(services, req, tool, arguments)
    if state is not None and state.get("kind") == "sync":
        return await sync_call.resume(services, req, tool, arguments, state)
    pre: dict[str, Any] = {}
    if tool.ask_first is not None:
        pre, pending = mrtr.gather(services, req, tool, arguments, state)
        if pending is not None:
            return pending
    once = _single_use(state)
    if as_task:
        return await create_task(services, req, tool, arguments, pre, once)
    return await sync_call.start(services, req, tool, arguments, pre, once)


def _single_use(state: dict[str, Any] | None) -> Once | None:
    """The id and expiry of a task-creating state: the create marks it used."""
    if state is None or not isinstance(state.get("jti"), str):
        return None
    return Once(state["jti"], int(float(state["exp"]) * 1000))


def _open_state(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    if "requestState" not in req.params:
        return None
    try:
        return services.signer.open(
            req.params["requestState"], req.owner, req.method, tool.name, arguments
        )
    except InvalidRequestState as exc:
        raise invalid_params(f"Invalid params: {exc}") from None


async def create_task(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    pre: dict[str, Any],
    once: Once | None = None,
) -> Task:
    """The ``CreateTaskResult``: handed out only once the task is persisted and enqueued."""
    created = await services.tasks.create(
        req.owner, tool, arguments, req.caps, pre, request_id=REQUEST_ID.get(), once=once
    )
    stamp = iso(created.created_ms)
    return Task(
        result_type="task",
        task_id=created.task_id,
        status=TaskStatus.WORKING,
        created_at=stamp,
        last_updated_at=stamp,
        ttl_ms=created.ttl_ms,
        poll_interval_ms=created.poll_ms,
    )
