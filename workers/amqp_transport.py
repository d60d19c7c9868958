"""The workers' kombu transport on a RabbitMQ broker: kombu's py-amqp transport, with its
reconnects on the worker's event loop under ``mcpq.workers.event_loop_guard`` (as the Redis
transport's): a RabbitMQ lost as Celery's worker heartbeat went out no longer holds the loop in
kombu's unbounded retry, so the worker notices the loss and reconnects its consumer its own way.
Acks, redelivery and prefetch stay the broker's.

``amqps://`` keeps kombu's TLS transport (:class:`SSLTransport`); ``amqp://`` and ``pyamqp://``
the plain one.
"""

from __future__ import annotations

from kombu.transport import pyamqp

from mcpq.workers.event_loop_guard import GuardedReconnects


class Transport(GuardedReconnects, pyamqp.Transport):
    pass


class SSLTransport(GuardedReconnects, pyamqp.SSLTransport):
    pass


def transport_for(url: str) -> str:
    """Celery's ``broker_transport`` for an AMQP broker URL."""
    name = "SSLTransport" if url.startswith("amqps://") else "Transport"
    return f"{__name__}:{name}"
