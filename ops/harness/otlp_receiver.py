"""A real OTLP/HTTP trace receiver, for the tests and the benchmarks: ``POST /v1/traces`` with a
protobuf ``ExportTraceServiceRequest`` (decoded with ``opentelemetry-proto``, as a collector does).
Runs on a thread on a free loopback port.

It counts what it received (``requests``, ``bytes``, ``span_count``) and the CPU time that took
(``cpu_s``) and, unless made with ``keep=False``, keeps each span as a plain
:class:`ReceivedSpan` (the tests read them). A benchmark (``mcpq.ops.bench.tracing_cost``)
counts only: each request is still decoded (protobuf's C parser), but no Python object is made
per span.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

#: The OTLP span kinds by number (``opentelemetry.proto.trace.v1.Span.SpanKind``).
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}

__all__ = ["KINDS", "OtlpReceiver", "ReceivedSpan"]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]
    status: int
    service: str
    resource: dict[str, Any] = field(default_factory=dict)


class OtlpReceiver:
    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.bytes = 0
        self.span_count = 0
        #: CPU time its request threads took (reading, decoding, answering), in seconds.
        self.cpu_s = 0.0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                started = time.thread_time()  # this request's thread (one per connection)
                try:
                    self._post()
                finally:
                    with receiver._lock:
                        receiver.cpu_s += time.thread_time() - started

            def _post(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._take(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """What ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes (the exporter adds ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        if not self.keep:
            count = sum(len(scope.spans) for b in request.resource_spans for scope in b.scope_spans)
            with self._lock:
                self.requests += 1
                self.bytes += len(body)
                self.span_count += count
            return
        spans = []
        for batch in request.resource_spans:
            resource = {a.key: _value(a.value) for a in batch.resource.attributes}
            for scope in batch.scope_spans:
                for span in scope.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=KINDS.get(span.kind, str(span.kind)),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            events=[
                                (e.name, {a.key: _value(a.value) for a in e.attributes})
                                for e in span.events
                            ],
                            links=[
                                (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                            ],
                            status=span.status.code,
                            service=str(resource.get("service.name", "")),
                            resource=resource,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.bytes += len(body)
            self.span_count += len(spans)
            self.spans.extend(spans)

    def counts(self) -> tuple[int, int, int]:
        """Spans, requests and bytes received so far."""
        with self._lock:
            return self.span_count, self.requests, self.bytes

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> list[ReceivedSpan]:
        """Every span received so far, once ``predicate(spans)`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = [(s.service, s.name) for s in spans]
                raise AssertionError(f"spans not there in {timeout}s; received: {names}")
            time.sleep(0.05)
