"""2025-era connections: ``initialize``, the ``Mcp-Session-Id`` session, and every message a
session's client POSTs (requests, notifications, and responses to the server's own requests).

Telling the eras apart (``is_legacy``): a body with the 2026-07-28 ``_meta`` envelope is served
as today whatever else it carries; otherwise ``initialize``, an ``Mcp-Session-Id`` header, a
JSON-RPC response, or a 2025 ``MCP-Protocol-Version`` header make it a 2025-era message.

Sessions live in Redis (``mcpq.shared.store.sessions``), so any replica serves any session: an
unknown or expired one is HTTP 404 (the client starts over with ``initialize``); ``DELETE`` ends
one. JSON-RPC errors go out with HTTP 200, as 2025-era clients expect (their transports treat a
4xx as a broken connection, not as an answer).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcpq.frontend import jsonrpc, methods, notices, replies, streams
from mcpq.frontend.http_messages import HttpReply, HttpRequest
from mcpq.frontend.jsonrpc import RequestError, RpcRequest
from mcpq.frontend.legacy.methods import initialized
from mcpq.frontend.services import DISCONNECTED, REQUEST_ID, Services
from mcpq.frontend.streams import StreamReply
from mcpq.shared import jsonutil
from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    McpError,
    internal_error,
    new_error_id,
)
from mcpq.shared.protocol import (
    LEGACY_LATEST,
    LEGACY_TASKS_VERSION,
    LEGACY_VERSIONS,
    META_PROTOCOL_VERSION,
)
from mcpq.shared.store import Session, task_ref
from mcpq.shared.wire import LegacyTask, legacy_dump

log = logging.getLogger("mcpq.web")

SESSION_HEADER = "Mcp-Session-Id"
#: JSON-RPC error code of an unknown session, as the SDKs send it (with HTTP 404).
SESSION_NOT_FOUND = -32001
CAPS_SETTING = "MCPQ_MAX_CAPABILITIES_BYTES"


def is_legacy(req: HttpRequest, message: dict[str, Any]) -> bool:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta:
        return False  # the 2026-07-28 envelope decides, whatever the headers say
    if message.get("method") == "initialize" or req.header("mcp-session-id") is not None:
        return True
    if "method" not in message and ("result" in message or "error" in message):
        return True  # a response to one of our requests
    return req.header("mcp-protocol-version") in LEGACY_VERSIONS


def negotiate(requested: Any) -> str:
    """The client's version when we speak it, else the newest we speak (the client then
    decides whether it can go on)."""
    return requested if requested in LEGACY_VERSIONS else LEGACY_LATEST


def listing_scope(principal: str, sref: str) -> str:
    """Whose tasks ``tasks/list`` shows: the principal's once authentication names one; an
    anonymous client sees its own session's tasks only (ids are bearer tokens: anonymous
    clients must not list each other's)."""
    if principal == "anonymous":
        return f"s.{sref}"
    return "p." + hashlib.sha256(principal.encode()).hexdigest()[:32]


class LegacyEndpoint:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.ttl_ms = int(services.settings.session_ttl_s * 1000)

    # -- replies ---------------------------------------------------------------------------------
    def reply(
        self,
        rid: int | str | None,
        *,
        result: Any = None,
        error: McpError | None = None,
        headers: dict[str, str] | None = None,
    ) -> HttpReply:
        message = replies.response(
            rid, result=result, error=error, server_info=self.services.server_info, legacy=True
        )
        # 2025-era errors travel with 200, but those the HTTP layer must see: an outage (5xx),
        # a refused scope (403) or a limit (429, with its Retry-After).
        status = 200
        if error is not None and (error.http_status >= 500 or error.http_status in {403, 429}):
            status = error.http_status
        extra = dict(error.headers) if error is not None else {}
        return HttpReply(status, jsonutil.dumpb(message), headers={**extra, **(headers or {})})

    def _refuse(self, status: int, code: int, text: str) -> HttpReply:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}
        return HttpReply(status, jsonutil.dumpb(body))

    # -- the way in ------------------------------------------------------------------------------
    async def handle(
        self, req: HttpRequest, message: dict[str, Any]
    ) -> tuple[HttpReply, RpcRequest | None, int | None]:
        if message.get("method") == "initialize" and "id" in message:
            return await self._initialize(req, message)
        session = await self.session_of(req)
        if isinstance(session, HttpReply):
            return session, None, None
        if "method" not in message:
            refused = await self._route_response(session, message)
            if refused is not None:  # the answer does not fit its request: say why, keep asking
                return self._refuse(400, refused.code, refused.message), None, refused.code
            return HttpReply(202, b"", None), None, None
        if "id" not in message:
            await self._notification(session, message)
            return HttpReply(202, b"", None), None, None
        try:
            rid = jsonrpc.request_id(message)
        except RequestError as exc:
            return self.reply(None, error=exc.error), None, exc.error.code
        params = message.get("params", {})
        if not isinstance(params, dict):
            error = McpError(INVALID_PARAMS, "Invalid params: params must be an object")
            return self.reply(rid, error=error), None, error.code
        rpc = RpcRequest(
            rid,
            message["method"],
            params,
            session.caps,
            version=session.version,
            session=session,
            streams=jsonrpc.accepts_stream(req),
            principal=req.principal,
        )
        return await self._dispatch(rpc), rpc, None

    async def _dispatch(self, rpc: RpcRequest) -> HttpReply:
        handler = methods.handler(rpc.method, rpc.version)
        if handler is None:
            error = McpError(METHOD_NOT_FOUND, f"Method not found: {rpc.method}")
            return self.reply(rpc.id, error=error)
        try:
            result = await handler(self.services, rpc)
        except McpError as exc:
            return self.reply(rpc.id, error=exc)
        except LimitExceeded as exc:
            return self.reply(rpc.id, error=McpError(INVALID_PARAMS, f"Invalid params: {exc}"))
        except Exception:
            # As in the 2026-07-28 endpoint: the traceback to our log, an id to the client.
            error_id = new_error_id()
            log.exception("unhandled error", extra={"method": rpc.method, "error_id": error_id})
            return self.reply(rpc.id, error=internal_error(error_id))
        if isinstance(result, StreamReply):
            return HttpReply(200, b"", "text/event-stream", stream=result.events)
        return self.reply(rpc.id, result=result)

    # -- sessions --------------------------------------------------------------------------------
    async def _initialize(
        self, req: HttpRequest, message: dict[str, Any]
    ) -> tuple[HttpReply, RpcRequest | None, int | None]:
        try:
            rid = jsonrpc.request_id(message)
        except RequestError as exc:
            return self.reply(None, error=exc.error), None, exc.error.code
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("capabilities", {}), dict):
            error = McpError(INVALID_PARAMS, "Invalid params: initialize needs capabilities")
            return self.reply(rid, error=error), None, error.code
        limit = self.services.settings.max_capabilities_bytes
        try:
            check_bytes("capabilities", params.get("capabilities"), limit, CAPS_SETTING)
        except LimitExceeded as exc:
            error = McpError(INVALID_PARAMS, f"Invalid params: {exc}")
            return self.reply(rid, error=error), None, error.code
        version = negotiate(params.get("protocolVersion"))
        session_id = secrets.token_urlsafe(32)  # a bearer, like a taskId: stored hashed
        sref = task_ref(session_id)
        principal = req.principal.id
        session = Session(
            sref,
            version,
            dict(params.get("capabilities") or {}),
            principal,
            listing_scope(principal, sref),
        )
        await self.services.sessions.open(session, self.ttl_ms)
        rpc = RpcRequest(
            rid,
            "initialize",
            params,
            session.caps,
            version=version,
            session=session,
            principal=req.principal,
        )
        result = initialized(self.services, version)
        log.info("session opened", extra={"protocol_version": version})
        return self.reply(rid, result=result, headers={SESSION_HEADER: session_id}), rpc, None

    async def session_of(self, req: HttpRequest) -> Session | HttpReply:
        """The request's session (its TTL slid forward), or the reply that refuses it."""
        session_id = req.header("mcp-session-id")
        if session_id is None:
            return self._refuse(
                400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"
            )
        session = await self.services.sessions.touch(task_ref(session_id), self.ttl_ms)
        # A session belongs to whoever opened it: another principal holding its id (a bearer
        # value, but one that may leak) gets exactly the answer for an unknown session.
        if session is None or session.principal != req.principal.id:
            return self._refuse(404, SESSION_NOT_FOUND, "Session not found")
        version = req.header("mcp-protocol-version")
        if version is not None and version != session.version:
            text = f"Bad Request: MCP-Protocol-Version {version!r} is not this session's"
            return self._refuse(400, INVALID_REQUEST, text)
        return session

    async def end(self, req: HttpRequest) -> HttpReply:
        """``DELETE /mcp``: the session ends; its tasks do not (they have their own TTL)."""
        session = await self.session_of(req)
        if isinstance(session, HttpReply):
            return session
        if not await self.services.sessions.end(session.sref):
            return self._refuse(404, SESSION_NOT_FOUND, "Session not found")
        return HttpReply(204, b"", None)

    async def listen(self, req: HttpRequest) -> HttpReply:
        """``GET /mcp``: the session's standalone stream, on any replica. Every session hears
        ``notifications/<list>/list_changed`` (tools, prompts, resources: a deploy changed what
        the server serves) and ``notifications/resources/updated {uri}`` for the resources it
        subscribed to (``resources/subscribe``, on any replica, before or while it streams); a
        2025-11-25 session also ``notifications/tasks/status`` (the full task) for each change
        of a task it created."""
        session = await self.session_of(req)
        if isinstance(session, HttpReply):
            return session
        if not jsonrpc.accepts_stream(req):
            text = b"Not Acceptable: the GET stream needs Accept: text/event-stream"
            return HttpReply(406, text, "text/plain; charset=utf-8")
        services = self.services
        tasks, sessions, events = services.tasks, services.sessions, services.events
        principal, sref = session.principal, session.sref
        # Authorization at delivery is this request's: a token with fewer scopes than the one
        # that subscribed hears of no resource it could not read.
        caller = req.principal

        async def render(entry: str) -> dict[str, Any] | None:
            notice = notices.notice_of(entry)
            if notice is None:  # a task of the session's listing scope
                listed = await tasks.listed(session.scope, entry, principal)
                if listed is None:
                    return None
                task = legacy_dump(LegacyTask.of(listed.record, listed.task_id))
                return replies.notification("notifications/tasks/status", task)
            if notice.kind == "list":
                return notices.list_changed(notice.name)
            uri = await events.subscribed_uri(sref, notice.name)  # None: unsubscribed since
            if uri is None or not notices.may_read(services.registry, caller, uri):
                return None
            return notices.resource_updated(uri)

        async def alive() -> bool:
            # Each keep-alive slides the session and keeps it in the index of each resource it
            # subscribed to, so an update finds it for as long as it streams.
            if await sessions.touch(sref, self.ttl_ms) is None:
                return False
            return await events.refresh(sref, self.ttl_ms)

        @contextlib.asynccontextmanager
        async def watching() -> AsyncIterator[streams.Changes]:
            # NOTE: the session's channel is subscribed first, its index entries refreshed
            # second: an update announced after the refresh is heard (resource_updated.lua).
            parts: list[AbstractAsyncContextManager[streams.Changes]] = [
                events.watch(lists=True, session=sref)
            ]
            if session.version >= LEGACY_TASKS_VERSION:  # (older sessions create no tasks)
                parts.append(tasks.watch_listing(session.scope))
            async with notices.merged(*parts) as changes:
                await events.refresh(sref, self.ttl_ms)
                yield changes

        stream = streams.watch_stream(
            services, watching=watching(), render=render, gone=DISCONNECTED.get(), alive=alive
        )
        return HttpReply(200, b"", "text/event-stream", stream=stream)

    # -- what the client sends that is not a request ---------------------------------------------
    async def _route_response(self, session: Session, message: dict[str, Any]) -> McpError | None:
        """The client's answer to an ``elicitation/create`` / ``sampling/createMessage`` we sent
        on some replica's stream: delivered to the waiting run, as ``tasks/update`` would. An
        answer that does not fit its request is refused (returned) and may be sent again."""
        out_id = message.get("id")
        if not isinstance(out_id, str):
            return None  # not one of ours (ours are strings): nothing waits for it
        return await self.services.tasks.deliver(
            session, out_id, message.get("result"), message.get("error"), REQUEST_ID.get()
        )

    async def _notification(self, session: Session, message: dict[str, Any]) -> None:
        """``notifications/cancelled`` stops the named synchronous call's run (any replica);
        every other notification (``notifications/initialized`` …) needs nothing."""
        if message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return
        await self.services.tasks.cancel_call(session, request_id, streams.CLIENT_CANCELLED)
