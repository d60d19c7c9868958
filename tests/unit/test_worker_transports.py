"""The kombu transport a worker gets for its broker (``mcpq.workers.celery_app``): the store's
Redis gets ``mcpq.workers.redis_transport``, RabbitMQ ``mcpq.workers.amqp_transport`` (its TLS
kind for ``amqps://``), both under the event-loop guard; and the RabbitMQ transport bounds a
publisher confirm its caller left unbounded (the live faults: ``tests/integration``'s
broker-loss tests)."""

from __future__ import annotations

from typing import Any

import pytest
from kombu.transport import pyamqp

from mcpq.shared.celery_config import CONFIRM_TIMEOUT_S
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.workers import amqp_transport, redis_transport
from mcpq.workers.celery_app import create_worker_app
from mcpq.workers.event_loop_guard import GuardedReconnects

REDIS = "redis://127.0.0.1:6390/0"
AMQP = "amqp://guest:guest@127.0.0.1:5672/mcpq"


@pytest.mark.parametrize(
    ("broker", "expected"),
    [
        ("", redis_transport.Transport),
        (AMQP, amqp_transport.Transport),
        (AMQP.replace("amqp://", "pyamqp://"), amqp_transport.Transport),
        (AMQP.replace("amqp://", "amqps://"), amqp_transport.SSLTransport),
    ],
)
def test_each_broker_gets_the_workers_own_guarded_transport(broker: str, expected: type) -> None:
    app = create_worker_app(Settings(redis_url=REDIS, broker_url=broker), Registry())
    connection = app.connection_for_write()  # not connected: nothing is reached
    assert type(connection.transport) is expected
    assert isinstance(connection.transport, GuardedReconnects)
    if expected is amqp_transport.SSLTransport:
        assert connection.ssl  # kombu's TLS transport kept its TLS


@pytest.mark.parametrize(
    ("given", "waits"),
    [
        ({}, CONFIRM_TIMEOUT_S),  # Celery's heartbeat and events give no bound
        ({"confirm_timeout": 1.5}, 1.5),  # a caller's own bound stands
        ({"timeout": 2.0}, None),  # py-amqp waits the publish's timeout then
    ],
)
def test_a_publisher_confirm_is_waited_for_within_a_bound(
    given: dict[str, Any], waits: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def kombus(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr(pyamqp.Channel, "basic_publish_confirm", kombus)
    channel = object.__new__(amqp_transport.Channel)  # no connection: only the call is checked
    channel.basic_publish_confirm("message", **given)
    assert seen.get("confirm_timeout") == waits
    assert amqp_transport.Connection.Channel is amqp_transport.Channel
    assert amqp_transport.Transport.Connection is amqp_transport.Connection
