"""Fixtures for the web-tier unit tests; the fakes themselves live in ``fakes.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import fakeredis
import fakeredis.aioredis
import falcon.testing
import pytest

from frontend.app import create_app
from shared.async_store import AsyncTaskStore
from shared.keys import Keys
from shared.store import TaskStore
from tests.unit.fakes import SETTINGS, FakeProducer, FakeWorker, ListHeaders, Mcp, registry


@pytest.fixture
def make_mcp() -> Callable[..., Mcp]:
    """Build an app (fresh fakeredis server) with ``Settings`` overrides."""

    def build(store: AsyncTaskStore | None = None, **overrides: Any) -> Mcp:
        settings = replace(SETTINGS, **overrides)
        server = fakeredis.FakeServer()
        keys = Keys(settings.key_prefix)
        if store is None:
            fake = fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
            store = AsyncTaskStore(fake, keys)
        sync = fakeredis.FakeRedis(server=server, decode_responses=True)
        producer = FakeProducer(store)
        shim = ListHeaders(create_app(settings, store=store, producer=producer, tools=registry))
        client = falcon.testing.TestClient(shim)
        return Mcp(
            client, shim, store, TaskStore(sync, keys), producer, FakeWorker(store), settings
        )

    return build


@pytest.fixture
def mcp(make_mcp: Callable[..., Mcp]) -> Mcp:
    return make_mcp()
