"""Fixtures for the web-tier unit tests; the fakes themselves live in ``fakes.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import fakeredis
import fakeredis.aioredis
import falcon.testing
import pytest

from mcpq.frontend.app import create_app
from mcpq.shared import tracing
from mcpq.shared.registry import Registry
from mcpq.shared.store import AsyncTaskStore, Keys, WebStore, web_store
from tests.unit.fakes import SETTINGS, FakeProducer, FakeWorker, ListHeaders, Mcp, registry

if TYPE_CHECKING:  # the SDK is imported by the tests that turn tracing on, not by every one
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def make_mcp() -> Callable[..., Mcp]:
    """Build an app (fresh fakeredis server) with ``Settings`` overrides."""

    def build(
        store: WebStore | None = None, tools: Registry | None = None, **overrides: Any
    ) -> Mcp:
        settings = replace(SETTINGS, **overrides)
        server = fakeredis.FakeServer()
        keys = Keys(settings.key_prefix)
        if store is None:
            fake = fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
            store = web_store(AsyncTaskStore(fake, keys))
        peek = fakeredis.FakeRedis(server=server, decode_responses=True)
        producer = FakeProducer(peek, keys)
        shim = ListHeaders(
            create_app(settings, store=store, producer=producer, tools=tools or registry)
        )
        client = falcon.testing.TestClient(shim)
        worker = FakeWorker(store.tasks, keys)
        return Mcp(client, shim, store, peek, keys, producer, worker, settings)

    return build


@pytest.fixture
def mcp(make_mcp: Callable[..., Mcp]) -> Mcp:
    return make_mcp()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test, its spans kept in memory (``mcpq.shared.tracing``)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": ""}
    tracing.configure("web", env, processor=SimpleSpanProcessor(exporter))
    yield exporter
    tracing.turn_off()
