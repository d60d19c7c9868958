"""One trace from submit to result, as a client sees it: the official Python SDK (``mcp`` 2.3) as
the client, its context in every request's ``params._meta``, two web replicas and Celery
workers, all exporting to one real OTLP/HTTP receiver (``mcpq.ops.harness.otlp_receiver``).

The chain, inside one span of the client's ("agent turn"):

1. ``tools/call charge_ask_pack`` on replica A (``tests.brought.fastmcp_packing``, a FastMCP tool
   with a ``mcpq.step``): a task (``mcpq.client``: the SDK's ``Client`` with the tasks
   extension). The test polls ``tasks/get`` on A.
2. Attempt 1 charges (a step), asks how to pack, and parks.
3. The answer, ``tasks/update`` on replica B: attempt 2, linked to that request, replays the
   charge (memoized), asks to confirm, and parks.
4. The confirmation, ``tasks/update`` on A: attempt 3 waits for the packing line; its worker is
   SIGKILLed. Its span never ends, so it is never exported; its memoized step's span is.
5. Attempt 4, on another worker (the sweeper's replay): completes; the last ``tasks/get`` reads
   the result.

Then: every span of mcpq's about this task is in the client's trace, each request span the child
of the SDK's span that sent it, each run the child of the create's span, the resumed run linked
to the answer that sent it, the attempts numbered, the step memoized on every replay and run
once (the ledger). No exported name, attribute or event holds the taskId, the ledger's or the
line's path, or a marker put in the arguments, the answers or the result; a marker planted in the
client's own span name is found, so the scan can fail.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mcpq import client as tasks
from mcpq.ops.harness.otlp_receiver import OtlpReceiver, ReceivedSpan
from mcpq.ops.harness.stack import Stack
from mcpq.shared.store import task_ref
from tests.support.anyio_run import run
from tests.support.otlp_receiver import scan, traced_env
from tests.support.procs import wait_until
from tests.support.stacks import FAST_KNOBS, LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOOL = "charge_ask_pack"
ORDER = "order-marker-ibis-31"  # in the arguments
NOTE = "answer-marker-heron-47"  # in an answer (and so in the result)
RESULT = "packed-by-quokka-93"  # in the result only
PLANTED = "planted-marker-owl-12"  # in the client's own span name: the scan must find it


async def never_asked(params: types.ElicitRequestParams) -> types.ElicitResult:
    """Declares elicitation; the test answers the task's questions itself, by ``tasks/update``."""
    raise AssertionError(f"the client was asked through its callback: {params}")


async def until(client: Client, task_id: str, status: str) -> tasks.Task:
    """Poll ``tasks/get`` until the task reads ``status``."""
    while (task := await tasks.get(client, task_id)).status != status:
        assert task.status not in tasks.TERMINAL, task
        await anyio.sleep(0.1)
    return task


async def answer(client: Client, task: tasks.Task, content: dict[str, Any]) -> None:
    """The task's one question answered with ``content``, by ``tasks/update`` on ``client``."""
    (key,) = task.input_requests or {}
    reply = types.ElicitResult(action="accept", content=content)
    await tasks.update(client, task.task_id, {key: reply})


# -- the client's tracer (the SDK's spans go to the global provider) -----------------------------
class _Gated(SpanProcessor):
    """Forwards ended spans to ``inner`` while open: the global provider outlives this module."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.open = True

    def on_end(self, span: ReadableSpan) -> None:
        if self.open:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def client_tracer(receiver: OtlpReceiver) -> Iterator[trace.Tracer]:
    exporter = OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces")
    gated = _Gated(SimpleSpanProcessor(exporter))
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first in this process: ours
        provider = TracerProvider(resource=Resource.create({"service.name": "chain-client"}))
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    provider.add_span_processor(gated)
    yield provider.get_tracer("chain-client")
    gated.open = False


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[Stack]:
    env = {**FAST_KNOBS, **traced_env(receiver)}
    tools = "tests.brought.fastmcp_packing:mcp"
    running = LiveStack("chain", tmp_path_factory.mktemp("chain"), tools=tools, env=env)
    try:
        running.start(webs=0, workers=1, pool="io")
        for replica in ("replica-a", "replica-b"):
            running.start_web(OTEL_RESOURCE_ATTRIBUTES=f"service.instance.id={replica}")
    except BaseException:
        running.close()
        raise
    yield running
    running.close()


def test_one_trace_from_submit_to_result_across_replicas_an_answer_and_a_sigkill(
    stack: LiveStack, receiver: OtlpReceiver, client_tracer: trace.Tracer, tmp_path: Path
) -> None:
    ledger, line = tmp_path / "ledger.txt", tmp_path / "line"
    arguments = {"order_id": ORDER, "ledger": str(ledger), "line": str(line)}
    created: list[str] = []

    def parked(ref: str, runs: int) -> Callable[[], bool]:
        def check() -> bool:
            stored = stack.task_hash(ref)
            return stored.get("parked") == "1" and stored.get("runs") == str(runs)

        return check

    def kill_the_waiting_run(ref: str) -> None:
        """Attempt 3 has replayed its step (exported, memoized) and waits for the line: SIGKILL
        its worker, start another, open the line; the sweeper's replay is attempt 4."""
        receiver.wait_for(lambda spans: len(steps_of(spans, ref)) == 3)
        wait_until(lambda: stack.task_hash(ref).get("runs") == "3", timeout=10, message="run 3")
        (victim,) = stack.worker_that_received(TOOL, ref)
        stack.kill_group(victim, signal.SIGKILL)
        stack.start_worker(pool="io")
        line.touch()
        stack.wait_runs(ref, 4, timeout=30)
        stack.reap(victim)

    results: list[types.CallToolResult] = []

    async def main() -> None:
        wait = anyio.to_thread.run_sync
        with client_tracer.start_as_current_span(f"agent turn {PLANTED}"):
            async with (
                tasks.connect(stack.url(0), on_input=never_asked) as a,
                tasks.connect(stack.url(1), on_input=never_asked) as b,
            ):
                handle = await tasks.start(a, TOOL, arguments)
                assert isinstance(handle, tasks.TaskHandle), handle
                created.append(handle.task_id)
                ref = task_ref(handle.task_id)
                await until(a, handle.task_id, "input_required")
                await wait(lambda: wait_until(parked(ref, 1), timeout=30, message="parked 1"))
                asked = await tasks.get(b, handle.task_id)
                await answer(b, asked, {"ship": True, "note": NOTE})  # on replica B
                await wait(lambda: wait_until(parked(ref, 2), timeout=30, message="parked 2"))
                await answer(a, await until(a, handle.task_id, "input_required"), {"ok": True})
                await wait(lambda: kill_the_waiting_run(ref))
                done = await until(a, handle.task_id, "completed")  # the last tasks/get
                result = done.call_tool_result()
                assert result is not None
                results.append(result)

    run(main)
    (result,) = results
    assert not result.is_error and RESULT in result.content[0].text  # type: ignore[union-attr]
    assert NOTE in result.content[0].text  # type: ignore[union-attr]
    assert ledger.read_text().count("charged") == 1  # the step ran once, in attempt 1
    (task_id,) = created
    ref = task_ref(task_id)

    def finished(spans: list[ReceivedSpan]) -> bool:
        runs = [s for s in spans if s.kind == "consumer" and s.attributes["mcpq.task.ref"] == ref]
        roots = [s for s in spans if s.name.startswith("agent turn")]
        return len(runs) == 3 and bool(roots)

    spans = receiver.wait_for(finished)
    (root,) = [s for s in spans if s.name.startswith("agent turn")]
    assert root.service == "chain-client" and root.parent_id == ""
    ours = [s for s in spans if s.service in ("mcpq-web", "mcpq-worker")]
    about = [s for s in ours if s.attributes.get("mcpq.task.ref") == ref or TOOL in s.name]
    mine = {s.span_id for s in ours if s.trace_id == root.trace_id}
    # Every span of mcpq's about this task is in the client's trace, and so is every span below.
    assert about and all(s.trace_id == root.trace_id for s in about), about
    sent = {s.span_id: s for s in spans if s.service == "chain-client" and s.kind == "client"}

    def request(name: str) -> list[ReceivedSpan]:
        return [s for s in ours if s.kind == "server" and s.name == name and s.span_id in mine]

    # Each request is the child of the SDK's span that sent it (its context came in _meta).
    (call,) = request(f"tools/call {TOOL}")
    assert sent[call.parent_id].name == f"MCP send tools/call {TOOL}"
    assert call.resource["service.instance.id"] == "replica-a"
    updates = sorted(request("tasks/update"), key=lambda s: s.resource["service.instance.id"])
    assert [u.resource["service.instance.id"] for u in updates] == ["replica-a", "replica-b"]
    assert all(sent[u.parent_id].name == "MCP send tasks/update" for u in updates)
    polls = request("tasks/get")
    assert len(polls) >= 3 and all(sent[p.parent_id].name == "MCP send tasks/get" for p in polls)
    # ...and each later request about the task says so, linked to the create's span.
    for later in (*updates, *polls):
        assert later.attributes["mcpq.task.ref"] == ref
        assert later.links == [(root.trace_id, call.span_id)], later
    # The runs: children of the create's span, numbered; attempt 3's span died with its worker.
    runs = sorted(
        (s for s in ours if s.kind == "consumer" and s.attributes["mcpq.task.ref"] == ref),
        key=lambda s: s.attributes["mcpq.run.attempt"],
    )
    assert [r.attributes["mcpq.run.attempt"] for r in runs] == [1, 2, 4]
    assert [r.attributes["mcpq.run.outcome"] for r in runs] == ["parked", "parked", "completed"]
    assert all(r.parent_id == call.span_id and r.service == "mcpq-worker" for r in runs)
    assert runs[0].attributes["mcpq.worker.name"] != runs[2].attributes["mcpq.worker.name"]
    on_b = next(u for u in updates if u.resource["service.instance.id"] == "replica-b")
    assert runs[1].links == [(root.trace_id, on_b.span_id)]  # sent by the answer on replica B
    assert runs[0].links == [] and runs[2].links == []  # the create's own; the sweeper's replay
    # The step: run in attempt 1, memoized in 2, 3 (its span ended before the kill) and 4.
    steps = steps_of(ours, ref)
    by_run = {s.parent_id: s.attributes["mcpq.step.memoized"] for s in steps}
    assert [by_run[r.span_id] for r in runs] == [False, True, True]
    (lost,) = set(by_run) - {r.span_id for r in runs}  # attempt 3's, never exported
    assert by_run[lost] is True
    # Questions and answers are events, by key only.
    events = [[name for name, _ in r.events] for r in runs]
    assert events == [
        ["input requested"],
        ["input answered", "input requested"],
        ["input answered", "input answered"],  # the replay reads both answers back
    ]
    assert all(set(a) == {"mcpq.input.keys"} for r in runs for _, a in r.events), events

    # The Redis scripts of a run are its children, those of the tool's own context (an async
    # tool: on the worker's pool of round trips) too: the claim, the step, the question, the
    # park or the finish.
    def scripts(run: ReceivedSpan) -> set[str]:
        return {s.name for s in ours if s.parent_id == run.span_id and s.kind == "client"}

    assert {"EVALSHA claim", "EVALSHA begin_step", "EVALSHA save_step"} <= scripts(runs[0])
    assert {"EVALSHA request_input", "EVALSHA park"} <= scripts(runs[0])
    assert {"EVALSHA claim", "EVALSHA request_input", "EVALSHA finish"} <= scripts(runs[2])
    # Nothing secret anywhere in what was exported; the planted marker is found.
    secrets = (task_id, ORDER, NOTE, RESULT, str(ledger), str(line))
    assert scan(receiver.spans, *secrets) == []
    assert scan(receiver.spans, PLANTED) == [f"{root.name}: {root.name}"]


def steps_of(spans: list[ReceivedSpan], ref: str) -> list[ReceivedSpan]:
    """The step spans of the runs of task ``ref`` (a step's parent is its run's span, exported
    or not: it is found by the trace of the task's runs)."""
    traces = {s.trace_id for s in spans if s.attributes.get("mcpq.task.ref") == ref}
    return [s for s in spans if s.name == "step" and s.trace_id in traces]
