"""What tracing costs in CPU, for ``mcpq.ops.bench.tracing_cost``: the server CPU a deployment
spends per completed task, what the OpenTelemetry SDK alone spends per span, and the floor of
on / off those two give.

- **Server CPU per task**: user + system time (``/proc/<pid>/stat``) of every process of a
  deployment, read before and after each of its rounds: the web (gunicorn's master and workers),
  the worker (and any child of it), its private redis-server; divided by the tasks it completed in
  that round. A process born during the round counts all it spent, one gone during it nothing.
- **The SDK alone**: a child process (``python -m mcpq.ops.bench.span_floor``, the same venv;
  the benchmark's own process never imports the tracing SDK) makes spans shaped like mcpq's, in
  its mix per task, as fast as it can: a ``tools/call`` SERVER span (5 attributes) with its
  ``EVALSHA create`` CLIENT span (6 ``db.*``/``server.*`` attributes) and the task's traceparent
  injected; ``tasks/get`` SERVER spans (4 attributes and a link to the task's trace) with an
  ``EVALSHA read`` each; the run's CONSUMER span (7 attributes, its parent extracted from the
  traceparent) with ``EVALSHA claim`` and ``EVALSHA finish``; each span current while its
  children are made, as mcpq does. They go through the SDK's ``BatchSpanProcessor`` and
  ``OTLPSpanExporter`` to the benchmark's receiver (a queue large enough that none is dropped).
  Measured: its process CPU (every thread) per span, from the first span to the last export;
  split into create + end (the thread making them) and export (the rest: the processor's thread
  encoding and sending).
- **The floor**: ``off / (off + spans per task * µs per span)``, with off the off deployment's
  CPU per task: the best on / off any code could reach at that span count if tracing cost only
  the SDK's own tight-loop cost (on a host whose CPU is what limits throughput).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from mcpq.ops.bench.cpu import cpu_seconds
from mcpq.ops.bench.loadgen import Target
from mcpq.ops.bench.memory import process_tree
from mcpq.ops.harness.children import REPO

#: A deployment's processes, by part.
PARTS = ("web", "worker", "redis")
#: A task's spans but its ``tasks/get`` ones (tools/call, create, run, claim, finish).
FIXED_SPANS = 5
Reading = dict[str, dict[int, float]]


def cpu_reading(target: Target) -> Reading:
    """The CPU seconds so far of each process of the deployment, by part and pid."""
    pids: dict[str, list[int]] = {part: [] for part in PARTS}
    for child in target.servers:
        part = "web" if child in target.stack.webs else "worker"
        pids[part] += process_tree(child.popen.pid)
    if target.stack.redis_server is not None:
        pids["redis"].append(target.stack.redis_server.pid)
    return {part: {pid: cpu_seconds([pid]) for pid in found} for part, found in pids.items()}


def cpu_spent(before: Reading, after: Reading) -> dict[str, float]:
    """CPU seconds by part between two readings (a process born meanwhile: all it spent)."""
    return {
        part: sum(max(0.0, s - before[part].get(pid, 0.0)) for pid, s in after[part].items())
        for part in PARTS
    }


def floor(off_ms: float, spans_per_task: float, us_per_span: float) -> float:
    """``off / (off + spans * cost)``: on / off if a task's CPU grew by its spans' cost only."""
    cost_ms = off_ms + spans_per_task * us_per_span / 1000
    return round(off_ms / cost_ms, 3) if cost_ms > 0 else 0.0


def sdk_cost(
    endpoint: str, spans: int, spans_per_task: float, delay_ms: int | None
) -> dict[str, Any]:
    """The SDK alone: the child's figures (its JSON object), ``spans`` spans in mcpq's mix for
    ``spans_per_task`` spans a task, exported to ``endpoint``."""
    warm = max(200, spans // 10)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_BSP_MAX_QUEUE_SIZE=str(2 * (spans + warm) + 2048),  # none dropped
    )
    if delay_ms is not None:
        env["OTEL_BSP_SCHEDULE_DELAY"] = str(delay_ms)
    argv = ["--spans", str(spans), "--warm", str(warm), "--per-task", str(spans_per_task)]
    done = subprocess.run(
        [sys.executable, "-m", "mcpq.ops.bench.span_floor", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the SDK's child failed: {done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


# -- the child: the SDK alone -------------------------------------------------------------------


class _Mix:
    """mcpq's spans for one task after another, as its code makes them (``shared.tracing.otel``,
    ``frontend.request_spans``, ``shared.store.script_spans``, ``workers.celery_app``)."""

    def __init__(self, tracer: Any, gets_per_task: float) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.tracer, self.context, self.trace, self.kind = tracer, context, trace, SpanKind
        self.w3c = TraceContextTextMapPropagator()
        self.gets_per_task = gets_per_task
        self.owed = 0.0
        self.server = {
            "db.system.name": "redis",
            "server.address": "127.0.0.1",
            "server.port": 40123,
            "db.namespace": "0",
        }
        self.made = 0

    def _current(self, span: Any, then: Any) -> None:
        token = self.context.attach(self.trace.set_span_in_context(span))
        try:
            then()
        finally:
            self.context.detach(token)

    def _script(self, script: str) -> None:
        if not self.trace.get_current_span().get_span_context().is_valid:
            return
        attributes = {
            **self.server,
            "db.operation.name": "EVALSHA",
            "db.stored_procedure.name": script,
        }
        span = self.tracer.start_span(
            f"EVALSHA {script}", kind=self.kind.CLIENT, attributes=dict(attributes)
        )
        span.end()
        self.made += 1

    def _request(self, method: str, rid: int, more: dict[str, str], then: Any) -> None:
        attributes: dict[str, str | int] = {
            "mcp.method.name": method,
            "mcp.protocol.version": "2026-07-28",
            "jsonrpc.request.id": str(rid),
            **more,
        }
        name = f"{method} noop" if "gen_ai.tool.name" in more else method
        span = self.tracer.start_span(
            name, context=None, kind=self.kind.SERVER, attributes=dict(attributes)
        )
        self._current(span, then)
        span.end()
        self.made += 1

    def task(self) -> None:
        ref = uuid.uuid4().hex
        carrier: dict[str, str] = {}

        def create() -> None:
            self._script("create")
            self.w3c.inject(carrier)  # the task's trace, stored with it and sent to its run

        tool = {"gen_ai.tool.name": "noop", "gen_ai.operation.name": "execute_tool"}
        self._request("tools/call", 2, tool, create)
        self.owed += self.gets_per_task
        while self.owed >= 1:
            self.owed -= 1

            def read() -> None:
                self._script("read")
                span = self.trace.get_current_span()
                span.set_attribute("mcpq.task.ref", ref)
                linked = self.w3c.extract(carrier)
                span.add_link(self.trace.get_current_span(linked).get_span_context())

            self._request("tasks/get", 3, {}, read)
        self._run(ref, carrier["traceparent"])

    def _run(self, ref: str, traceparent: str) -> None:
        attributes = {
            "gen_ai.tool.name": "noop",
            "mcpq.task.ref": ref,
            "messaging.destination.name": "mcpq",
            "mcpq.worker.pool": "io",
            "mcpq.worker.name": "floor@host",
        }
        parent = self.w3c.extract({"traceparent": traceparent})
        span = self.tracer.start_span(
            "run noop", context=parent, kind=self.kind.CONSUMER, attributes=dict(attributes)
        )

        def run() -> None:
            self._script("claim")
            span.set_attribute("mcpq.run.attempt", 1)
            self._script("finish")
            span.set_attribute("mcpq.run.outcome", "completed")

        self._current(span, run)
        span.end()
        self.made += 1

    def spans(self, count: int) -> int:
        """Whole tasks until at least ``count`` spans were made; how many were."""
        self.made = 0
        while self.made < count:
            self.task()
        return self.made


def _child(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpq.ops.bench.span_floor")
    parser.add_argument("--spans", type=int, default=20_000, help="spans measured (20000)")
    parser.add_argument("--warm", type=int, default=2_000, help="spans first, unmeasured")
    parser.add_argument("--per-task", type=float, default=8.0, help="spans a task makes (8)")
    args = parser.parse_args(argv)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "mcpq-span-floor", "mcpq.role": "web"})
    provider = TracerProvider(resource=resource)
    processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    mix = _Mix(provider.get_tracer("mcpq"), max(0.0, (args.per_task - FIXED_SPANS) / 2))
    warm = mix.spans(args.warm)  # imports, the exporter's connection, the caches
    processor.force_flush()
    process, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
    made = mix.spans(args.spans)
    created_s = time.thread_time() - thread
    processor.force_flush()
    total_s = time.process_time() - process
    wall_s = time.perf_counter() - wall
    provider.shutdown()
    found = {
        "spans": made,
        "warm_spans": warm,
        "exported": warm + made,
        "spans_per_task": round(FIXED_SPANS + 2 * mix.gets_per_task, 2),
        "cpu_s": round(total_s, 3),
        "wall_s": round(wall_s, 3),
        "us_per_span": round(total_s / made * 1e6, 1),
        "create_end_us": round(created_s / made * 1e6, 1),
        "export_us": round((total_s - created_s) / made * 1e6, 1),
    }
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child())
