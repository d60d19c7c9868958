"""``tools/call``, one pipeline for every wire and mode::

    params ─► gate ─► arguments ─► request state ─┬─ a running call's retry ─► sync.resume
                                                   ├─ ask_first open ───────► mrtr (a round)
                                                   ├─ a task ───────────────► TaskService.create
                                                   └─ synchronous ──────────► sync.start

The params are read and checked once (``mcpq.frontend.params``), the gate decides whether the caller
may call the tool and as what (``mcpq.frontend.calls.gate``: lookup, authorization, rate, the wire's
decision table), the arguments are validated against the tool's schema (a tool error the model can
correct, not -32602), then the sealed ``requestState`` says which retry this is
(``mcpq.frontend.calls.state``). Only this module chooses a path; each path is one module.
"""

from __future__ import annotations

from typing import Any

from mcpq.frontend import params
from mcpq.frontend.calls import gate, mrtr, sync
from mcpq.frontend.calls.state import RunningCall, StateSeal
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import REQUEST_ID, Services
from mcpq.frontend.streams import StreamReply
from mcpq.frontend.task_service import Once
from mcpq.shared.results import error_result
from mcpq.shared.tools import ArgumentsInvalid
from mcpq.shared.wire import InputRequiredResult, Result, created_task


async def call_tool(services: Services, rpc: RpcRequest) -> Result | StreamReply:
    call = params.tool_call(rpc, services.settings.max_arguments_bytes)
    admitted = gate.admit(services, rpc, call)
    tool = admitted.tool
    try:
        arguments = tool.validate(call.arguments)
    except ArgumentsInvalid as exc:  # a tool execution error, so the model can correct itself
        return error_result(str(exc))
    # Arguments are validated before the requestState is opened: the state is bound to a
    # digest of the validated arguments, so a retry with other arguments is refused.
    seal = StateSeal(services.signer, rpc, tool, arguments)
    state = seal.open(call.request_state)
    if isinstance(state, RunningCall):
        return await sync.resume(services, seal, state, call.responses)
    pre: dict[str, Any] = {}
    once: Once | None = None
    if tool.ask_first is not None:
        gathered = mrtr.gather(services, seal, call.responses, state)
        if isinstance(gathered, InputRequiredResult):
            return gathered
        pre, once = gathered.answers, gathered.once
    if not admitted.as_task:
        return await sync.start(services, seal, pre, once)
    ttl_ms = call.task.ttl_ms if call.task is not None else None
    created = await services.tasks.create(
        rpc.owner,
        tool,
        arguments,
        rpc.caps,
        pre,
        request_id=REQUEST_ID.get(),
        ttl_ms=ttl_ms,
        listed_in=rpc.session.scope if rpc.session is not None else None,
        once=once,
    )
    fields = (created.task_id, created.created_ms, created.ttl_ms, created.poll_ms)
    return created_task(*fields, legacy=rpc.legacy)
