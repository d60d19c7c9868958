"""MRTR before a task: questions a tool declares with ``ask_first`` are answered through
``input_required`` rounds on ``tools/call`` before any task exists. Answers gathered so far
travel inside the signed ``requestState``; no server memory is needed between rounds."""

from __future__ import annotations

import secrets
from typing import Any

from frontend import params
from frontend.envelope import RpcRequest
from frontend.services import Services
from shared import answers
from shared.errors import MISSING_CAPABILITY, McpError, invalid_params
from shared.limits import LimitExceeded
from shared.tools import InputRequest, Tool, missing_capabilities
from shared.wire import InputRequiredResult


def require_capabilities(req: RpcRequest, requests: dict[str, InputRequest]) -> None:
    """Never send an input request type the client did not declare on this request."""
    missing = missing_capabilities(requests.values(), req.caps)
    if missing:
        raise McpError(
            MISSING_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": missing},
        )


def gather(
    services: Services,
    req: RpcRequest,
    tool: Tool,
    arguments: dict[str, Any],
    state: dict[str, Any] | None,
) -> tuple[dict[str, Any], InputRequiredResult | None]:
    """``(answers, None)`` once everything is answered, else ``({}, InputRequiredResult)``."""
    assert tool.ask_first is not None
    requests = tool.ask_first(arguments)
    collected: dict[str, Any] = dict(state.get("answers", {})) if state else {}
    responses = params.input_responses(req, required=False)
    try:
        s = services.settings
        answers.check_sizes(responses, s.max_answers, s.max_answer_bytes)
    except LimitExceeded as exc:
        raise invalid_params(f"Invalid params: {exc}") from None
    for key in requests:
        # First answer wins: a key answered in an earlier round (inside the signed state)
        # cannot be changed by a later retry.
        if key in responses and key not in collected:
            if (why := answers.problem(requests[key], responses[key])) is not None:
                raise invalid_params(f"Invalid params: inputResponses[{key!r}]: {why}")
            collected[key] = responses[key]
    missing = {k: r for k, r in requests.items() if k not in collected}
    if not missing:
        return collected, None
    require_capabilities(req, missing)
    # A random id makes the state single-use: the create it leads to marks it used, in the
    # same script (shared.store Admission), so a replay creates no second task.
    fresh = {"kind": "pre", "answers": collected, "jti": secrets.token_urlsafe(16)}
    token = services.signer.seal(req.owner, req.method, tool.name, arguments, fresh)
    return {}, InputRequiredResult(input_requests=missing, request_state=token)
