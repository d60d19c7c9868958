"""Tracing (``mcpq.shared.tracing``, ``mcpq.frontend.request_spans``): on only when the ``OTEL_*``
variables ask, nothing imported and no span made when off; a SERVER span per MCP request, in the
client's trace (``params._meta`` first, then the HTTP ``traceparent``), named and described as the
MCP semantic conventions say, with nothing of the request's content."""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcpq.shared import tracing
from mcpq.shared.logs import JsonFormatter
from tests.unit.fakes import Mcp, meta

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_tracing_is_on_only_when_the_variables_ask(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


def test_off_imports_no_sdk_and_makes_no_span() -> None:
    code = (
        "import sys; from mcpq.shared import tracing; "
        "t = tracing.configure('web', {}); "
        "s = t.server_span('x', {}); "
        "print(t is tracing.OFF, s is t.server_span('y', {}), "
        "any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "False"], done.stderr


def served(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    """The SERVER spans exported (the Redis scripts' CLIENT spans are their children)."""
    return [span for span in spans.get_finished_spans() if span.kind is SpanKind.SERVER]


def test_a_tool_call_is_a_server_span_in_the_client_s_trace(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    # As a task (the client opted in): the call answers at once, with no worker in a unit test.
    params_meta = {**meta(opt_in=True), "traceparent": PARENT}
    reply = mcp.call("echo", {"text": "hi"}, extra={"_meta": params_meta})
    assert reply.status == 200 and reply.result["resultType"] == "task", reply.content
    (span,) = served(spans)
    assert span.name == "tools/call echo" and span.kind is SpanKind.SERVER
    assert span.parent is not None and format(span.context.trace_id, "032x") == TRACE_ID
    assert dict(span.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2026-07-28",
        "jsonrpc.request.id": "1",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
    }
    assert span.resource.attributes["service.name"] == "mcpq-web"
    assert span.resource.attributes["mcpq.role"] == "web"


def test_without_meta_the_http_traceparent_is_the_parent(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    header = f"00-{HEADER_TRACE}-00f067aa0ba902b7-01"
    reply = mcp.post("tools/list", {}, opt_in=False, traceparent=header)
    assert reply.status == 200, reply.content
    (span,) = served(spans)
    assert format(span.context.trace_id, "032x") == HEADER_TRACE


def test_an_error_is_the_span_s_status_and_nothing_of_the_request_is_in_it(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    reply = mcp.post("tasks/get", {"taskId": "secret-task-id-123"}, opt_in=False)
    assert reply.code()[1] == -32602 or reply.error is not None
    (span,) = served(spans)
    assert span.status.status_code is StatusCode.ERROR
    seen: list[Any] = [span.name, *(span.attributes or {}).values()]
    assert not any("secret-task-id-123" in str(value) for value in seen), seen


@contextlib.contextmanager
def web_lines() -> Iterator[list[str]]:
    """The web's log lines as the JSON formatter writes them, at the time they are logged (in
    the request's own context, as in a running web process)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    web = logging.getLogger("mcpq.web")
    level = web.level
    web.addHandler(handler)
    web.setLevel(logging.INFO)
    lines: list[str] = []
    try:
        yield lines
    finally:
        web.removeHandler(handler)
        web.setLevel(level)
        lines.extend(stream.getvalue().splitlines())


def test_log_lines_carry_the_trace_and_span_ids_when_tracing_is_on(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    with web_lines() as lines:
        reply = mcp.post("tools/list", {}, opt_in=False, traceparent=PARENT)
    assert reply.status == 200
    (span,) = served(spans)
    (entry,) = [line for line in lines if '"msg":"mcp request"' in line]
    assert f'"trace_id":"{TRACE_ID}"' in entry, entry
    assert f'"span_id":"{format(span.context.span_id, "016x")}"' in entry, entry


def test_log_lines_carry_no_ids_when_tracing_is_off(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp()
    with web_lines() as lines:
        mcp.post("tools/list", {}, opt_in=False, traceparent=PARENT)
    (entry,) = [line for line in lines if '"msg":"mcp request"' in line]
    assert "trace_id" not in entry
