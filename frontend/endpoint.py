"""The MCP endpoint as a plain async function of :class:`HttpRequest` → :class:`HttpReply`.

Runs the validation ladder, dispatches to the method handlers, adds ``_meta.serverInfo`` to
every result (each result model carries its own ``resultType``), and maps every error to a
JSON-RPC error with its HTTP status in one place. No traceback ever reaches a client.
"""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from frontend import envelope, metrics, transport
from frontend.envelope import Notification, RequestError, RpcRequest
from frontend.http_types import HttpReply, HttpRequest
from frontend.methods import discover, tasks, tools
from frontend.services import REQUEST_ID, Services
from shared import jsonutil
from shared.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, McpError
from shared.logs import task_hash
from shared.protocol import META_SERVER_INFO
from shared.store import task_ref
from shared.wire import Result

log = logging.getLogger("mcpq.web")


class NoId(enum.Enum):
    NO_ID = enum.auto()


NO_ID = NoId.NO_ID
Handler = Callable[[Services, RpcRequest], Awaitable[Result]]

METHODS: dict[str, Handler] = {
    "server/discover": discover.discover,
    "tools/list": tools.list_tools,
    "tools/call": tools.call_tool,
    "tasks/get": tasks.get,
    "tasks/update": tasks.update,
    "tasks/cancel": tasks.cancel,
}


def _server_version() -> str:
    try:
        return version("mcpq")
    except PackageNotFoundError:
        return "0.0.0"


class McpEndpoint:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.server_info = {"name": services.settings.server_name, "version": _server_version()}

    def _reply(
        self,
        rid: int | str | NoId | None,
        *,
        result: Result | None = None,
        error: McpError | None = None,
    ) -> HttpReply:
        """The one place a JSON-RPC response is serialised: an error with its HTTP status, or a
        result (its own ``resultType``) with ``_meta.serverInfo`` added. ``NO_ID`` leaves the
        ``id`` out (a refusal before any JSON was read); ``None`` is an unreadable id."""
        if error is not None:
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "error": error.to_error()}
            if rid is NO_ID:
                del body["id"]
            return HttpReply(error.http_status, jsonutil.dumpb(body))
        assert result is not None
        dumped = result.dump()
        dumped["_meta"] = {**dumped.get("_meta", {}), META_SERVER_INFO: self.server_info}
        return HttpReply(200, jsonutil.dumpb({"jsonrpc": "2.0", "id": rid, "result": dumped}))

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
        fields: dict[str, Any] = {
            "request_id": rid,
            "http_status": reply.status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        if rpc is not None:
            # Never the taskId itself (a bearer token): a short hash of its storage ref.
            fields["method"] = rpc.method
            if rpc.method == "tools/call" and isinstance(rpc.params.get("name"), str):
                fields["tool"] = rpc.params["name"]
            if isinstance(rpc.params.get("taskId"), str):
                fields["task"] = task_hash(task_ref(rpc.params["taskId"]))
        if code is not None:
            fields["error_code"] = code
        # Metric labels only take known methods: a client must not grow our label set.
        method = rpc.method if rpc is not None and rpc.method in METHODS else "other"
        fields.setdefault("method", method)
        metrics.REQUESTS.labels(method, str(reply.status)).inc()
        metrics.LATENCY.labels(method).observe(fields["latency_ms"] / 1000)
        if reply.status == 503:
            metrics.STORE_ERRORS.inc()
        log.info("mcp request", extra=fields)
        return reply

    async def _handle(self, req: HttpRequest) -> tuple[HttpReply, RpcRequest | None, int | None]:
        s = self.services.settings
        early = transport.check(req, s.allowed_origins, s.max_body_bytes)
        if isinstance(early, McpError):
            return self._reply(NO_ID, error=early), None, early.code
        if early is not None:
            return early, None, None
        try:
            rpc = envelope.validate(req, envelope.parse(req.body), s.accept_missing_task_name)
        except Notification:
            return HttpReply(202, b"", None), None, None
        except RequestError as exc:
            return self._reply(exc.id, error=exc.error), None, exc.error.code
        handler = METHODS.get(rpc.method)
        error: McpError
        if handler is None:
            error = McpError(METHOD_NOT_FOUND, f"Method not found: {rpc.method}")
            return self._reply(rpc.id, error=error), rpc, error.code
        try:
            return self._reply(rpc.id, result=await handler(self.services, rpc)), rpc, None
        except McpError as exc:
            error = exc
        except Exception:
            # The traceback goes to our log, never to the client: it could carry internals.
            log.exception("unhandled error", extra={"method": rpc.method})
            error = McpError(INTERNAL_ERROR, "Internal error")
        return self._reply(rpc.id, error=error), rpc, error.code


def _request_id(header: str | None) -> str:
    """The caller's X-Request-Id when it is short and plain, else a fresh one."""
    if header and len(header) <= 64 and header.replace("-", "").isalnum():
        return header
    return uuid.uuid4().hex[:16]
