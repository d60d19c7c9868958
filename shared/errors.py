"""Wire errors: one root exception and one table from JSON-RPC codes to HTTP statuses.

Everything that must reach a client as a JSON-RPC error is raised as :class:`McpError` (or a
subclass) and serialised in exactly one place, the frontend's error responder.
"""

from __future__ import annotations

import secrets
from typing import Any, TypeVar

from mcpq.shared.protocol import TASKS_EXTENSION

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
#: mcpq's own (the spec defines no code for it): a per-principal limit refused the request.
LIMIT_EXCEEDED = -32029

_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    LIMIT_EXCEEDED: 429,
}


_E = TypeVar("_E", bound=BaseException)


def _unpickled(cls: type[_E], args: tuple[Any, ...], state: dict[str, Any]) -> _E:
    """An exception of ``cls`` as it was pickled, built without calling its ``__init__``."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class _Picklable(Exception):
    """An exception that pickles whatever its ``__init__`` takes.

    Python rebuilds a pickled exception as ``cls(*self.args)``, which fails for a subclass
    whose ``__init__`` takes other arguments than it passes on (``StoreUnavailable()`` takes
    none); Celery, which pickles what a task raised, then logs an
    ``UnpickleableExceptionWrapper`` in its place. This one is rebuilt from its ``args`` and
    attributes, without its ``__init__``."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickled, (type(self), self.args, dict(self.__dict__)))


def http_status_for(code: int) -> int:
    """The HTTP status that carries a JSON-RPC error with ``code`` (spec digest §9)."""
    return _HTTP_STATUS.get(code, 200)


def rpc_error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC ``error`` object: the one place its shape is written."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


class McpError(_Picklable):
    """A JSON-RPC error to send to the client as it is."""

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int = 0,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status or http_status_for(code)
        #: HTTP headers the reply carries (``Retry-After``, ``WWW-Authenticate``).
        self.headers = headers or {}

    def to_error(self) -> dict[str, Any]:
        return rpc_error(self.code, self.message, self.data)


class TaskNotFound(McpError):
    """Unknown, expired or another principal's task: all read exactly alike."""

    def __init__(self) -> None:
        super().__init__(INVALID_PARAMS, "Failed to retrieve task: Task not found")


class TaskLost(McpError):
    """A call's own task is gone while the call waited for it: the store lost it (a failover to
    a replica that had not received it yet). Not the client's mistake, and the call may be made
    again: 503, as when the store is away."""

    def __init__(self) -> None:
        text = "the task store lost this call's task: call the tool again"
        super().__init__(INTERNAL_ERROR, text, http_status=503)


class StoreUnavailable(McpError):
    """Redis could not be reached within the configured bound."""

    def __init__(self) -> None:
        super().__init__(INTERNAL_ERROR, "task store unavailable", http_status=503)


def missing_tasks_capability() -> McpError:
    return McpError(
        MISSING_CAPABILITY,
        "Missing required client capability",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def invalid_params(message: str) -> McpError:
    return McpError(INVALID_PARAMS, message)


def new_error_id() -> str:
    """A random name for one unexpected error: the client's message carries it instead of the
    exception's text (which may hold internals), and our log line carries it next to the
    traceback, so an operator finds the one from the other. Random, so it says nothing else."""
    return secrets.token_hex(8)


def internal_error(error_id: str) -> McpError:
    """The web tier's answer to its own unexpected exception: -32603, no detail but the id."""
    return McpError(INTERNAL_ERROR, f"Internal error (error id {error_id})")


def tool_crash_text(tool: str, error_id: str) -> str:
    """What the client reads when a tool raised something other than ``ToolError``."""
    return f"internal error in tool {tool} (error id {error_id})"


class ToolError(Exception):
    """Raised by a tool to end with a tool-level error: ``completed`` with ``isError: true``.

    Its message is meant for the model and reaches the client as it is; any other exception a
    tool raises reaches it only as :func:`tool_crash_text` (its details stay in the worker's log).
    """


class ProtocolError(_Picklable):
    """Raised by a tool to end with a JSON-RPC error: the task becomes ``failed`` with ``error``."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        return rpc_error(self.code, self.message, self.data)


class TaskCancelled(BaseException):
    """Raised inside a tool at its next context call once the task was cancelled.

    A BaseException, so ``except Exception`` in tool code does not swallow it.
    """
