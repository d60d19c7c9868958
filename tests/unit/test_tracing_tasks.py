"""Tracing a task's requests (``mcpq.shared.tracing``): each Redis script is a CLIENT span of the
request that ran it (``mcpq.shared.store.script_spans``), and none outside a request or a run;
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` are spans of their own requests, linked to
the task's trace (the create's, stored with the task); a streamed reply's span ends with its
stream, the stream's reads its children."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from mcpq.shared.store.keyspace import task_ref
from tests.unit.fakes import Mcp, meta
from tests.unit.test_answers import ASK, waiting_task

CREATE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CREATE_PARENT = f"00-{CREATE_TRACE}-00f067aa0ba902b7-01"
LATER_TRACE = "0af7651916cd43dd8448eb211c80319c"
LATER_PARENT = f"00-{LATER_TRACE}-b7ad6b7169203331-01"


def trace_of(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


def one(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    (found,) = [span for span in spans.get_finished_spans() if span.name == name]
    return found


def created(mcp: Mcp, spans: InMemorySpanExporter) -> tuple[str, ReadableSpan]:
    """A task created in the client's trace (``_meta``): its id and its create's span."""
    params_meta = {**meta(opt_in=True), "traceparent": CREATE_PARENT}
    reply = mcp.call("echo", {"text": "marker-arg-51"}, extra={"_meta": params_meta})
    assert reply.result["resultType"] == "task", reply.content
    return reply.result["taskId"], one(spans, "tools/call echo")


def test_every_script_of_a_request_is_a_client_span_of_its_span(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    task_id, call = created(make_mcp(), spans)
    scripts = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    # The create, then its "enqueued" mark; each first met NOSCRIPT (a new Redis has no script
    # cached), an error span of its own by the error's type, and ran again once loaded.
    assert [(span.name, span.status.status_code.name) for span in scripts] == [
        ("EVALSHA create", "ERROR"),
        ("EVALSHA create", "UNSET"),
        ("EVALSHA mark_enqueued", "ERROR"),
        ("EVALSHA mark_enqueued", "UNSET"),
    ]
    assert dict(scripts[0].attributes or {})["error.type"] == "NoScriptError"
    assert all(span.parent and span.parent.span_id == call.context.span_id for span in scripts)
    script = scripts[1]
    assert trace_of(script) == CREATE_TRACE
    attributes = dict(script.attributes or {})
    assert attributes["db.system.name"] == "redis"
    assert attributes["db.operation.name"] == "EVALSHA"
    assert attributes["db.stored_procedure.name"] == "create"
    assert attributes["db.namespace"] == "0"  # (the port is Redis's default: left out)
    # Nothing of the call: no key (it names the task's ref), no argument.
    assert set(attributes) == {
        "db.system.name",
        "db.operation.name",
        "db.stored_procedure.name",
        "db.namespace",
        "server.address",
    }
    assert not any(task_ref(task_id) in str(v) or "marker" in str(v) for v in attributes.values())


def test_a_script_outside_any_span_makes_no_trace(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    task_id, _ = created(mcp, spans)
    spans.clear()
    claim = mcp.worker.claim_now(task_id)  # a script with no request or run around it
    assert claim.record is not None
    assert spans.get_finished_spans() == ()


def linked_to(span: ReadableSpan, call: ReadableSpan) -> bool:
    return [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (call.context.trace_id, call.context.span_id)
    ]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
def test_a_later_request_about_the_task_is_its_own_span_linked_to_the_task_s_trace(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp], method: str
) -> None:
    mcp = make_mcp()
    task_id, call = created(mcp, spans)
    reply = mcp.post(method, {"taskId": task_id}, traceparent=LATER_PARENT)
    assert reply.status == 200, reply.content
    later = one(spans, method)
    assert trace_of(later) == LATER_TRACE  # its own request's trace, as the client sent it
    assert linked_to(later, call)
    assert dict(later.attributes or {})["mcpq.task.ref"] == task_ref(task_id)
    assert not any(task_id in str(v) for v in (later.attributes or {}).values())


def test_an_answer_is_its_own_span_linked_to_the_task_s_trace(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("ask", {"k": ASK}))
    params_meta = {**meta(opt_in=True), "traceparent": CREATE_PARENT}
    reply = mcp.call("echo", {"text": "x"}, extra={"_meta": params_meta})
    task_id = reply.result["taskId"]
    mcp.producer.on_enqueue = None
    call = one(spans, "tools/call echo")
    answer = {"k": {"action": "accept", "content": {"ok": True}}}
    params = {"taskId": task_id, "inputResponses": answer}
    assert mcp.post("tasks/update", params, traceparent=LATER_PARENT).status == 200
    update = one(spans, "tasks/update")
    assert trace_of(update) == LATER_TRACE and linked_to(update, call)
    # The resumed run is sent from the answer's request: its message carries that request.
    (first, none), (resumed, created) = mcp.producer.traces
    assert first.split("-")[1:3] == [CREATE_TRACE, format(call.context.span_id, "016x")]
    assert none == ""  # the sender created the task: its trace is the task's
    assert resumed.split("-")[1:3] == [LATER_TRACE, format(update.context.span_id, "016x")]
    assert created == first  # the run's parent, named in its message: the worker reads nothing


def test_without_tracing_nothing_is_linked_or_stored(make_mcp: Callable[..., Mcp]) -> None:
    mcp = make_mcp()
    task_id = waiting_task(mcp)
    assert mcp.peek.hget(mcp.keys.task(task_ref(task_id)), "trace") is None
    assert mcp.post("tasks/cancel", {"taskId": task_id}).status == 200


def test_a_streamed_reply_s_span_ends_with_its_stream(
    spans: InMemorySpanExporter, make_mcp: Callable[..., Mcp]
) -> None:
    mcp = make_mcp()
    mcp.producer.on_enqueue = mcp.worker.runs(lambda record, answers: ("completed", DONE))
    reply = mcp.call("echo", {"text": "x"}, opt_in=False, traceparent=CREATE_PARENT)
    assert reply.streamed and reply.result["content"] == DONE["content"], reply.content
    call = one(spans, "tools/call echo")
    children = [span for span in spans.get_finished_spans() if span.parent is not None]
    mine = [span for span in children if span.parent.span_id == call.context.span_id]  # type: ignore[union-attr]
    # The stream reads the task it follows: that read runs after the handler returned, and is
    # still the request's child, ended before the request's span.
    reads = [span for span in mine if span.name == "EVALSHA read"]
    assert reads, [span.name for span in mine]
    assert call.end_time is not None
    assert all(span.end_time is not None and span.end_time <= call.end_time for span in mine)


DONE: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], "isError": False}
