"""A private RabbitMQ virtual host per test run (``mcpq-test-<hex>``), on the shared RabbitMQ of
this machine: the helpers live in ``ops.harness.rabbitmq`` (the benchmarks use them too); this
module keeps the tests' import path."""

from __future__ import annotations

from mcpq.ops.harness.rabbitmq import (
    HOST,
    PASSWORD,
    PORT,
    USER,
    Vhost,
    create_vhost,
    delete_vhost,
    rabbitmq_vhost,
    unavailable,
    vhost_names,
)

__all__ = [
    "HOST",
    "PASSWORD",
    "PORT",
    "USER",
    "Vhost",
    "create_vhost",
    "delete_vhost",
    "rabbitmq_vhost",
    "unavailable",
    "vhost_names",
]
