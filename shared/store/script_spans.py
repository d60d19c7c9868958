"""A Redis script as an OpenTelemetry CLIENT span (``mcpq.shared.tracing``), made at the one place
every script runs (``sync_driver``/``async_driver``: ``_do``), with the database semantic
conventions: ``EVALSHA claim``, ``db.system.name = redis``, ``db.operation.name``,
``db.stored_procedure.name`` (the script), ``db.namespace`` (the database number),
``server.address``/``server.port`` (the port only when not Redis's default).

Nothing else of the call: its keys name a task's ref and its arguments may hold a sealed payload
or an owner, so neither is an attribute (no ``db.query.text``)."""

from __future__ import annotations

from typing import Any

from mcpq.shared.store.plans import Eval, EvalAndWait
from mcpq.shared.tracing.api import Attributes

DEFAULT_PORT = 6379


def where(client: Any) -> dict[str, str | int | float | bool]:
    """The attributes of the server a client talks to, as far as its pool says (a Sentinel's or
    a Cluster's primary moves: then only the database)."""
    pool = getattr(client, "connection_pool", None)
    kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", {})
    found: dict[str, str | int | float | bool] = {"db.system.name": "redis"}
    if isinstance(host := kwargs.get("host"), str):
        found["server.address"] = host
    if isinstance(port := kwargs.get("port"), int) and port != DEFAULT_PORT:
        found["server.port"] = port  # (the semantic conventions leave the default port out)
    found["db.namespace"] = str(kwargs.get("db") or 0)
    return found


def described(op: Eval | EvalAndWait, server: Attributes) -> tuple[str, Attributes]:
    """The span's name and attributes for ``op``."""
    attributes = {
        **server,
        "db.operation.name": "EVALSHA",
        "db.stored_procedure.name": op.script,
    }
    if isinstance(op, EvalAndWait):
        attributes["mcpq.redis.wait_replicas"] = op.replicas
    return f"EVALSHA {op.script}", attributes
