"""``create_app``: the composition root of the web tier (Falcon ASGI).

Every dependency is built here, or given by the caller (tests pass a fake producer, a store on
fakeredis, a registry of their own; fault tests wrap the real ones), and handed down: nothing
below reads the environment or builds a client. Each face of the store (``mcpq.shared.store.web``)
goes to the part whose concern it is: tasks and ``tasks/list`` to ``TaskService``, sessions to
``Services.sessions``, resource and list notices to ``Services.events`` (and the start's
announcement of what this process serves), API keys to the authenticator, the deployment's
numbers to ``/readyz`` and ``/metrics``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import falcon.asgi

from mcpq.frontend.asgi_adapter import AsgiAdapter, McpResource
from mcpq.frontend.auth import METADATA_PATH, build_authenticator, metadata_url
from mcpq.frontend.auth.metadata import MetadataResource
from mcpq.frontend.endpoint import McpEndpoint
from mcpq.frontend.health import HealthResource, ReadyResource
from mcpq.frontend.notices import ListingAnnouncer
from mcpq.frontend.producer import CeleryProducer, Producer
from mcpq.frontend.services import Services
from mcpq.frontend.task_service import TaskService
from mcpq.frontend.web_metrics import MetricsResource
from mcpq.shared.celery_config import broker_is_store
from mcpq.shared.registry import Registry
from mcpq.shared.request_state import RequestStateSigner, new_secret, parse_secrets
from mcpq.shared.settings import Settings
from mcpq.shared.store import WebStore, open_web_store

if TYPE_CHECKING:
    import httpx  # only OAuth fetches anything over HTTP (imported by mcpq.frontend.auth then)


def create_app(
    settings: Settings,
    *,
    store: WebStore | None = None,
    producer: Producer | None = None,
    tools: Registry | None = None,
    http: httpx.AsyncClient | None = None,
) -> AsgiAdapter:
    tools = tools if tools is not None else Registry.from_modules(settings.tools)
    store = store if store is not None else open_web_store(settings)
    producer = producer if producer is not None else CeleryProducer(settings)
    services = Services(
        settings=settings,
        tasks=TaskService(settings, store.tasks, store.listing, store.sessions, producer),
        registry=tools,
        signer=RequestStateSigner(_secrets(settings), settings.mrtr_state_ttl_s),
        sessions=store.sessions,
        events=store.events,
        auth=build_authenticator(settings, store.api_keys, http),
    )
    # At its start (ASGI lifespan) the process tells the store what it serves: a list that
    # changed (a deploy) is announced to every replica's listeners (mcpq.frontend.notices).
    app = falcon.asgi.App(middleware=[ListingAnnouncer(store.events, tools)])
    app.add_route("/mcp", McpResource(McpEndpoint(services)))
    if "oauth" in settings.auth:
        metadata = MetadataResource(settings, tools)
        app.add_route(METADATA_PATH, metadata)
        # RFC 9728 §3.1: the path-inserted form for the resource's own path (/mcp).
        app.add_route(urlsplit(metadata_url(settings.resource_url)).path, metadata)
    app.add_route("/healthz", HealthResource())
    app.add_route("/readyz", ReadyResource(store.stats, settings))
    queues = sorted({settings.default_queue, *tools.queues()})
    if settings.metrics_token:  # no token, no /metrics: it is never public (404, no detail)
        # A broker other than the store's Redis counts its queues itself (RabbitMQ).
        depths = None
        if isinstance(producer, CeleryProducer) and not broker_is_store(settings):
            depths = producer.queue_depths
        app.add_route("/metrics", MetricsResource(store.stats, settings, queues, depths))
    return AsgiAdapter(app)


def _secrets(settings: Settings) -> list[str]:
    """``MCPQ_SECRET``'s keys (a weak or placeholder one stops startup: ``WeakSecret``). None
    set: a per-process key, and MRTR rounds then only verify on the process that sealed them."""
    if settings.secret:
        return parse_secrets(settings.secret)
    logging.getLogger("mcpq.web").warning(
        "MCPQ_SECRET is not set: using a per-process key; set one value on every web process"
    )
    return [new_secret()]
