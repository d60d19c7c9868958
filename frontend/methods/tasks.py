"""``tasks/get``, ``tasks/update`` and ``tasks/cancel``.

Params are checked first (-32602), then the capability gate (-32021, before any lookup, so an
unknown id from a non-declaring client reads -32021), then the lookup: an unknown, expired or
another principal's task reads exactly alike (-32602).
"""

from __future__ import annotations

import logging
from typing import Any

from frontend.envelope import RpcRequest
from frontend.services import Services
from shared.errors import TaskNotFound, invalid_params, missing_tasks_capability
from shared.keys import task_ref
from shared.logs import task_hash

log = logging.getLogger("mcpq.web")
_ACTIONS = {"accept", "decline", "cancel"}


def _task_id(req: RpcRequest) -> str:
    task_id = req.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise invalid_params("Invalid params: taskId must be a non-empty string")
    return task_id


def _gate(req: RpcRequest) -> None:
    if not req.tasks_opt_in:
        raise missing_tasks_capability()


def _input_responses(req: RpcRequest) -> dict[str, Any]:
    responses = req.params.get("inputResponses")
    if not isinstance(responses, dict):
        raise invalid_params("Invalid params: inputResponses must be an object")
    for key, value in responses.items():
        if not isinstance(value, dict):
            raise invalid_params(f"Invalid params: inputResponses[{key!r}] must be an object")
        if "action" in value and value["action"] not in _ACTIONS:
            raise invalid_params(f"Invalid params: inputResponses[{key!r}].action is not valid")
    return responses


async def get(services: Services, req: RpcRequest) -> dict[str, Any]:
    task_id = _task_id(req)
    _gate(req)
    record, inputs = await services.store.get(task_ref(task_id), services.principal())
    return {"resultType": "complete", **record.wire(task_id, inputs)}


async def update(services: Services, req: RpcRequest) -> dict[str, Any]:
    task_id = _task_id(req)
    responses = _input_responses(req)
    _gate(req)
    ref = task_ref(task_id)
    unclaimed_ms = int(services.settings.unclaimed_after_s * 1000)
    reply = await services.store.answer(ref, services.principal(), responses, unclaimed_ms)
    if reply[0] == "NOTFOUND":
        raise TaskNotFound()
    log.info("answers stored", extra={"task": task_hash(ref), "transition": reply[0].lower()})
    if reply[0] == "RESUME":
        await services.enqueue(reply[1], ref, reply[2] or services.settings.default_queue)
    return {"resultType": "complete"}


async def cancel(services: Services, req: RpcRequest) -> dict[str, Any]:
    task_id = _task_id(req)
    _gate(req)
    ref = task_ref(task_id)
    outcome, _running = await services.store.cancel(
        ref, services.principal(), "Cancelled by client"
    )
    if outcome == "NOTFOUND":
        raise TaskNotFound()
    if outcome == "CANCELLED":
        log.info("task cancelled", extra={"task": task_hash(ref), "transition": "cancelled"})
        try:
            await services.producer.revoke(ref)
        except Exception as exc:  # the store already says cancelled; the worker will see it
            log.warning("revoke failed: %s", type(exc).__name__)
    return {"resultType": "complete"}
