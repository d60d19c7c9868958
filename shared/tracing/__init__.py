"""OpenTelemetry tracing, configured the standard way (the ``OTEL_*`` variables).

- **On** when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, or
  ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``); ``OTEL_SDK_DISABLED=true``
  forces it off. **Off** means the SDK is never imported (its memory counts in every process) and
  the hot path makes no span object: :data:`OFF`'s span is one shared no-op (``api``).
- Each process is one **role**: ``web`` or ``worker``. Its service name is ``mcpq-web`` or
  ``mcpq-worker`` unless ``OTEL_SERVICE_NAME`` (or ``service.name`` in
  ``OTEL_RESOURCE_ATTRIBUTES``) says otherwise; the resource attribute ``mcpq.role`` always says
  which. The exporter, sampler and resource come from the SDK's own reading of ``OTEL_*``
  (``otel``, imported only when on).
- A span's parent is the client's: W3C ``traceparent``/``tracestate`` from the request's
  ``params._meta`` (what the official SDKs send), else from the HTTP headers.
- **Nothing secret:** callers give only names, counts and states as attributes (never a taskId,
  an argument, an answer or a result); this package adds nothing of its own.

Call :func:`configure` once per process, after a fork (a prefork worker's child configures its
own: the batch exporter's thread does not survive a fork).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mcpq.shared.tracing.api import NO_SPAN, OFF, REQUEST_SPAN, TRACE_KEYS, Span, Tracing

__all__ = [
    "NO_SPAN",
    "OFF",
    "REQUEST_SPAN",
    "TRACE_KEYS",
    "Span",
    "Tracing",
    "configure",
    "current",
    "log_ids",
    "turn_off",
    "wanted",
]

_ON_VALUES = {"otlp", "console"}
_CURRENT: Tracing = OFF


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment turns tracing on."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        return environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
    exporters = {e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",")}
    return bool(exporters & _ON_VALUES)


def current() -> Tracing:
    """This process's tracing (:data:`OFF` until :func:`configure` turned it on)."""
    return _CURRENT


def log_ids() -> dict[str, str]:
    """``trace_id`` and ``span_id`` for a log line: the current span's, else the request span
    that just ended in this task; none when tracing is off (one attribute read)."""
    return _CURRENT.log_ids() if _CURRENT.on else {}


def configure(
    role: str, environ: Mapping[str, str] | None = None, *, processor: Any = None
) -> Tracing:
    """Set up this process's tracing for ``role`` (``web``, ``worker``) from ``environ``
    (default: the process's). Off: nothing is imported and :data:`OFF` is returned.
    ``processor``: a span processor of the caller's instead of the exporter the variables name
    (tests), and then the global provider is left alone."""
    global _CURRENT
    env = os.environ if environ is None else environ
    if not wanted(env):
        _CURRENT = OFF
        return OFF
    from mcpq.shared.tracing import otel

    _CURRENT = otel.build(role, env, processor)
    return _CURRENT


def turn_off() -> None:
    """Back to :data:`OFF` (tests; a process configures once)."""
    global _CURRENT
    _CURRENT = OFF
