"""``create_app``: the composition root of the web tier (Falcon ASGI)."""

from __future__ import annotations

import falcon
import falcon.asgi

from frontend.health import HealthResource, MetricsResource, ReadyResource
from frontend.http_types import HttpRequest
from frontend.producer import CeleryProducer, Producer
from frontend.server import McpEndpoint
from frontend.services import Services
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
        body = await req.stream.read() if req.method == "POST" else b""
        reply = await self.endpoint.handle(HttpRequest(req.method, headers, body))
        resp.status = reply.status
        resp.data = reply.body
        if reply.content_type:
            resp.content_type = reply.content_type
        for name, value in reply.headers.items():
            resp.set_header(name, value)

    on_post = on_get = on_delete = on_put = on_patch = _serve


def create_app(
    settings: Settings,
    *,
    store: AsyncTaskStore | None = None,
    producer: Producer | None = None,
    tools: Registry | None = None,
) -> falcon.asgi.App[falcon.asgi.Request, falcon.asgi.Response]:
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
    app.add_route("/metrics", MetricsResource(services.store, settings))
    return app


def _dev_secret() -> str:
    """No MCPQ_SECRET: a per-process key. MRTR rounds then only verify on the same process."""
    import logging
    import secrets

    logging.getLogger("mcpq.web").warning("MCPQ_SECRET is not set: using a random per-process key")
    return secrets.token_urlsafe(32)
