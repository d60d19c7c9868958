"""The workers' kombu transport on a RabbitMQ broker: kombu's py-amqp transport, with two guards
for the worker's event loop. Acks, redelivery and prefetch stay the broker's.

- Its reconnects on the loop are under ``mcpq.workers.event_loop_guard`` (as the Redis
  transport's): a RabbitMQ lost as Celery's worker heartbeat went out no longer holds the loop
  in kombu's unbounded retry, so the worker notices the loss and reconnects its consumer its own
  way.
- A publish waits for RabbitMQ's confirm (publisher confirms are on for every connection,
  ``mcpq.shared.celery_config``) at most ``CONFIRM_TIMEOUT_S`` even when its caller set no
  bound: Celery's heartbeat and events set none, and a broker that went silent without closing
  the connection (a partition, a frozen server) held the loop in that wait for good, so the
  AMQP heartbeats that notice a silent broker within two beats were never checked. A confirm
  that does not come counts as a lost connection.

``amqps://`` keeps kombu's TLS transport (:class:`SSLTransport`); ``amqp://`` and ``pyamqp://``
the plain one.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import pyamqp

from mcpq.shared.celery_config import CONFIRM_TIMEOUT_S
from mcpq.workers.event_loop_guard import GuardedReconnects


class Channel(pyamqp.Channel):
    def basic_publish_confirm(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("confirm_timeout") and not kwargs.get("timeout"):
            kwargs["confirm_timeout"] = CONFIRM_TIMEOUT_S
        return super().basic_publish_confirm(*args, **kwargs)


class Connection(pyamqp.Connection):
    Channel = Channel


class Transport(GuardedReconnects, pyamqp.Transport):
    Connection = Connection


class SSLTransport(GuardedReconnects, pyamqp.SSLTransport):
    Connection = Connection


def transport_for(url: str) -> str:
    """Celery's ``broker_transport`` for an AMQP broker URL."""
    name = "SSLTransport" if url.startswith("amqps://") else "Transport"
    return f"{__name__}:{name}"
