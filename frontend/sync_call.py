"""A ``tools/call`` answered synchronously (no Tasks opt-in, or a ``never`` tool).

The call still runs on a worker, as a hidden task; the web tier waits for it on Redis (async,
bounded by ``MCPQ_SYNC_TIMEOUT_S``), so a waiting call never blocks other requests. A tool that
asks for input mid-run turns into MRTR: ``input_required`` with a signed ``requestState`` naming
the hidden task, and the retry's answers are delivered to it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from frontend import params
from frontend.envelope import RpcRequest
from frontend.mrtr import require_capabilities
from frontend.services import DISCONNECTED, REQUEST_ID, Services
from shared.errors import INTERNAL_ERROR, McpError, invalid_params
from shared.store import Reply, TaskStatus
from shared.tools import Tool
from shared.wire import CallToolResult, InputRequiredResult, Result


async def start(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], pre: dict[str, Any]
) -> Result:
    created = await services.tasks.create(
        services.principal(), tool, arguments, req.caps, pre, sync=True, request_id=REQUEST_ID.get()
    )
    return await wait(services, req, tool, arguments, created.ref)


async def resume(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    state: dict[str, Any],
) -> Result:
    """The MRTR retry of a synchronous call that asked for input: deliver its answers to the
    hidden task the signed state names, then wait again."""
    ref = str(state.get("ref", ""))
    responses = params.input_responses(req, required=False)
    answered = await services.tasks.answer(services.principal(), ref, responses, REQUEST_ID.get())
    if answered.reply is Reply.NOTFOUND:
        raise invalid_params("Invalid params: requestState refers to a call that has expired")
    return await wait(services, req, tool, arguments, ref)


async def wait(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], ref: str
) -> Result:
    try:
        return await _wait(services, req, tool, arguments, ref)
    except asyncio.CancelledError:  # the server cancelled this request: stop its run too
        await asyncio.shield(_abandon(services, ref, "the request was cancelled"))
        raise


async def _abandon(services: Services, ref: str, reason: str) -> None:
    await services.tasks.cancel(services.principal(), ref, reason)


async def _wait(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], ref: str
) -> Result:
    tasks, principal = services.tasks, services.principal()
    deadline = time.monotonic() + services.settings.sync_timeout_s
    gone = DISCONNECTED.get()
    while (left := deadline - time.monotonic()) > 0:
        # One-second slices: between them a client that went away is noticed; a wake-up (the
        # run ended or asked for input) ends the slice early, then the store says which.
        woken = await tasks.wait_done(ref, min(left, 1.0))
        if woken is None and gone is not None and gone.is_set():
            # A disconnect cancels the request (spec): the hidden task and its run stop too.
            await _abandon(services, ref, "the client disconnected")
            raise McpError(INTERNAL_ERROR, "The client disconnected")
        record, inputs = await tasks.get(principal, ref)
        if record.status is TaskStatus.COMPLETED:
            return CallToolResult.model_validate(record.result or {"content": []})
        if record.status is TaskStatus.FAILED:
            error = record.error or {}
            code, message = int(error.get("code", INTERNAL_ERROR)), str(error.get("message", ""))
            raise McpError(code, message, error.get("data"))
        if record.status is TaskStatus.CANCELLED:
            raise McpError(INTERNAL_ERROR, "Tool call was cancelled")
        if record.status is TaskStatus.INPUT_REQUIRED and inputs:
            try:
                require_capabilities(req, inputs)
            except McpError:
                await _abandon(services, ref, "client cannot answer the tool's input request")
                raise
            # The token names the hidden task and is bound to this principal, tool and
            # arguments, so only the same call's retry can deliver answers to it.
            token = services.signer.seal(
                principal, tool.name, arguments, {"kind": "sync", "ref": ref}
            )
            return InputRequiredResult(input_requests=inputs, request_state=token)
    await _abandon(services, ref, "synchronous call timed out")
    message = (
        f"Tool call did not finish within {services.settings.sync_timeout_s:g}s; call it as a task"
    )
    raise McpError(INTERNAL_ERROR, message)
