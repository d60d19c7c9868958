"""JSON-RPC parsing and the validation ladder (spec digest §3.4), transport checks aside.

Order: parse (-32700) → single request envelope (-32600) → notification (202) → duplicate routing
headers (-32020) → ``_meta`` envelope (-32602) → headers vs body (-32020) → protocol version
(-32022). Method lookup, params and the capability gate follow in the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from mcpq.frontend import routing_headers
from mcpq.frontend.http_messages import HttpRequest
from mcpq.frontend.principal import ANONYMOUS, Principal
from mcpq.shared.bounds import LimitExceeded, check_raw_depth
from mcpq.shared.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    McpError,
)
from mcpq.shared.protocol import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    TASKS_EXTENSION,
)
from mcpq.shared.tool_context import LOG_LEVELS

if TYPE_CHECKING:
    from mcpq.shared.store import Session


class Notification(Exception):
    """The POST carried a notification: answer 202 with no body."""


@dataclass
class RpcRequest:
    """A validated request. ``caps`` are the client's capabilities: from this request's
    ``_meta`` (2026-07-28), or as the session declared them in ``initialize`` (2025-era)."""

    id: int | str
    method: str
    params: dict[str, Any]
    caps: dict[str, Any]
    version: str = PROTOCOL_VERSION
    session: Session | None = None
    streams: bool = False  # the client accepts an SSE reply (text/event-stream)
    #: The authenticated caller: every task this request creates or touches is bound to it.
    #: Carried on the request, never in a context variable: streams outlive the request.
    principal: Principal = ANONYMOUS

    @property
    def owner(self) -> str:
        """The owner id the store compares (``Principal.id``)."""
        return self.principal.id

    @property
    def legacy(self) -> bool:
        """A request of a 2025-era session."""
        return self.session is not None

    @property
    def progress_token(self) -> str | int | None:
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        valid = isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool))
        return token if valid else None

    @property
    def log_level(self) -> str | None:
        """The least severe log level this request's stream may carry as
        ``notifications/message``, or ``None`` for none: on 2026-07-28, what the request set in
        ``_meta["io.modelcontextprotocol/logLevel"]`` (no level, no messages: the spec's rule);
        on a 2025-era session, what ``logging/setLevel`` set, and every level until then (the
        spec leaves that to the server)."""
        if self.session is not None:
            return self.session.log_level or "debug"
        meta = self.params.get("_meta")
        level = meta.get(META_LOG_LEVEL) if isinstance(meta, dict) else None
        return level if level in LOG_LEVELS else None

    @property
    def tasks_opt_in(self) -> bool:
        extensions = self.caps.get("extensions")
        return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


@dataclass
class RequestError(Exception):
    """A validation failure, with the request id when one was readable."""

    error: McpError
    id: int | str | None


def parse(body: bytes, max_depth: int) -> dict[str, Any]:
    try:
        # On the bytes, before anything recurses: the parser itself (orjson fails past 1024
        # levels), then pydantic and Lua's cjson on what it returns.
        check_raw_depth(body, max_depth)
    except LimitExceeded as exc:
        # Nothing was parsed, so no id can be echoed: the message is refused as a whole.
        raise RequestError(McpError(INVALID_REQUEST, f"Invalid Request: {exc}"), None) from None
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:  # also orjson's own recursion limit, and bytes not UTF-8
        raise RequestError(
            McpError(PARSE_ERROR, "Parse error: body is not valid JSON"), None
        ) from None
    if not isinstance(message, dict):
        raise RequestError(
            McpError(INVALID_REQUEST, "Invalid Request: expected one JSON-RPC request object"), None
        )
    return message


def request_id(message: dict[str, Any]) -> int | str:
    rid = message.get("id")
    # JSON-RPC ids are strings or numbers; True is an int in Python but not an id.
    valid = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str) or not valid:
        raise RequestError(
            McpError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request"), None
        )
    return rid  # type: ignore[return-value]


def accepts_stream(req: HttpRequest) -> bool:
    """The client takes an SSE reply (its ``Accept`` lists ``text/event-stream``)."""
    accept = (req.header("accept") or "").lower()
    return any(part.split(";")[0].strip() == "text/event-stream" for part in accept.split(","))


def validate(
    req: HttpRequest,
    message: dict[str, Any],
    require_task_name: bool,
    param_headers: Callable[[str], dict[str, str]] = lambda tool: {},
) -> RpcRequest:
    """``param_headers``: a tool's ``x-mcp-header`` properties by its name (SEP-2243)."""
    # A notification gets 202 before anything else is checked: it has no id to answer with.
    if "id" not in message and isinstance(message.get("method"), str):
        raise Notification()
    rid = request_id(message)
    method: str = message["method"]
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise RequestError(
            McpError(INVALID_PARAMS, "Invalid params: params must be an object"), rid
        )
    try:
        # Before _meta: an intermediary may route on the first of two routing headers while we
        # would read the other, so a duplicate is refused whatever the body says.
        routing_headers.reject_duplicates(req)
    except McpError as exc:
        raise RequestError(exc, rid) from None
    meta = params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    caps = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    if not isinstance(version, str) or not isinstance(caps, dict):
        text = "Invalid params: _meta must carry protocolVersion and clientCapabilities"
        raise RequestError(McpError(INVALID_PARAMS, text), rid)
    try:
        routing_headers.check(req, method, params, version, require_task_name)
        if method == "tools/call" and isinstance(params.get("name"), str):
            headers = param_headers(params["name"])
            if headers:
                routing_headers.check_params(req, params, headers)
    except McpError as exc:
        raise RequestError(exc, rid) from None
    # The version is judged after the headers agree with the body: a mismatch is -32020 even
    # for a version we do not speak (the spec's ladder order).
    if version not in SUPPORTED_VERSIONS:
        data = {"supported": SUPPORTED_VERSIONS, "requested": version}
        raise RequestError(McpError(UNSUPPORTED_VERSION, "Unsupported protocol version", data), rid)
    # A level the spec does not name is refused, as logging/setLevel refuses one (-32602):
    # ignoring it would silently send no messages to a client that asked for them.
    level = meta.get(META_LOG_LEVEL, LOG_LEVELS[0]) if isinstance(meta, dict) else LOG_LEVELS[0]
    if level not in LOG_LEVELS:
        text = f"Invalid params: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}"
        raise RequestError(McpError(INVALID_PARAMS, text), rid)
    return RpcRequest(
        rid, method, params, caps, streams=accepts_stream(req), principal=req.principal
    )
