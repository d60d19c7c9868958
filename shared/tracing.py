"""OpenTelemetry tracing, configured the standard way (the ``OTEL_*`` variables).

- **On** when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, or
  ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``); ``OTEL_SDK_DISABLED=true``
  forces it off. **Off** means the SDK is never imported (its memory counts in every process) and
  the hot path makes no span object: :data:`OFF`'s span is one shared no-op.
- Each process is one **role**: ``web`` or ``worker``. Its service name is ``mcpq-web`` or
  ``mcpq-worker`` unless ``OTEL_SERVICE_NAME`` (or ``service.name`` in
  ``OTEL_RESOURCE_ATTRIBUTES``) says otherwise; the resource attribute ``mcpq.role`` always says
  which. The exporter, sampler and resource come from the SDK's own reading of ``OTEL_*``.
- A span's parent is the client's: W3C ``traceparent``/``tracestate`` from the request's
  ``params._meta`` (what the official SDKs send), else from the HTTP headers.
- **Nothing secret:** callers give only names, counts and states as attributes (never a taskId,
  an argument, an answer or a result); this module adds nothing of its own.

Call :func:`configure` once per process, after a fork (a prefork worker's child configures its
own: the batch exporter's thread does not survive a fork).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

#: What the MCP SDKs put in ``params._meta`` (and HTTP carries as headers).
TRACE_KEYS = ("traceparent", "tracestate")
_ON_VALUES = {"otlp", "console"}


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


class Span(Protocol):
    """The part of a span callers use: attributes, events, the error it ended with."""

    def set(self, key: str, value: str | int | float | bool) -> None: ...

    def event(self, name: str, attributes: Mapping[str, str | int | float | bool]) -> None: ...

    def fail(self, code: int | str, message: str) -> None: ...


class _NoSpan:
    def set(self, key: str, value: str | int | float | bool) -> None:
        return None

    def event(self, name: str, attributes: Mapping[str, str | int | float | bool]) -> None:
        return None

    def fail(self, code: int | str, message: str) -> None:
        return None


NO_SPAN = _NoSpan()


class Tracing:
    """Off: every span is :data:`NO_SPAN`, entered and left at no cost."""

    on = False

    def server_span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> contextlib.AbstractContextManager[Span]:
        """A SERVER span for one request, child of the caller's context (``meta`` first, then
        ``headers``); current while the request is handled."""
        return _NOTHING

    def run_span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        traceparent: str,
        link: str = "",
    ) -> contextlib.AbstractContextManager[Span]:
        """A CONSUMER span for one run of a task, child of ``traceparent`` (the request that
        created the task; a new trace when empty), linked to ``link`` (the request that sent
        this run, when another one: an answer, a resume)."""
        return _NOTHING

    def carrier(self) -> dict[str, str]:
        """The current context, as ``traceparent``/``tracestate`` (empty when off or none)."""
        return {}

    def capture(self) -> Any:
        """The current context, to parent spans made on other threads (``None`` when off)."""
        return None

    def child_span(
        self, name: str, attributes: Mapping[str, str | int | float | bool], parent: Any
    ) -> contextlib.AbstractContextManager[Span]:
        """An INTERNAL span, child of ``parent`` (a :meth:`capture`), not made current: it
        may be entered on one thread and left on another (an async tool's step)."""
        return _NOTHING

    def event(
        self, parent: Any, name: str, attributes: Mapping[str, str | int | float | bool]
    ) -> None:
        """An event on the span of ``parent`` (a :meth:`capture`)."""
        return None


class _Nothing(contextlib.AbstractContextManager[Span]):
    """A no-op span context, one shared instance: entering and leaving it allocates nothing."""

    def __enter__(self) -> Span:
        return NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()
OFF = Tracing()


class _OtelSpan:
    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: str | int | float | bool) -> None:
        self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Mapping[str, str | int | float | bool]) -> None:
        self._span.add_event(name, dict(attributes))

    def fail(self, code: int | str, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", str(code))
        self._span.set_status(Status(StatusCode.ERROR, message))


class _On(Tracing):
    on = True

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import propagate, trace

        self._tracer = tracer
        self._propagate = propagate
        self._kind = trace.SpanKind.SERVER

    def _parent(self, meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> Any:
        for source in (meta, headers):
            if source is None:
                continue
            carrier = {k: v for k in TRACE_KEYS if isinstance(v := source.get(k), str)}
            if carrier:
                return self._propagate.extract(carrier)
        return None

    @contextlib.contextmanager
    def _span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        meta: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> Iterator[Span]:
        parent = self._parent(meta, headers)
        with self._tracer.start_as_current_span(
            name, context=parent, kind=self._kind, attributes=dict(attributes)
        ) as span:
            # Kept in the request's own (asyncio task) context for its log line, written after
            # the span ends; a request task's context dies with it.
            ids = span.get_span_context()
            REQUEST_SPAN.set((format(ids.trace_id, "032x"), format(ids.span_id, "016x")))
            yield _OtelSpan(span)

    def server_span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> contextlib.AbstractContextManager[Span]:
        return self._span(name, attributes, meta, headers)

    @contextlib.contextmanager
    def _run_span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        traceparent: str,
        link: str,
    ) -> Iterator[Span]:
        from opentelemetry import trace

        parent = self._propagate.extract({"traceparent": traceparent}) if traceparent else None
        links = []
        if link and link != traceparent:
            linked = trace.get_current_span(self._propagate.extract({"traceparent": link}))
            if linked.get_span_context().is_valid:
                links.append(trace.Link(linked.get_span_context()))
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes=dict(attributes),
            links=links,
        ) as span:
            yield _OtelSpan(span)

    def run_span(
        self,
        name: str,
        attributes: Mapping[str, str | int | float | bool],
        traceparent: str,
        link: str = "",
    ) -> contextlib.AbstractContextManager[Span]:
        return self._run_span(name, attributes, traceparent, link)

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier)
        return carrier

    def capture(self) -> Any:
        from opentelemetry import context

        return context.get_current()

    @contextlib.contextmanager
    def _child(
        self, name: str, attributes: Mapping[str, str | int | float | bool], parent: Any
    ) -> Iterator[Span]:
        from opentelemetry.trace import Status, StatusCode

        span = self._tracer.start_span(name, context=parent, attributes=dict(attributes))
        try:
            yield _OtelSpan(span)
        except Exception as exc:  # the tool's failure, by its type only (never its text)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def child_span(
        self, name: str, attributes: Mapping[str, str | int | float | bool], parent: Any
    ) -> contextlib.AbstractContextManager[Span]:
        if parent is None:
            return _NOTHING
        return self._child(name, attributes, parent)

    def event(
        self, parent: Any, name: str, attributes: Mapping[str, str | int | float | bool]
    ) -> None:
        if parent is None:
            return
        from opentelemetry import trace

        trace.get_current_span(parent).add_event(name, dict(attributes))


_CURRENT: Tracing = OFF

#: The ids of the request span that just ended in this task (a request's log line is written
#: after its span: ``mcpq.frontend.endpoint``), for :func:`log_ids`.
REQUEST_SPAN: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "mcpq_request_span", default=None
)


def log_ids() -> dict[str, str]:
    """``trace_id`` and ``span_id`` for a log line: the current span's, else the request span
    that just ended in this task; none when tracing is off (one attribute read)."""
    if not _CURRENT.on:
        return {}
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
        }
    ended = REQUEST_SPAN.get()
    return {"trace_id": ended[0], "span_id": ended[1]} if ended else {}


def current() -> Tracing:
    """This process's tracing (:data:`OFF` until :func:`configure` turned it on)."""
    return _CURRENT


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
    from opentelemetry import trace
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    detected = OTELResourceDetector().detect()  # OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
    named = "service.name" in detected.attributes or bool(env.get("OTEL_SERVICE_NAME"))
    base = {"mcpq.role": role, **({} if named else {"service.name": f"mcpq-{role}"})}
    provider = TracerProvider(resource=Resource.create(base).merge(detected))
    provider.add_span_processor(processor or BatchSpanProcessor(_exporter(env)))
    if processor is None:
        trace.set_tracer_provider(provider)  # for instrumentations that use the global one
    _CURRENT = _On(provider.get_tracer("mcpq"))
    return _CURRENT


def turn_off() -> None:
    """Back to :data:`OFF` (tests; a process configures once)."""
    global _CURRENT
    _CURRENT = OFF


def _exporter(env: Mapping[str, str]) -> Any:
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*
