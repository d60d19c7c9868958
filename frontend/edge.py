"""The ASGI/Falcon edge of ``/mcp``: raw headers, the bounded body read, the client's disconnect.

Everything protocol-shaped happens behind it, in :class:`frontend.endpoint.McpEndpoint`, on
framework-free :class:`~frontend.http_types.HttpRequest` / :class:`~frontend.http_types.HttpReply`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import falcon
import falcon.asgi

from frontend.endpoint import McpEndpoint
from frontend.http_types import HttpRequest
from frontend.services import DISCONNECTED


class McpResource:
    """``/mcp``: every method goes through :class:`McpEndpoint` (405 for non-POST included)."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint

    async def _serve(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        headers: dict[str, list[str]] = {}
        # Every value of every header, in order: Falcon would merge duplicates, and a duplicated
        # routing header must be seen to be refused (frontend.headers).
        for name, value in req.scope["headers"]:
            headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        limit = self.endpoint.services.settings.max_body_bytes
        declared = req.content_length
        body = b""
        # A body announced as too large is not read at all; otherwise at most one byte past
        # the limit, enough for the endpoint's size check (413) to see it, never more.
        if req.method == "POST" and (declared or 0) <= limit:
            body = await req.stream.read(limit + 1)
        token = DISCONNECTED.set(req.scope.get("mcpq.disconnected"))
        try:
            reply = await self.endpoint.handle(HttpRequest(req.method, headers, body, declared))
        finally:
            DISCONNECTED.reset(token)
        resp.status = reply.status
        resp.data = reply.body
        if reply.content_type:
            resp.content_type = reply.content_type
        for name, value in reply.headers.items():
            resp.set_header(name, value)

    on_post = on_get = on_delete = on_put = on_patch = _serve


class AsgiAdapter:
    """Two things Falcon does not give ``/mcp``, done at the ASGI edge:

    - every raw header: ASGI promises only an iterable, and Falcon's Request consumes it
      (merging duplicates), but a duplicated routing header must be rejected;
    - the client's disconnect: once the body is read, a watcher awaits ``http.disconnect`` and
      sets ``scope["mcpq.disconnected"]``, so a waiting synchronous call can stop its run
      (see ``frontend.sync_call``).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = [(bytes(name), bytes(value)) for name, value in scope.get("headers", ())]
        disconnected = asyncio.Event()
        scope = {**scope, "headers": headers, "mcpq.disconnected": disconnected}
        watcher: asyncio.Task[None] | None = None

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        async def receive_body() -> Any:
            nonlocal watcher
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            elif not message.get("more_body") and watcher is None:
                watcher = asyncio.ensure_future(watch())
            return message

        try:
            await self.app(scope, receive_body, send)
        finally:
            if watcher is not None:
                watcher.cancel()
