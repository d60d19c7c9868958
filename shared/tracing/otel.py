"""Tracing on: the OpenTelemetry SDK behind :class:`mcpq.shared.tracing.api.Tracing`. Imported
only when the environment turns tracing on (``mcpq.shared.tracing.configure``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mcpq.shared.tracing.api import (
    NOTHING,
    REQUEST_SPAN,
    TRACE_KEYS,
    Attributes,
    Kept,
    Span,
    Tracing,
)


class _OtelSpan:
    def __init__(self, span: Any) -> None:
        self._span = span
        self.kept = False
        self._ended = False

    def set(self, key: str, value: str | int | float | bool) -> None:
        self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Attributes) -> None:
        self._span.add_event(name, dict(attributes))

    def fail(self, code: int | str, message: str) -> None:
        self._span.set_attribute("error.type", str(code))
        self._span.set_status(Status(StatusCode.ERROR, message))

    def keep_open(self) -> Kept:
        self.kept = True
        return self

    def resumed(self) -> contextlib.AbstractContextManager[object]:
        return _current(self._span)

    def end(self) -> None:
        if not self._ended:  # once (a second end would be logged by the SDK)
            self._ended = True
            self._span.end()


@contextlib.contextmanager
def _current(span: Any) -> Iterator[None]:
    """``span`` current for a while. An exception passing through sets its status by its type
    only: the SDK's own recording would export the exception's message and traceback, which
    may quote an argument, a key or a payload. (``trace.use_span`` without its recording, done
    here in one step: it runs for every request.)"""
    token = context.attach(trace.set_span_in_context(span))
    try:
        yield
    except Exception as exc:
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        context.detach(token)


#: The W3C format, for the contexts mcpq stores and sends itself (a task's trace, a run's
#: message): always ``traceparent``, whatever ``OTEL_PROPAGATORS`` says for HTTP and ``_meta``.
_W3C = TraceContextTextMapPropagator()


def _extracted(traceparent: str) -> Any:
    """A context whose span is the one a W3C ``traceparent`` names (invalid when malformed)."""
    return _W3C.extract({"traceparent": traceparent})


def _span_context(traceparent: str) -> Any:
    """The span context a W3C ``traceparent`` names (invalid when it is malformed)."""
    return trace.get_current_span(_extracted(traceparent)).get_span_context()


class On(Tracing):
    on = True

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    @staticmethod
    def _parent(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> Any:
        for source in (meta, headers):
            if source is None:
                continue
            carrier = {k: v for k in TRACE_KEYS if isinstance(v := source.get(k), str)}
            if carrier:
                return propagate.extract(carrier)
        return None

    @contextlib.contextmanager
    def _server(
        self,
        name: str,
        attributes: Attributes,
        meta: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> Iterator[Span]:
        span = self._tracer.start_span(
            name, context=self._parent(meta, headers), kind=SpanKind.SERVER,
            attributes=dict(attributes),
        )  # fmt: skip
        handle = _OtelSpan(span)
        try:
            with _current(span):
                # Kept in the request's own (asyncio task) context for its log line, written
                # after the span ends; a request task's context dies with it.
                REQUEST_SPAN.set(span.get_span_context())  # formatted only if a line is
                yield handle
        finally:
            if not handle.kept:  # else the stream that keeps it open ends it
                span.end()

    def server_span(
        self,
        name: str,
        attributes: Attributes,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> contextlib.AbstractContextManager[Span]:
        return self._server(name, attributes, meta, headers)

    @contextlib.contextmanager
    def _run(
        self, name: str, attributes: Attributes, traceparent: str, link: str
    ) -> Iterator[Span]:
        parent = _extracted(traceparent) if traceparent else None
        links = []
        if link and link != traceparent and (linked := _span_context(link)).is_valid:
            links.append(Link(linked))
        span = self._tracer.start_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=dict(attributes),
            links=links,
        )  # fmt: skip
        handle = _OtelSpan(span)
        try:
            with _current(span):
                yield handle
        finally:
            if not handle.kept:  # else the run, gone on to the run loop, ends it there
                span.end()

    def run_span(
        self, name: str, attributes: Attributes, traceparent: str, link: str = ""
    ) -> contextlib.AbstractContextManager[Span]:
        return self._run(name, attributes, traceparent, link)

    @contextlib.contextmanager
    def _client(self, name: str, attributes: Attributes) -> Iterator[Span]:
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=dict(attributes))
        try:
            yield _OtelSpan(span)
        except Exception as exc:  # by its type only: a Redis error's text may quote a key
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def client_span(
        self, name: str, attributes: Attributes
    ) -> contextlib.AbstractContextManager[Span]:
        # Only inside a request's or a run's span: a lease renewal or a sweep alone would make
        # a new trace of one span every few seconds, about no task.
        if not trace.get_current_span().get_span_context().is_valid:
            return NOTHING
        return self._client(name, attributes)

    def join_task(self, ref: str, traceparent: str) -> None:
        span = trace.get_current_span()
        if not span.is_recording():
            return
        span.set_attribute("mcpq.task.ref", ref)
        if traceparent and (linked := _span_context(traceparent)).is_valid:
            span.add_link(linked)

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier

    def capture(self) -> Any:
        return context.get_current()

    @contextlib.contextmanager
    def _child(self, name: str, attributes: Attributes, parent: Any) -> Iterator[Span]:
        span = self._tracer.start_span(name, context=parent, attributes=dict(attributes))
        try:
            yield _OtelSpan(span)
        except Exception as exc:  # the tool's failure, by its type only (never its text)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def child_span(
        self, name: str, attributes: Attributes, parent: Any
    ) -> contextlib.AbstractContextManager[Span]:
        if parent is None:
            return NOTHING
        return self._child(name, attributes, parent)

    def event(self, parent: Any, name: str, attributes: Attributes) -> None:
        if parent is not None:
            trace.get_current_span(parent).add_event(name, dict(attributes))

    @contextlib.contextmanager
    def _within(self, parent: Any) -> Iterator[object]:
        token = context.attach(parent)
        try:
            yield parent
        finally:
            context.detach(token)

    def within(self, parent: Any) -> contextlib.AbstractContextManager[object]:
        return NOTHING if parent is None else self._within(parent)

    def log_ids(self) -> dict[str, str]:
        ids = trace.get_current_span().get_span_context()
        if ids.is_valid:
            return {
                "trace_id": format(ids.trace_id, "032x"),
                "span_id": format(ids.span_id, "016x"),
            }
        ids = REQUEST_SPAN.get()
        if ids is None:
            return {}
        return {"trace_id": format(ids.trace_id, "032x"), "span_id": format(ids.span_id, "016x")}


def build(role: str, env: Mapping[str, str], processor: Any) -> On:
    """This process's tracing for ``role``: the resource from ``OTEL_*`` plus ``mcpq.role`` (and
    the role's service name unless one is set), the exporter ``env`` names (or ``processor``:
    a test's own, and then the global provider is left alone)."""
    detected = OTELResourceDetector().detect()  # OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
    named = "service.name" in detected.attributes or bool(env.get("OTEL_SERVICE_NAME"))
    base = {"mcpq.role": role, **({} if named else {"service.name": f"mcpq-{role}"})}
    provider = TracerProvider(resource=Resource.create(base).merge(detected))
    provider.add_span_processor(processor or BatchSpanProcessor(_exporter(env)))
    if processor is None:
        trace.set_tracer_provider(provider)  # for instrumentations that use the global one
    return On(provider.get_tracer("mcpq"))


def _exporter(env: Mapping[str, str]) -> Any:
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*
