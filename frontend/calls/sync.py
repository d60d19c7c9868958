"""A ``tools/call`` answered synchronously (no Tasks opt-in, or a ``never`` tool).

The call still runs on a worker, as a hidden task; the web tier follows it (``frontend.streams``:
the task's pub/sub channel, never blocking the event loop), on an SSE stream when the client takes
one, else for one JSON reply bounded by ``MCPQ_SYNC_TIMEOUT_S``. A tool that asks for input
mid-run turns into MRTR (2026-07-28): ``input_required`` with a sealed ``requestState`` naming the
hidden task (``mcpq.frontend.calls.state.RunningCall``), and the retry's answers are delivered to it
(:func:`resume`); a 2025-era stream asks the client directly instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpq.frontend.calls.mrtr import require_capabilities
from mcpq.frontend.calls.state import RunningCall, StateSeal
from mcpq.frontend.services import DISCONNECTED, REQUEST_ID, Services
from mcpq.frontend.streams import Follow, StreamReply, follow, settle
from mcpq.frontend.task_service import Once
from mcpq.shared.errors import INTERNAL_ERROR, McpError, TaskNotFound, invalid_params
from mcpq.shared.request_state import arguments_digest
from mcpq.shared.store import Reply
from mcpq.shared.wire import InputRequiredResult, Result, call_outcome


@dataclass(frozen=True)
class Hidden:
    """A synchronous call's hidden task: its secret id, and when it expires (epoch ms)."""

    task_id: str
    expires_ms: int | None


async def start(
    services: Services, seal: StateSeal, pre: dict[str, Any], once: Once | None
) -> Result | StreamReply:
    rpc = seal.rpc
    created = await services.tasks.create(
        rpc.owner,
        seal.tool,
        seal.arguments,
        rpc.caps,
        pre,
        sync=True,
        request_id=REQUEST_ID.get(),
        once=once,
    )
    return await _follow(services, seal, Hidden(created.task_id, created.expires_ms))


async def resume(
    services: Services, seal: StateSeal, state: RunningCall, responses: dict[str, Any]
) -> Result | StreamReply:
    """The MRTR retry of a synchronous call that asked for input: deliver its answers to the
    hidden task the sealed state names, then follow it again.

    The task must be what the state claims: a hidden synchronous task of this principal, for
    this tool and these arguments. Anything else reads as expired."""
    rpc, tool = seal.rpc, seal.tool
    gone = invalid_params("Invalid params: requestState refers to a call that has expired")
    try:
        record, _ = await services.tasks.get(rpc.owner, state.task_id, call=True)  # its arguments
    except TaskNotFound:
        raise gone from None
    digest = arguments_digest(tool.name, seal.arguments)
    if not record.sync or arguments_digest(record.tool, record.arguments) != digest:
        raise gone
    answered = await services.tasks.answer(rpc.owner, state.task_id, responses, REQUEST_ID.get())
    if answered.reply is Reply.NOTFOUND:
        raise gone
    expires = None if record.ttl_ms is None else record.created_ms + record.ttl_ms
    return await _follow(services, seal, Hidden(state.task_id, expires))


async def _follow(services: Services, seal: StateSeal, hidden: Hidden) -> Result | StreamReply:
    """Follow the hidden task to its end (``mcpq.frontend.streams``): on an SSE stream when the
    client takes one (progress, keep-alives, input requests on a 2025-era session; bounded by
    ``MCPQ_STREAM_MAX_S``), else as one JSON reply bounded by ``MCPQ_SYNC_TIMEOUT_S``."""
    rpc, tasks = seal.rpc, services.tasks

    async def stop(reason: str) -> None:
        await tasks.cancel(rpc.owner, hidden.task_id, reason)

    async def ask_again(inputs: dict[str, Any]) -> Result:
        """MRTR for the running call (2026-07-28): the questions, and a sealed state that
        carries the hidden task's secret id, so only the same call's retry can answer it."""
        try:
            require_capabilities(rpc, inputs)
        except McpError:
            await stop("client cannot answer the tool's input request")
            raise
        token = seal.running(hidden.task_id, hidden.expires_ms)
        return InputRequiredResult(input_requests=inputs, request_state=token)

    async def cannot_ask(inputs: dict[str, Any]) -> Result:
        # No MRTR before 2026-07-28, and no stream to send the questions on.
        await stop("the tool asked for input on a plain JSON call")
        raise McpError(
            INTERNAL_ERROR, "The tool asks for input: call it accepting text/event-stream"
        )

    if rpc.session is not None:
        # notifications/cancelled names the request: remember which run it is, for any replica.
        await tasks.remember_call(rpc.session, rpc.id, hidden.task_id)
    on_input = ask_again if not rpc.legacy else None if rpc.streams else cannot_ask
    # The disconnect flag is read now: a stream runs after this request's context is gone.
    spec = Follow(
        hidden.task_id,
        final=call_outcome,
        on_input=on_input,
        abandon=stop,
        gone=DISCONNECTED.get(),
        owned=True,
    )
    if rpc.streams:
        return StreamReply(follow(services, rpc, spec))
    spec.limit_s = services.settings.sync_timeout_s
    spec.limit_text = "Tool call did not finish in time (MCPQ_SYNC_TIMEOUT_S); call it as a task"
    return await settle(services, rpc, spec)
