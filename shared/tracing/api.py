"""What callers of :mod:`mcpq.shared.tracing` use, and the off state: every span is
:data:`NO_SPAN`, entered and left at no cost, and nothing of OpenTelemetry is imported.

(``mcpq.shared.tracing.otel`` is the on state, imported only when tracing is on.)"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Mapping
from typing import Any, Protocol

#: What the MCP SDKs put in ``params._meta`` (and HTTP carries as headers).
TRACE_KEYS = ("traceparent", "tracestate")

Attributes = Mapping[str, str | int | float | bool]


class Span(Protocol):
    """The part of a span callers use: attributes, events, the error it ended with."""

    def set(self, key: str, value: str | int | float | bool) -> None: ...

    def event(self, name: str, attributes: Attributes) -> None: ...

    def fail(self, code: int | str, message: str) -> None: ...

    def keep_open(self) -> Kept:
        """Leave the span open past its ``with`` block: a streamed reply's span ends with its
        stream, which runs after the handler returned."""
        ...


class Kept(Protocol):
    """A span kept open past its block (:meth:`Span.keep_open`)."""

    def resumed(self) -> contextlib.AbstractContextManager[object]:
        """The span made current again for a while (a step of its stream: the reads it makes
        are its children), then the context as it was."""
        ...

    def end(self) -> None:
        """End it (a second call does nothing)."""
        ...


class _NoKept:
    def resumed(self) -> contextlib.AbstractContextManager[object]:
        return NOTHING

    def end(self) -> None:
        return None


class _NoSpan:
    def set(self, key: str, value: str | int | float | bool) -> None:
        return None

    def event(self, name: str, attributes: Attributes) -> None:
        return None

    def fail(self, code: int | str, message: str) -> None:
        return None

    def keep_open(self) -> Kept:
        return NO_KEPT


NO_SPAN = _NoSpan()


class Tracing:
    """Off: every span is :data:`NO_SPAN`, entered and left at no cost."""

    on = False

    def server_span(
        self,
        name: str,
        attributes: Attributes,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> contextlib.AbstractContextManager[Span]:
        """A SERVER span for one request, child of the caller's context (``meta`` first, then
        ``headers``); current while the request is handled."""
        return NOTHING

    def run_span(
        self, name: str, attributes: Attributes, traceparent: str, link: str = ""
    ) -> contextlib.AbstractContextManager[Span]:
        """A CONSUMER span for one run of a task, child of ``traceparent`` (the request that
        created the task; a new trace when empty), linked to ``link`` (the request that sent
        this run, when another one: an answer, a resume)."""
        return NOTHING

    def client_span(
        self, name: str, attributes: Attributes
    ) -> contextlib.AbstractContextManager[Span]:
        """A CLIENT span (a Redis script), child of the current span; none outside one (a
        background loop's calls, a lease renewal, start no trace of their own)."""
        return NOTHING

    def join_task(self, ref: str, traceparent: str) -> None:
        """Mark the current span as about task ``ref`` and link it to the task's trace
        (``traceparent``, the create's): a ``tasks/get``, ``update`` or ``cancel``."""
        return None

    def carrier(self) -> dict[str, str]:
        """The current context, as ``traceparent``/``tracestate`` (empty when off or none)."""
        return {}

    def capture(self) -> Any:
        """The current context, to parent spans made on other threads (``None`` when off)."""
        return None

    def child_span(
        self, name: str, attributes: Attributes, parent: Any
    ) -> contextlib.AbstractContextManager[Span]:
        """An INTERNAL span, child of ``parent`` (a :meth:`capture`), not made current: it
        may be entered on one thread and left on another (an async tool's step)."""
        return NOTHING

    def event(self, parent: Any, name: str, attributes: Attributes) -> None:
        """An event on the span of ``parent`` (a :meth:`capture`)."""
        return None

    def within(self, parent: Any) -> contextlib.AbstractContextManager[object]:
        """``parent`` (a :meth:`capture`) current for a while, on another thread: the Redis
        scripts an ``async def`` tool's context runs on the worker's pool of round trips are
        its run's children."""
        return NOTHING

    def log_ids(self) -> dict[str, str]:
        """``trace_id`` and ``span_id`` for a log line (none when off)."""
        return {}


class _Nothing(contextlib.AbstractContextManager[Span]):
    """A no-op span context, one shared instance: entering and leaving it allocates nothing."""

    def __enter__(self) -> Span:
        return NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


NOTHING = _Nothing()
NO_KEPT = _NoKept()
OFF = Tracing()

#: The span context (ids) of the request span that just ended in this task (a request's log line
#: is written after its span: ``mcpq.frontend.endpoint``), for :meth:`Tracing.log_ids`.
REQUEST_SPAN: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mcpq_request_span", default=None
)
