"""``create_app``: the composition root of the web tier (Falcon ASGI)."""

from __future__ import annotations

import asyncio
from typing import Any

import falcon
import falcon.asgi

from frontend.health import HealthResource, MetricsResource, ReadyResource
from frontend.http_types import HttpReply, HttpRequest
from frontend.producer import CeleryProducer, Producer
from frontend.server import McpEndpoint
from frontend.services import DISCONNECTED, Services
from shared.async_store import AsyncTaskStore
from shared.keys import Keys
from shared.redis_clients import async_client
from shared.request_state import RequestStateSigner
from shared.settings import Settings
from shared.tools import Registry, registry


class McpResource:
    """``/mcp``: every method goes through :class:`McpEndpoint` (405 for non-POST included)."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint

    async def _serve(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        headers: dict[str, list[str]] = {}
        for name, value in req.scope["headers"]:
            headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        limit = self.endpoint.services.settings.max_body_bytes
        if (req.content_length or 0) > limit:  # refuse before reading it
            reply = HttpReply(413, b"Payload Too Large", "text/plain; charset=utf-8")
        else:
            body = await req.stream.read(limit + 1) if req.method == "POST" else b""
            token = DISCONNECTED.set(req.scope.get("mcpq.disconnected"))
            try:
                reply = await self.endpoint.handle(HttpRequest(req.method, headers, body))
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


def create_app(
    settings: Settings,
    *,
    store: AsyncTaskStore | None = None,
    producer: Producer | None = None,
    tools: Registry | None = None,
) -> AsgiAdapter:
    if tools is None:
        tools = registry.load(settings.tools)
    secret = settings.secret or _dev_secret()
    services = Services(
        settings=settings,
        store=store or AsyncTaskStore(async_client(settings), Keys(settings.key_prefix)),
        producer=producer or CeleryProducer(settings),
        registry=tools,
        signer=RequestStateSigner(secret, settings.mrtr_state_ttl_s),
    )
    app = falcon.asgi.App()
    app.add_route("/mcp", McpResource(McpEndpoint(services)))
    app.add_route("/healthz", HealthResource())
    app.add_route("/readyz", ReadyResource(services.store, settings))
    queues = sorted({settings.default_queue, *(t.queue for t in tools.tools.values() if t.queue)})
    app.add_route("/metrics", MetricsResource(services.store, settings, queues))
    return AsgiAdapter(app)


def _dev_secret() -> str:
    """No MCPQ_SECRET: a per-process key. MRTR rounds then only verify on the same process."""
    import logging
    import secrets

    logging.getLogger("mcpq.web").warning("MCPQ_SECRET is not set: using a random per-process key")
    return secrets.token_urlsafe(32)
