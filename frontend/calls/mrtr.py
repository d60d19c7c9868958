"""MRTR before a task: the questions a tool declares with ``ask_first`` are answered through
``input_required`` rounds of ``tools/call`` before any task exists. The answers gathered so far
travel inside the sealed ``requestState`` (``mcpq.frontend.calls.state``): no server memory is
needed between rounds, and any replica serves the next one."""

from __future__ import annotations

import secrets
from typing import Any

from mcpq.frontend.calls.state import Gathering, StateSeal
from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.frontend.services import Services
from mcpq.shared import answers
from mcpq.shared.errors import MISSING_CAPABILITY, McpError
from mcpq.shared.tools import InputRequest, first_questions, missing_capabilities
from mcpq.shared.wire import InputRequiredResult


def require_capabilities(rpc: RpcRequest, requests: dict[str, InputRequest]) -> None:
    """Never send an input request of a type the client did not declare on this request."""
    missing = missing_capabilities(requests.values(), rpc.caps)
    if missing:
        raise McpError(
            MISSING_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": missing},
        )


def next_round(
    services: Services,
    rpc: RpcRequest,
    requests: dict[str, InputRequest],
    collected: dict[str, Any],
    responses: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, InputRequest]]:
    """The answers so far with this round's added, and the questions still open (each one the
    client can answer, else -32003). Shared by ``tools/call`` and ``prompts/get``."""
    # First answer wins: a key answered in an earlier round (inside the sealed state) cannot
    # be changed by a later retry, so only the keys still open are taken from this one.
    still_open = {key: request for key, request in requests.items() if key not in collected}
    s = services.settings
    collected = collected | answers.accept(still_open, responses, s.max_answers, s.max_answer_bytes)
    missing = {key: request for key, request in still_open.items() if key not in collected}
    if missing:
        require_capabilities(rpc, missing)
    return collected, missing


def gather(
    services: Services,
    seal: StateSeal,
    responses: dict[str, Any],
    state: Gathering | None,
) -> Gathering | InputRequiredResult:
    """Everything answered: the answers, with the ``Once`` of the state that carried them (the
    create marks it used). Else the next round: the questions still open, and a fresh state."""
    tool = seal.tool
    assert tool.ask_first is not None
    requests = first_questions(tool.ask_first, seal.arguments, seal.rpc.caps)
    so_far: dict[str, Any] = dict(state.answers) if state is not None else {}
    collected, missing = next_round(services, seal.rpc, requests, so_far, responses)
    if not missing:
        return Gathering(collected, state.once if state is not None else None)
    # A random id makes the state single-use: the create it leads to marks it used, in the
    # same script (mcpq.shared.store Admission), so a replay creates no second task.
    token = seal.gathering(collected, secrets.token_urlsafe(16))
    return InputRequiredResult(input_requests=missing, request_state=token)
