"""A ``tools/call`` answered synchronously (no Tasks opt-in, or a ``never`` tool).

The call still runs on a worker, as a hidden task; the web tier follows it (``frontend.streams``:
the task's pub/sub channel, never blocking the event loop), on an SSE stream when the client takes
one, else for one JSON reply bounded by ``MCPQ_SYNC_TIMEOUT_S``. A tool that asks for input
mid-run turns into MRTR (2026-07-28): ``input_required`` with a signed ``requestState`` naming the
hidden task, and the retry's answers are delivered to it; a 2025-era stream asks the client
directly instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frontend import params
from frontend.envelope import RpcRequest
from frontend.mrtr import require_capabilities
from frontend.services import DISCONNECTED, REQUEST_ID, Services
from frontend.streams import Follow, StreamReply, follow, settle
from frontend.task_service import Once
from shared.errors import INTERNAL_ERROR, McpError, TaskNotFound, invalid_params
from shared.request_state import arguments_digest
from shared.store import Reply, TaskRecord, TaskStatus, task_ref
from shared.tools import Tool
from shared.wire import CallToolResult, InputRequiredResult, Result


def outcome(record: TaskRecord) -> CallToolResult:
    """What a call whose task ended returns: its result, or its error raised."""
    if record.status is TaskStatus.COMPLETED:
        return CallToolResult.model_validate(record.result or {"content": []})
    if record.status is TaskStatus.FAILED:
        error = record.error or {}
        code, message = int(error.get("code", INTERNAL_ERROR)), str(error.get("message", ""))
        raise McpError(code, message, error.get("data"))
    raise McpError(INTERNAL_ERROR, "Tool call was cancelled")


async def ask_again(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    hidden: Hidden,
    inputs: dict[str, Any],
) -> InputRequiredResult:
    """MRTR for a running synchronous call (2026-07-28): the questions, and a sealed state that
    carries the hidden task's secret id, so only the same call's retry can deliver answers to
    it. The state expires with the hidden task."""
    try:
        require_capabilities(req, inputs)
    except McpError:
        await abandon(
            services, req.owner, hidden.ref, "client cannot answer the tool's input request"
        )
        raise
    token = services.signer.seal(
        req.owner,
        req.method,
        tool.name,
        arguments,
        {"kind": "sync", "task": hidden.task_id},
        expires_ms=hidden.expires_ms,
    )
    return InputRequiredResult(input_requests=inputs, request_state=token)


async def start(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    pre: dict[str, Any],
    once: Once | None = None,
) -> Result | StreamReply:
    created = await services.tasks.create(
        req.owner,
        tool,
        arguments,
        req.caps,
        pre,
        sync=True,
        request_id=REQUEST_ID.get(),
        once=once,
    )
    expires = None if created.ttl_ms is None else created.created_ms + created.ttl_ms
    return await wait(services, req, tool, arguments, Hidden(created.task_id, expires))


async def resume(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    state: dict[str, Any],
) -> Result | StreamReply:
    """The MRTR retry of a synchronous call that asked for input: deliver its answers to the
    hidden task the sealed state names, then wait again.

    The state carries the hidden task's own secret id (never its ref, which Flower and the
    logs show), and the task must be what the state claims: a hidden synchronous task of this
    principal, for this tool and these arguments. Anything else reads as expired."""
    task_id = state.get("task")
    gone = invalid_params("Invalid params: requestState refers to a call that has expired")
    if not isinstance(task_id, str):
        raise gone
    ref = task_ref(task_id)
    try:
        record, _ = await services.tasks.get(req.owner, ref, call=True)  # its arguments
    except TaskNotFound:
        raise gone from None
    digest = arguments_digest(tool.name, arguments)
    if not record.sync or record.tool != tool.name:
        raise gone
    if arguments_digest(record.tool, record.arguments) != digest:
        raise gone
    responses = params.input_responses(req, required=False)
    answered = await services.tasks.answer(req.owner, ref, responses, REQUEST_ID.get())
    if answered.reply is Reply.NOTFOUND:
        raise gone
    expires = None if record.ttl_ms is None else record.created_ms + record.ttl_ms
    return await wait(services, req, tool, arguments, Hidden(task_id, expires))


@dataclass(frozen=True)
class Hidden:
    """A synchronous call's hidden task: its secret id, and when it expires (epoch ms)."""

    task_id: str
    expires_ms: int | None

    @property
    def ref(self) -> str:
        return task_ref(self.task_id)


async def wait(
    services: Services, req: RpcRequest, tool: Tool, arguments: dict[str, Any], hidden: Hidden
) -> Result | StreamReply:
    """Follow the hidden task to its end (``frontend.streams``): on an SSE stream when the
    client takes one (progress, keep-alives, input requests on a 2025-era session; bounded by
    ``MCPQ_STREAM_MAX_S``), else as one JSON reply bounded by ``MCPQ_SYNC_TIMEOUT_S``."""

    async def stop(reason: str) -> None:
        await abandon(services, req.owner, ref, reason)

    ref = hidden.ref

    async def mrtr(inputs: dict[str, Any]) -> Result:
        return await ask_again(services, req, tool, arguments, hidden, inputs)

    async def cannot_ask(inputs: dict[str, Any]) -> Result:
        # No MRTR before 2026-07-28, and no stream to send the questions on.
        await stop("the tool asked for input on a plain JSON call")
        raise McpError(
            INTERNAL_ERROR, "The tool asks for input: call it accepting text/event-stream"
        )

    if req.session is not None:
        # notifications/cancelled names the request: remember which run it is, for any replica.
        ttl_ms = int(services.settings.session_ttl_s * 1000)
        await services.sessions.put_call(req.session.sref, str(req.id), ref, ttl_ms)
    on_input = mrtr if not req.legacy else None if req.streams else cannot_ask
    # The disconnect flag is read now: a stream runs after this request's context is gone.
    spec = Follow(ref, final=outcome, on_input=on_input, abandon=stop, gone=DISCONNECTED.get())
    if req.streams:
        return StreamReply(follow(services, req, spec))
    spec.limit_s = services.settings.sync_timeout_s
    spec.limit_text = "Tool call did not finish in time (MCPQ_SYNC_TIMEOUT_S); call it as a task"
    return await settle(services, req, spec)


async def await_end(
    services: Services, req: RpcRequest, ref: str, final: Callable[[TaskRecord], Result]
) -> Result:
    """Wait (JSON reply) for a task to end, bounded by ``MCPQ_SYNC_TIMEOUT_S``; its run goes on
    either way (a task, not a call: ``tasks/result`` of a 2025-11-25 client without a stream)."""
    spec = Follow(
        ref,
        final=final,
        limit_s=services.settings.sync_timeout_s,
        limit_text="The task has not ended yet: call tasks/result again, or accept SSE",
    )
    return await settle(services, req, spec)


async def abandon(services: Services, owner: str, ref: str, reason: str) -> None:
    await services.tasks.cancel(owner, ref, reason)
