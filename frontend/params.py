"""The params of the MCP methods, checked once each: every rule for a param lives here, and a
bad one is ``-32602`` (HTTP 400) before anything is read or written."""

from __future__ import annotations

from typing import Any

from frontend.envelope import RpcRequest
from shared.errors import invalid_params
from shared.limits import LimitExceeded, check_bytes

_ACTIONS = {"accept", "decline", "cancel"}


def task_id(req: RpcRequest) -> str:
    value = req.params.get("taskId")
    if not isinstance(value, str) or not value:
        raise invalid_params("Invalid params: taskId must be a non-empty string")
    return value


def tool_name(req: RpcRequest) -> str:
    value = req.params.get("name")
    if not isinstance(value, str):
        raise invalid_params("Invalid params: name must be a string")
    return value


def tool_arguments(req: RpcRequest, max_bytes: int) -> dict[str, Any]:
    value = req.params.get("arguments")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_params("Invalid params: arguments must be an object")
    try:
        check_bytes("arguments", value, max_bytes, "MCPQ_MAX_ARGUMENTS_BYTES")
    except LimitExceeded as exc:
        raise invalid_params(f"Invalid params: {exc}") from None
    return value


def input_responses(req: RpcRequest, *, required: bool) -> dict[str, Any]:
    """``inputResponses``: an object of objects, each ``action`` (when given, as elicitation
    answers carry one) one of accept/decline/cancel. ``tasks/update`` requires it; an MRTR retry
    of ``tools/call`` may omit it."""
    value = req.params.get("inputResponses")
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise invalid_params("Invalid params: inputResponses must be an object")
    for key, response in value.items():
        if not isinstance(response, dict):
            raise invalid_params(f"Invalid params: inputResponses[{key!r}] must be an object")
        if "action" in response and response["action"] not in _ACTIONS:
            raise invalid_params(f"Invalid params: inputResponses[{key!r}].action is not valid")
    return value
