"""Tracing across processes, exported to a real OTLP/HTTP receiver (``tests/support``): a
gunicorn web replica and a Celery worker with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set.

- a ``tools/call`` carrying an HTTP ``traceparent`` is a SERVER span of ``mcpq-web`` in that
  trace; the run it sends is a CONSUMER span of ``mcpq-worker`` in the same trace, its child;
- a synchronous call (a hidden task) is traced through the worker the same way;
- a run parked on its question and resumed by the answer (a request in another trace) stays in
  the create's trace, attempt 2, linked to the answer's span;
- a 2025-era client (the TypeScript SDK) with an HTTP ``traceparent`` is traced through the
  worker too;
- a worker SIGKILLed while its tool waits: the replay on another worker is attempt 2 in the
  create's trace, its step memoized (the killed run's own span is never exported);
- no span name, attribute or event holds the taskId or a marker put in the arguments.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpq.ops.harness.mcp_client import McpClient, text_of
from mcpq.ops.harness.stack import Stack
from mcpq.shared.settings import DEFAULT_TOOLS
from mcpq.shared.store import task_ref
from tests.clients.node_clients import installed_or_skip, run_sdk_scenario
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, scan, traced_env
from tests.support.procs import wait_until
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
    env = traced_env(receiver)
    tools = f"{DEFAULT_TOOLS},tests.brought.fastmcp_steps:mcp"
    running = LiveStack("traced", tmp_path_factory.mktemp("traced"), tools=tools, env=env)
    running.start(webs=1, workers=1, pool="io")
    yield running
    running.close()


def in_trace(trace_id: str) -> Any:
    def check(spans: list[ReceivedSpan]) -> bool:
        kinds = {(s.service, s.kind) for s in spans if s.trace_id == trace_id}
        return {("mcpq-web", "server"), ("mcpq-worker", "consumer")} <= kinds

    return check


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


def test_a_resumed_run_joins_the_create_s_trace_linked_to_the_answer(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    """The run parks on its question (``MCPQ_INPUT_HOLD_S``); the answer, in a trace of its own,
    sends the second run: that run is still in the create's trace (attempt 2), linked to the
    answer's span."""
    created_trace, answer_trace = (
        "6bf92f3577b34da6a3ce929d0e0e4738",
        "7bf92f3577b34da6a3ce929d0e0e4739",
    )
    with McpClient(stack.url(0)) as client:
        params = {"name": "confirm_delete", "arguments": {"filename": MARKER}}
        headers = {"traceparent": f"00-{created_trace}-{CLIENT_SPAN}-01"}
        task_id = client.request("tools/call", params, headers=headers, tasks=True).result["taskId"]
        client.wait_for_status(task_id, "input_required", timeout=30, interval=0.1)
        ref = task_ref(task_id)
        wait_until(lambda: stack.task_hash(ref).get("parked") == "1", timeout=30, message="parked")
        answer = {"action": "accept", "content": {"confirm": True}}
        headers = {"traceparent": f"00-{answer_trace}-{CLIENT_SPAN}-01"}
        assert client.update(task_id, {"elicit-1": answer}, headers=headers).result
        client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)

    def both_runs(spans: list[ReceivedSpan]) -> bool:
        runs = [s for s in spans if s.trace_id == created_trace and s.kind == "consumer"]
        # The answer's own span, not just any of its trace: its scripts' spans end (and may be
        # exported) before it does.
        answered = any(s.trace_id == answer_trace and s.kind == "server" for s in spans)
        return len(runs) == 2 and answered

    spans = receiver.wait_for(both_runs)
    runs = sorted(
        (s for s in spans if s.trace_id == created_trace and s.kind == "consumer"),
        key=lambda s: s.attributes["mcpq.run.attempt"],
    )
    assert [r.attributes["mcpq.run.attempt"] for r in runs] == [1, 2]
    assert [r.attributes["mcpq.run.outcome"] for r in runs] == ["parked", "completed"]
    (call,) = [s for s in spans if s.trace_id == created_trace and s.kind == "server"]
    assert runs[0].parent_id == runs[1].parent_id == call.span_id
    (update,) = [s for s in spans if s.trace_id == answer_trace and s.kind == "server"]
    assert update.name == "tasks/update"
    assert runs[1].links == [(answer_trace, update.span_id)], runs[1].links
    assert runs[0].links == []
    assert scan(receiver.spans, task_id, MARKER) == []


def test_a_step_is_a_span_memoized_on_the_replay_and_questions_are_events(
    stack: Stack, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """``charge_and_ship`` (a FastMCP tool with ``mcpq.step``) charges, then asks; it parks, and
    the answer's run replays it: its step is a span of each run, memoized on the second; the
    question is an event of both runs (requested, then answered), by key only."""
    trace_id = "8bf92f3577b34da6a3ce929d0e0e4740"
    ledger = tmp_path / "ledger.txt"
    with McpClient(stack.url(0)) as client:
        params = {
            "name": "charge_and_ship",
            "arguments": {"order_id": MARKER, "ledger": str(ledger)},
        }
        headers = {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}
        task_id = client.request("tools/call", params, headers=headers, tasks=True).result["taskId"]
        client.wait_for_status(task_id, "input_required", timeout=30, interval=0.1)
        ref = task_ref(task_id)
        wait_until(lambda: stack.task_hash(ref).get("parked") == "1", timeout=30, message="parked")
        answer = {"action": "accept", "content": {"ship": True}}
        assert client.update(task_id, {"elicit-1": answer}).result
        client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)

    def done(spans: list[ReceivedSpan]) -> bool:
        # Both runs and both steps: a step ends (and may be exported) before its run does.
        ours = [s for s in spans if s.trace_id == trace_id]
        steps = [s for s in ours if s.name == "step"]
        return len(steps) == 2 and len([s for s in ours if s.kind == "consumer"]) == 2

    spans = [s for s in receiver.wait_for(done) if s.trace_id == trace_id]
    runs = {s.span_id: s for s in spans if s.kind == "consumer"}
    first, second = sorted(runs.values(), key=lambda s: s.attributes["mcpq.run.attempt"])
    steps = {s.parent_id: s for s in spans if s.name == "step"}
    assert steps[first.span_id].attributes == {
        "mcpq.step.name": "charge",
        "mcpq.step.memoized": False,
    }
    assert steps[second.span_id].attributes["mcpq.step.memoized"] is True
    assert [name for name, _ in first.events] == ["input requested"]
    assert first.events[0][1] == {"mcpq.input.keys": "elicit-1"}
    assert [name for name, _ in second.events] == ["input answered"]
    assert ledger.read_text().count("charged") == 1
    assert scan(receiver.spans, task_id, MARKER, str(ledger)) == []


def test_a_2025_era_client_s_synchronous_call_is_traced_through_the_worker(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    """The TypeScript SDK (1.32.2, a 2025-11-25 session) with an HTTP ``traceparent`` on its
    requests: its ``tools/call`` is a span of that trace, and so is the run on the worker."""
    node = installed_or_skip()
    trace_id = "9bf92f3577b34da6a3ce929d0e0e4741"
    headers = {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}
    args = {"tool": "greet", "arguments": {"name": MARKER}, "headers": headers}
    ran = run_sdk_scenario(node, stack.url(0), "call", args)
    assert ran.ok and ran.report.get("error") is None, ran.describe()
    assert ran.report["protocolVersion"] == "2025-11-25", ran.describe()

    # The session's other requests (initialize, its notification) are server spans of this
    # trace too, exported apart from the call's: wait for the call's own.
    def called(spans: list[Any]) -> bool:
        names = {s.name for s in spans if s.trace_id == trace_id and s.kind == "server"}
        return in_trace(trace_id)(spans) and "tools/call greet" in names

    spans = [s for s in receiver.wait_for(called) if s.trace_id == trace_id]
    (call,) = [s for s in spans if s.kind == "server" and s.name == "tools/call greet"]
    (run,) = [s for s in spans if s.kind == "consumer"]
    assert call.parent_id == CLIENT_SPAN and run.parent_id == call.span_id
    assert call.attributes["mcp.protocol.version"] == "2025-11-25"
    assert scan(receiver.spans, MARKER) == []


def test_a_replay_after_a_sigkill_is_in_the_create_s_trace_with_its_step_memoized(
    stack: Stack, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """The worker running ``charge_and_ship`` is SIGKILLed while the tool waits for its answer
    (its step done, its question asked); the sweeper sends the run again, to another worker:
    that run is attempt 2 in the create's trace, its step memoized. (The killed run's own span
    never ends, so it is never exported; its step's, which ended before the kill, is.)"""
    trace_id = "abf92f3577b34da6a3ce929d0e0e4742"
    ledger = tmp_path / "ledger.txt"
    with McpClient(stack.url(0)) as client:
        arguments = {"order_id": "K-9", "ledger": str(ledger)}
        headers = {"traceparent": f"00-{trace_id}-{CLIENT_SPAN}-01"}
        params = {"name": "charge_and_ship", "arguments": arguments}
        task_id = client.request("tools/call", params, headers=headers, tasks=True).result["taskId"]
        client.wait_for_status(task_id, "input_required", timeout=30, interval=0.1)
        ref = task_ref(task_id)
        (victim,) = wait_until(
            lambda: stack.worker_that_received("charge_and_ship", ref), timeout=10, message="it"
        )
        receiver.wait_for(
            lambda spans: any(s.trace_id == trace_id and s.name == "step" for s in spans)
        )
        stack.kill_group(victim, signal.SIGKILL)
        stack.start_worker(pool="io")
        stack.wait_runs(ref, 2, timeout=30)
        stack.reap(victim)
        client.wait_for_status(task_id, "input_required", timeout=30, interval=0.1)
        answer = {"action": "accept", "content": {"ship": True}}
        assert client.update(task_id, {"elicit-1": answer}).result
        client.wait_for_status(task_id, "completed", timeout=30, interval=0.1)

    def replayed(spans: list[ReceivedSpan]) -> bool:
        runs = [s for s in spans if s.trace_id == trace_id and s.kind == "consumer"]
        return any(r.attributes.get("mcpq.run.outcome") == "completed" for r in runs)

    spans = [s for s in receiver.wait_for(replayed) if s.trace_id == trace_id]
    (call,) = [s for s in spans if s.kind == "server"]
    runs = sorted(
        (s for s in spans if s.kind == "consumer"), key=lambda s: s.attributes["mcpq.run.attempt"]
    )
    # The replay is attempt 2 (a third, if it parked before the answer came, is in it too).
    attempts = [r.attributes["mcpq.run.attempt"] for r in runs]
    assert attempts[0] == 2 and attempts == list(range(2, 2 + len(runs))), attempts
    assert all(r.parent_id == call.span_id for r in runs), runs
    steps = sorted(
        (s for s in spans if s.name == "step"), key=lambda s: s.attributes["mcpq.step.memoized"]
    )
    assert [s.attributes["mcpq.step.memoized"] for s in steps][:1] == [False], steps
    assert all(s.attributes["mcpq.step.memoized"] for s in steps[1:]) and len(steps) >= 2, steps
    assert ledger.read_text().count("charged") == 1
