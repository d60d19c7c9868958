"""A ``tools/call`` answered synchronously (no Tasks opt-in, or a ``never`` tool).

The call still runs on a worker, as a hidden task; the web tier waits for it on Redis (async,
bounded by ``MCPQ_SYNC_TIMEOUT_S``), so a waiting call never blocks other requests. A tool that
asks for input mid-run turns into MRTR: ``input_required`` with a signed ``requestState`` naming
the hidden task, and the retry's answers are delivered to it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from frontend.envelope import RpcRequest
from frontend.mrtr import input_responses, require_capabilities
from frontend.services import DISCONNECTED, Services
from shared.errors import INTERNAL_ERROR, McpError, invalid_params
from shared.keys import task_ref
from shared.store_calls import NewTask
from shared.tools import Tool

log = logging.getLogger("mcpq.web")


async def start(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], pre: dict[str, Any]
) -> dict[str, Any]:
    s = services.settings
    ref = task_ref(secrets.token_urlsafe(32))
    queue = tool.queue or s.default_queue
    task = NewTask(
        ref,
        tool.name,
        queue,
        services.principal(),
        arguments,
        req.caps,
        s.sync_ttl_ms,
        s.poll_interval_ms,
        pre,
        sync=True,
    )
    await services.store.create(task, int(s.unclaimed_after_s * 1000))
    await services.enqueue(tool.name, ref, queue)
    return await wait(services, req, tool, arguments, ref)


async def resume(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    state: dict[str, Any],
) -> dict[str, Any]:
    ref = str(state.get("ref", ""))
    unclaimed_ms = int(services.settings.unclaimed_after_s * 1000)
    reply = await services.store.answer(
        ref, services.principal(), input_responses(req), unclaimed_ms
    )
    if reply[0] == "NOTFOUND":
        raise invalid_params("Invalid params: requestState refers to a call that has expired")
    if reply[0] == "RESUME":
        await services.enqueue(reply[1], ref, reply[2] or services.settings.default_queue)
    return await wait(services, req, tool, arguments, ref)


async def wait(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], ref: str
) -> dict[str, Any]:
    try:
        return await _wait(services, req, tool, arguments, ref)
    except asyncio.CancelledError:  # the server cancelled this request: stop its run too
        await asyncio.shield(_abandon(services, ref, "the request was cancelled"))
        raise


async def _abandon(services: Services, ref: str, reason: str) -> None:
    await services.store.cancel(ref, services.principal(), reason)
    try:
        await services.producer.revoke(ref)
    except Exception as exc:  # the store says cancelled already; the worker will see it
        log.warning("revoke failed: %s", type(exc).__name__)


async def _wait(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], ref: str
) -> dict[str, Any]:
    store, principal = services.store, services.principal()
    deadline = time.monotonic() + services.settings.sync_timeout_s
    gone = DISCONNECTED.get()
    while (left := deadline - time.monotonic()) > 0:
        if (
            await store.wait_done(ref, min(left, 1.0)) is None
            and gone is not None
            and gone.is_set()
        ):
            # A disconnect cancels the request (spec): the hidden task and its run stop too.
            await _abandon(services, ref, "the client disconnected")
            raise McpError(INTERNAL_ERROR, "The client disconnected")
        record, inputs = await store.get(ref, principal)
        if record.status == "completed":
            return record.result or {"resultType": "complete", "content": []}
        if record.status == "failed":
            error = record.error or {}
            raise McpError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "")),
                error.get("data"),
            )
        if record.status == "cancelled":
            raise McpError(INTERNAL_ERROR, "Tool call was cancelled")
        if record.status == "input_required" and inputs:
            requests = record.wire("", inputs)["inputRequests"]
            try:
                require_capabilities(req, requests)
            except McpError:
                await store.cancel(ref, principal, "client cannot answer the tool's input request")
                raise
            token = services.signer.seal(
                principal, tool.name, arguments, {"kind": "sync", "ref": ref}
            )
            return {
                "resultType": "input_required",
                "inputRequests": requests,
                "requestState": token,
            }
    await _abandon(services, ref, "synchronous call timed out")
    message = (
        f"Tool call did not finish within {services.settings.sync_timeout_s:g}s; call it as a task"
    )
    raise McpError(INTERNAL_ERROR, message)
