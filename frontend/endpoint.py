"""The MCP endpoint as a plain async function of :class:`HttpRequest` → :class:`HttpReply`.

Runs the transport checks, tells the eras apart (a 2025-era session's messages go to
:class:`mcpq.frontend.legacy.session.LegacyEndpoint`), runs the 2026-07-28 validation ladder,
dispatches to the method handlers and serialises every reply (``frontend.replies``): a JSON body,
or an SSE stream when a handler streams. Every error becomes a JSON-RPC error with its HTTP
status. No traceback ever reaches a client.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from typing import Any

from mcpq.frontend import http_checks, jsonrpc, methods, replies, web_metrics
from mcpq.frontend.auth import AuthFailed
from mcpq.frontend.http_messages import HttpReply, HttpRequest
from mcpq.frontend.jsonrpc import Notification, RequestError, RpcRequest
from mcpq.frontend.legacy.session import LegacyEndpoint, is_legacy
from mcpq.frontend.rate_limits import FloodShield
from mcpq.frontend.request_spans import traced
from mcpq.frontend.services import REQUEST_ID, Services
from mcpq.frontend.streams import StreamReply
from mcpq.shared import jsonutil
from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import (
    METHOD_NOT_FOUND,
    McpError,
    internal_error,
    invalid_params,
    new_error_id,
)
from mcpq.shared.logs import task_hash
from mcpq.shared.store import task_ref
from mcpq.shared.wire import Result

log = logging.getLogger("mcpq.web")


class NoId(enum.Enum):
    NO_ID = enum.auto()


NO_ID = NoId.NO_ID
CAPS_SETTING = "MCPQ_MAX_CAPABILITIES_BYTES"
#: Every method name a metric label may take (a client must not grow our label set).
KNOWN_METHODS = {"initialize", *methods.ROUTES}


class McpEndpoint:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.server_info = services.server_info
        self.legacy = LegacyEndpoint(services)
        self.shield = FloodShield()
        self.addressing = http_checks.Addressing.from_settings(services.settings)

    def _reply(
        self,
        rid: int | str | NoId | None,
        *,
        result: Result | StreamReply | None = None,
        error: McpError | None = None,
    ) -> HttpReply:
        """A 2026-07-28 reply: an error with its HTTP status, a result (``mcpq.frontend.replies``),
        or a stream. ``NO_ID`` leaves the ``id`` out (a refusal before any JSON was read);
        ``None`` is an unreadable id."""
        if isinstance(result, StreamReply):
            return HttpReply(200, b"", "text/event-stream", stream=result.events)
        if error is not None:
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "error": error.to_error()}
            if rid is NO_ID:
                del body["id"]
            return HttpReply(error.http_status, jsonutil.dumpb(body), headers=dict(error.headers))
        assert result is not None and not isinstance(rid, NoId)
        message = replies.response(rid, result=result, server_info=self.server_info)
        return HttpReply(200, jsonutil.dumpb(message))

    async def handle(self, req: HttpRequest) -> HttpReply:
        """Serve one POST and log one structured line for it (never the taskId itself)."""
        started = time.perf_counter()
        rid = _request_id(req.header("x-request-id"))
        token = REQUEST_ID.set(rid)
        try:
            reply, rpc, code = await self._handle(req)
        finally:
            REQUEST_ID.reset(token)
        reply.headers["X-Request-Id"] = rid
        latency_s = time.perf_counter() - started
        # Metric labels only take known methods: a client must not grow our label set.
        method = rpc.method if rpc is not None and rpc.method in KNOWN_METHODS else "other"
        web_metrics.observe_request(method, reply.status, latency_s)
        if log.isEnabledFor(logging.INFO):  # the fields cost a hash per request: only if logged
            log.info("mcp request", extra=_log_fields(rid, reply, rpc, code, method, latency_s))
        return reply

    async def _handle(self, req: HttpRequest) -> tuple[HttpReply, RpcRequest | None, int | None]:
        s = self.services.settings
        early = http_checks.check(req, self.addressing, s.max_body_bytes)
        if isinstance(early, McpError):
            return self._reply(NO_ID, error=early), None, early.code
        if early is not None:
            return early, None, None
        if (flooding := self.shield.check(req)) is not None:
            web_metrics.LIMIT_REJECTIONS.labels("rate").inc()
            return self._reply(NO_ID, error=flooding), None, flooding.code
        # Authentication before the body is parsed: nothing of an unauthenticated request is
        # looked at beyond its size and origin (every method, GET and DELETE included).
        auth = self.services.auth
        try:
            req.principal = await auth.authenticate(req)
        except AuthFailed as failed:
            return auth.reply(failed), None, None
        except McpError as exc:  # the key store is unavailable: 503, not a refusal
            return self._reply(NO_ID, error=exc), None, exc.code
        if req.method == "DELETE":
            return await self.legacy.end(req), None, None
        if req.method == "GET":
            return await self.legacy.listen(req), None, None
        try:
            message = jsonrpc.parse(req.body, s.max_json_depth)
        except RequestError as exc:
            return self._reply(exc.id, error=exc.error), None, exc.error.code
        if is_legacy(req, message):
            # A 2025-era message: its span (when tracing is on) around the session's handling.
            method, params = _method_and_params(message)
            version = req.header("mcp-protocol-version")
            rid = message.get("id") if isinstance(message, dict) else None
            legacy = self.legacy
            return await traced(
                req, method, params, version, rid, lambda: legacy.handle(req, message)
            )
        try:
            rpc = jsonrpc.validate(req, message, s.require_task_name, self._param_headers)
        except Notification:
            return HttpReply(202, b"", None), None, None
        except RequestError as exc:
            return self._reply(exc.id, error=exc.error), None, exc.error.code
        return await traced(
            req, rpc.method, rpc.params, rpc.version, rpc.id, lambda: self._dispatch(rpc, req)
        )

    def _param_headers(self, tool_name: str) -> dict[str, str]:
        """The ``x-mcp-header`` arguments of a served tool (none for an unknown one: the tool
        gate refuses it later, with its own error)."""
        tool = self.services.registry.get(tool_name)
        return tool.param_headers if tool is not None else {}

    async def _dispatch(
        self, rpc: RpcRequest, req: HttpRequest
    ) -> tuple[HttpReply, RpcRequest | None, int | None]:
        """Method lookup (-32601/404), then the handler; every error it raises becomes a reply."""
        s = self.services.settings
        handler = methods.handler(rpc.method, rpc.version)
        error: McpError
        if handler is None:
            error = McpError(METHOD_NOT_FOUND, f"Method not found: {rpc.method}")
            return self._reply(rpc.id, error=error), rpc, error.code
        try:
            check_bytes("clientCapabilities", rpc.caps, s.max_capabilities_bytes, CAPS_SETTING)
            return self._reply(rpc.id, result=await handler(self.services, rpc)), rpc, None
        except McpError as exc:
            error = exc
            self.shield.remember(req, exc)
            if exc.http_status == 503:
                # Why this call must be retried (the store away, its pool or its pub/sub slow,
                # a task lost in a failover): the client's reply says only "try again".
                log.warning("call refused for now", extra={"method": rpc.method, **why(exc)})
        except LimitExceeded as exc:
            error = invalid_params(f"Invalid params: {exc}")
        except Exception:
            # The traceback goes to our log, never to the client: it could carry internals.
            # The client gets an id that finds this line in the log.
            error_id = new_error_id()
            log.exception("unhandled error", extra={"method": rpc.method, "error_id": error_id})
            error = internal_error(error_id)
        return self._reply(rpc.id, error=error), rpc, error.code


def _method_and_params(message: Any) -> tuple[str, dict[str, Any]]:
    """A 2025-era message's method and params, as far as they are readable (for its span)."""
    if not isinstance(message, dict):
        return "batch", {}
    method, params = message.get("method"), message.get("params")
    name = method if isinstance(method, str) and method in KNOWN_METHODS else "other"
    if not isinstance(method, str):
        name = "response"  # a client's answer to one of the server's requests
    return name, params if isinstance(params, dict) else {}


def _log_fields(
    rid: str,
    reply: HttpReply,
    rpc: RpcRequest | None,
    code: int | None,
    method: str,
    latency_s: float,
) -> dict[str, Any]:
    """A request's log line: never the taskId itself (a bearer token), a short hash of its
    storage ref."""
    fields: dict[str, Any] = {
        "request_id": rid,
        "http_status": reply.status,
        "latency_ms": round(latency_s * 1000, 2),
    }
    if rpc is not None:
        fields["method"] = rpc.method
        if rpc.method == "tools/call" and isinstance(rpc.params.get("name"), str):
            fields["tool"] = rpc.params["name"]
        if isinstance(rpc.params.get("taskId"), str):
            fields["task"] = task_hash(task_ref(rpc.params["taskId"]))
    if code is not None:
        fields["error_code"] = code
    fields.setdefault("method", method)
    return fields


def why(exc: BaseException) -> dict[str, str]:
    """A 503's reason for the log: the error, and what caused it (redis-py's words: a host
    and port at most, never a command or its arguments)."""
    fields = {"error": type(exc).__name__}
    cause = exc.__cause__
    if cause is not None:
        fields["cause"] = f"{type(cause).__name__}: {str(cause)[:120]}"
    return fields


def _request_id(header: str | None) -> str:
    """The caller's X-Request-Id when it is short and plain, else a fresh one."""
    if header and len(header) <= 64 and header.replace("-", "").isalnum():
        return header
    return os.urandom(8).hex()  # 16 hex digits, as before, without building a UUID
