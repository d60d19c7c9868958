"""The ASGI/Falcon edge of ``/mcp``: raw headers, the bounded body read, the client's disconnect.

Everything protocol-shaped happens behind it, in :class:`mcpq.frontend.endpoint.McpEndpoint`, on
framework-free requests and replies (``mcpq.frontend.http_messages``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import falcon
import falcon.asgi

from mcpq.frontend.endpoint import McpEndpoint
from mcpq.frontend.http_messages import ClientGone, HttpRequest
from mcpq.frontend.services import DISCONNECTED
from mcpq.shared import jsonutil
from mcpq.shared.errors import new_error_id

#: Seconds a client is told to wait after a 503 (the task store, or a key set, is unreachable):
#: long enough for a Redis restart or failover, short enough that nothing waits needlessly.
RETRY_AFTER_S = b"2"

log = logging.getLogger("mcpq.web")


class McpResource:
    """``/mcp``: every method goes through :class:`McpEndpoint` (405 for non-POST included)."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint

    async def _serve(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        headers: dict[str, list[str]] = {}
        # Every value of every header, in order: Falcon would merge duplicates, and a duplicated
        # routing header must be seen to be refused (mcpq.frontend.routing_headers).
        for name, value in req.scope["headers"]:
            headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        limit = self.endpoint.services.settings.max_body_bytes
        declared = req.content_length
        body = b""
        # A body announced as too large is not read at all; otherwise at most one byte past
        # the limit, enough for the endpoint's size check (413) to see it, never more.
        if req.method == "POST" and (declared or 0) <= limit:
            body = await req.stream.read(limit + 1)
        disconnected = req.scope.get("mcpq.disconnected")
        if disconnected is not None and disconnected.is_set():
            # The client left (or was cut off for sending too slowly) before its body was in:
            # what arrived may still parse, but it is not what was sent. Serve nothing.
            resp.status = 400
            return
        token = DISCONNECTED.set(disconnected)
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
        if reply.stream is not None:
            # No proxy may buffer the stream: keep-alives and progress must reach the client.
            resp.set_header("Cache-Control", "no-cache")
            resp.set_header("X-Accel-Buffering", "no")
            resp.sse = _sse(reply.stream)

    on_post = on_get = on_delete = on_put = on_patch = _serve


async def _sse(
    messages: AsyncIterator[dict[str, Any] | None],
) -> AsyncIterator[falcon.asgi.SSEvent | None]:
    """JSON-RPC messages as SSE events (``None``: Falcon's keep-alive comment, ``: ping``)."""
    try:
        async for message in messages:
            yield None if message is None else falcon.asgi.SSEvent(data=jsonutil.dumpb(message))
    except Exception:
        # A stream's status line is sent: nothing can reach the client now but the end of the
        # stream. Our log gets the traceback under an error id, as for any unexpected error.
        log.exception("stream failed", extra={"error_id": new_error_id()})
    finally:
        # Falcon stops iterating when the client goes away; closing the source runs its
        # cleanup now (a call's stream stops its run), not whenever it is collected.
        aclose = getattr(messages, "aclose", None)
        if aclose is not None:
            await aclose()


class AsgiAdapter:
    """Two things Falcon does not give ``/mcp``, done at the ASGI edge:

    - every raw header: ASGI promises only an iterable, and Falcon's Request consumes it
      (merging duplicates), but a duplicated routing header must be rejected;
    - the client's disconnect: once the body is read, a handler that waits (a stream, a waiting
      synchronous call, see ``mcpq.frontend.calls.sync``) may watch for ``http.disconnect`` through
      ``scope["mcpq.disconnected"]`` (:class:`~frontend.http_messages.ClientGone`), so it can stop
      its run;
    - ``Retry-After`` on every 503, whichever route answers it (``/mcp``, ``/readyz``).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = [(bytes(name), bytes(value)) for name, value in scope.get("headers", ())]
        gone = ClientGone()
        scope = {**scope, "headers": headers, "mcpq.disconnected": gone}
        watcher: asyncio.Task[None] | None = None
        body_read = False

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        def start_watching() -> None:
            nonlocal watcher
            watcher = asyncio.ensure_future(watch())

        async def receive_body() -> Any:
            nonlocal body_read
            if body_read:
                # The body is read and our watcher owns receive(): a second reader (Falcon's
                # own SSE disconnect watch) learns of the disconnect from it.
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            elif not message.get("more_body"):
                body_read = True
                gone.arm(start_watching)  # watched only once a handler asks (ClientGone)
            return message

        async def send_reply(message: Any) -> None:
            if (
                message["type"] == "http.response.start"
                and message["status"] == 503
                and not any(
                    name.lower() == b"retry-after" for name, _ in message.get("headers", ())
                )
            ):
                headers = [*message.get("headers", ()), (b"retry-after", RETRY_AFTER_S)]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive_body, send_reply)
        finally:
            if watcher is not None:
                watcher.cancel()
