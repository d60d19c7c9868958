"""The params of the MCP methods, checked once each: every rule for a param lives here, and a
bad one is ``-32602`` (HTTP 400) before anything is read or written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpq.frontend.jsonrpc import RpcRequest
from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import invalid_params
from mcpq.shared.protocol import LEGACY_TASKS_VERSION

_ACTIONS = {"accept", "decline", "cancel"}


@dataclass(frozen=True)
class ToolCallParams:
    """``tools/call``'s params, read and checked once, before anything else of the call."""

    name: str
    arguments: dict[str, Any]
    #: An MRTR retry: the sealed state echoed back (``None``: a first call), and the answers.
    request_state: object | None
    responses: dict[str, Any]
    #: 2025-11-25 ``params.task``: ``None`` for a plain call (or an older version, which has
    #: none), else the client's TTL wish (``task.ttl``, ms; ``None``: none given).
    task: TaskParam | None


@dataclass(frozen=True)
class TaskParam:
    ttl_ms: int | None


def tool_call(rpc: RpcRequest, max_arguments_bytes: int) -> ToolCallParams:
    # MRTR is 2026-07-28's: a 2025-era request's requestState / inputResponses mean nothing
    # and are ignored, as any unknown field.
    mrtr = not rpc.legacy
    name = _tool_name(rpc)
    responses = input_responses(rpc, required=False) if mrtr else {}
    task = _task(rpc)
    return ToolCallParams(
        name=name,
        arguments=_tool_arguments(rpc, max_arguments_bytes),
        request_state=rpc.params.get("requestState") if mrtr else None,
        responses=responses,
        task=task,
    )


def task_id(rpc: RpcRequest) -> str:
    value = rpc.params.get("taskId")
    if not isinstance(value, str) or not value:
        raise invalid_params("Invalid params: taskId must be a non-empty string")
    return value


def _tool_name(rpc: RpcRequest) -> str:
    value = rpc.params.get("name")
    if not isinstance(value, str):
        raise invalid_params("Invalid params: name must be a string")
    return value


def _tool_arguments(rpc: RpcRequest, max_bytes: int) -> dict[str, Any]:
    value = rpc.params.get("arguments")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_params("Invalid params: arguments must be an object")
    try:
        check_bytes("arguments", value, max_bytes, "MCPQ_MAX_ARGUMENTS_BYTES")
    except LimitExceeded as exc:
        raise invalid_params(f"Invalid params: {exc}") from None
    return value


def _task(rpc: RpcRequest) -> TaskParam | None:
    """``params.task`` of a 2025-11-25 session (any other request's is ignored, as any unknown
    field)."""
    if not rpc.legacy or rpc.version < LEGACY_TASKS_VERSION:
        return None
    task = _object(rpc, "task")
    if task is None:
        return None
    ttl = task.get("ttl")
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        raise invalid_params("Invalid params: task.ttl must be a positive integer (ms)")
    return TaskParam(ttl)


def input_responses(rpc: RpcRequest, *, required: bool) -> dict[str, Any]:
    """``inputResponses``: an object of objects, each ``action`` (when given, as elicitation
    answers carry one) one of accept/decline/cancel. ``tasks/update`` requires it; an MRTR retry
    of ``tools/call`` may omit it."""
    value = rpc.params.get("inputResponses")
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


#: The most task ids one ``subscriptions/listen`` request may name.
MAX_LISTEN_TASK_IDS = 100


def listen_task_ids(rpc: RpcRequest) -> list[str] | None:
    """``subscriptions/listen``'s ``notifications.taskIds``, without repeats (``None``: none)."""
    notifications = _object(rpc, "notifications")
    ids = notifications.get("taskIds") if notifications is not None else None
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise invalid_params("Invalid params: notifications.taskIds must be a list of taskIds")
    if len(ids) > MAX_LISTEN_TASK_IDS:
        limit = MAX_LISTEN_TASK_IDS
        raise invalid_params(f"Invalid params: at most {limit} taskIds per subscription")
    return list(dict.fromkeys(ids))


def _object(rpc: RpcRequest, name: str) -> dict[str, Any] | None:
    value = rpc.params.get(name)
    if value is not None and not isinstance(value, dict):
        raise invalid_params(f"Invalid params: {name} must be an object")
    return value
