"""Tracing across processes, exported to a real OTLP/HTTP receiver (``tests/support``): a
gunicorn web replica and a Celery worker with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set.

- a ``tools/call`` carrying an HTTP ``traceparent`` is a SERVER span of ``mcpq-web`` in that
  trace; the run it sends is a CONSUMER span of ``mcpq-worker`` in the same trace, its child;
- a synchronous call (a hidden task) is traced through the worker the same way;
- no span name, attribute or event holds the taskId or a marker put in the arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.stacks import LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
MARKER = "zebra-marker-71"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[Stack]:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    running = LiveStack("traced", tmp_path_factory.mktemp("traced"), tools=DEFAULT_TOOLS, env=env)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def in_trace(trace_id: str) -> Any:
    def check(spans: list[ReceivedSpan]) -> bool:
        kinds = {(s.service, s.kind) for s in spans if s.trace_id == trace_id}
        return {("mcpq-web", "server"), ("mcpq-worker", "consumer")} <= kinds

    return check


def scan(spans: list[ReceivedSpan], *secrets: str) -> list[str]:
    """Every place a secret shows up in what was exported."""
    found = []
    for span in spans:
        texts = [span.name, *map(str, span.attributes.values())]
        texts += [f"{name} {attributes}" for name, attributes in span.events]
        found += [f"{span.name}: {t}" for t in texts if any(s in t for s in secrets)]
    return found


def test_a_task_s_run_is_a_span_in_the_trace_of_the_call_that_created_it(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    headers = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
    with McpClient(stack.url(0)) as client:
        params = {"name": "slow_compute", "arguments": {"seconds": 0, "label": MARKER}}
        created = client.request("tools/call", params, headers=headers, tasks=True).result
        task_id = created["taskId"]
        done = client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)
        assert MARKER in text_of(done["result"])
    spans = receiver.wait_for(in_trace(TRACE_ID))
    ours = [s for s in spans if s.trace_id == TRACE_ID]
    (call,) = [s for s in ours if s.kind == "server" and s.name == "tools/call slow_compute"]
    assert call.parent_id == CLIENT_SPAN and call.service == "mcpq-web"
    assert call.attributes["gen_ai.tool.name"] == "slow_compute"
    assert call.resource["mcpq.role"] == "web"
    (run,) = [s for s in ours if s.kind == "consumer"]
    assert run.name == "run slow_compute" and run.parent_id == call.span_id
    assert run.service == "mcpq-worker" and run.resource["mcpq.role"] == "worker"
    assert run.attributes["mcpq.run.outcome"] == "completed"
    assert run.attributes["messaging.destination.name"] == "mcpq"
    assert scan(receiver.spans, task_id, MARKER) == []
    # The scan can fail: what it looks for, planted where it looks, is found.
    assert scan([call], "tools/call") != []


def test_a_synchronous_call_is_traced_through_the_worker(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    trace_id = "5bf92f3577b34da6a3ce929d0e0e4737"
    headers = {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}
    with McpClient(stack.url(0)) as client:
        params = {"name": "greet", "arguments": {"name": MARKER}}
        reply = client.request("tools/call", params, headers=headers)
        assert text_of(reply.result) == f"Hello, {MARKER}!"
    spans = receiver.wait_for(in_trace(trace_id))
    ours = [s for s in spans if s.trace_id == trace_id]
    (call,) = [s for s in ours if s.kind == "server"]
    (run,) = [s for s in ours if s.kind == "consumer"]
    assert (call.name, run.name, run.parent_id) == ("tools/call greet", "run greet", call.span_id)
    assert scan(receiver.spans, MARKER) == []
