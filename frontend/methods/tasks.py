"""``tasks/get``, ``tasks/update`` and ``tasks/cancel``.

Params are checked first (-32602), then the capability gate (-32021, before any lookup, so an
unknown id from a non-declaring client reads -32021), then the lookup: an unknown, expired or
another principal's task reads exactly alike (-32602).
"""

from __future__ import annotations

from mcpq.frontend import params
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import REQUEST_ID, Services
from mcpq.shared.errors import TaskNotFound, missing_tasks_capability
from mcpq.shared.store import Reply
from mcpq.shared.wire import Ack, Task


def _gate(rpc: RpcRequest) -> None:
    if not rpc.tasks_opt_in:
        raise missing_tasks_capability()


async def get(services: Services, rpc: RpcRequest) -> Task:
    task_id = params.task_id(rpc)
    _gate(rpc)
    record, inputs = await services.tasks.get(rpc.owner, task_id)
    return Task.of(record, task_id, inputs)


async def update(services: Services, rpc: RpcRequest) -> Ack:
    task_id = params.task_id(rpc)
    responses = params.input_responses(rpc, required=True)
    _gate(rpc)
    answered = await services.tasks.answer(rpc.owner, task_id, responses, REQUEST_ID.get())
    if answered.reply is Reply.NOTFOUND:
        raise TaskNotFound()
    return Ack()


async def cancel(services: Services, rpc: RpcRequest) -> Ack:
    task_id = params.task_id(rpc)
    _gate(rpc)
    cancelled = await services.tasks.cancel(rpc.owner, task_id, "Cancelled by client")
    if cancelled.reply is Reply.NOTFOUND:
        raise TaskNotFound()
    return Ack()  # cancelling a terminal task is an ack that changes nothing
