"""The tools of the benchmarks: the tool module their stacks load (``MCPQ_TOOLS=...``).

Like any tool module it is imported by the web tier and the workers, so it imports only
``shared`` and the standard library; the benchmark drivers (``pools``, ``recovery``,
``answer_latency``) import nothing from here but the tool names.
"""

from __future__ import annotations

import time

from shared.tools import ToolContext, tool

MODULE = "ops.bench.bench_tools"
BULK_QUEUE = "bulk"
SLEEP = "bench_sleep"
EFFECT = "bench_effect"
ANSWER = "bench_answer"

_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@tool(
    name=SLEEP,
    task="optional",
    queue=BULK_QUEUE,
    description="Benchmark: sleeps `seconds` on the bulk pool.",
)
def bench_sleep(ctx: ToolContext, seconds: float = 0.2) -> str:
    ctx.sleep(seconds)
    return "slept"


@tool(
    name=EFFECT,
    task="optional",
    description="Benchmark: a memoized step appends a line to `path`, then the tool sleeps.",
)
def bench_effect(ctx: ToolContext, path: str, seconds: float = 2.0) -> str:
    def effect() -> int:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("effect\n")
        return 1

    ctx.step("effect", effect)
    ctx.report("stepped")
    ctx.sleep(seconds)
    return f"done after {seconds:g}s"


@tool(
    name=ANSWER,
    task="optional",
    description="Benchmark: asks once, returns when it got the answer.",
)
def bench_answer(ctx: ToolContext) -> dict[str, float]:
    ctx.elicit("Go on?", _SCHEMA)
    return {"answered_at": time.time()}
