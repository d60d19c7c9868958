"""The capacity benchmark's private stacks, driven: their knobs, a worker started and seen
beating, tasks created and read by concurrent clients, completions counted from the store."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from mcpq.ops.bench.load import Load
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until

QUIET = {"MCPQ_LOG_LEVEL": "WARNING"}
#: Where completions are counted to time a rate (the store's counters, which processes write
#: every MCPQ_STATS_FLUSH_MS: a second by default, too coarse for a window of a few hundred
#: tasks): written every 50 ms instead, a pipeline of two commands per process each time.
COUNTED = {**QUIET, "MCPQ_STATS_FLUSH_MS": "50"}
#: A worker's counts written at mcpq's default interval instead (a second): what a worker's idle
#: and steady CPU are measured with (``COUNTED``'s flushes cost a worker a few ms a second).
DEFAULT_FLUSH = {"MCPQ_STATS_FLUSH_MS": "1000"}
#: Tasks a freshly started worker runs before it is measured (threads, connections, caches).
WARM_TASKS = 40


def completed(stack: Stack) -> int:
    """Tasks completed so far, whatever their tool (a capacity stack runs one), from the store's
    counters (every shard)."""
    return sum(stack.stats().totals.get("completed", {}).values())


async def create_many(
    load: Load, count: int, clients: int, arguments: dict[str, Any] | None = None
) -> list[str]:
    """``count`` tasks created by ``clients`` concurrent clients (``arguments``: the tool's, else
    the load's); their ids."""
    ids: list[str] = []
    left = [count]

    async def client() -> None:
        async with RawClient(load.url) as http:
            while left[0] > 0:
                left[0] -= 1
                if (task_id := await load.create(http, arguments)) is not None:
                    ids.append(task_id)

    await asyncio.gather(*(client() for _ in range(clients)))
    return ids


async def read_each(load: Load, ids: list[str], clients: int) -> None:
    """One ``tasks/get`` per task, by ``clients`` concurrent clients; a task not completed is
    a failure."""
    todo = list(ids)

    async def client() -> None:
        async with RawClient(load.url) as http:
            while todo:
                if await load.status(http, todo.pop()) != "completed":
                    load.failures += 1

    await asyncio.gather(*(client() for _ in range(clients)))


async def paced_creates(
    load: Load, rate: float, seconds: float, clients: int = 4
) -> tuple[list[str], float]:
    """Tasks created at a steady ``rate`` for ``seconds`` (the i-th sent ``i / rate`` s after the
    start, by whichever of ``clients`` clients is free); their ids, and the seconds from the
    start to the last create's answer."""
    total = max(1, round(rate * seconds))
    slots = iter(range(total))
    ids: list[str] = []
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1  # the clients connect first

    async def client() -> None:
        async with RawClient(load.url) as http:
            for i in slots:  # one schedule, shared
                if (delay := start + i / rate - loop.time()) > 0:
                    await asyncio.sleep(delay)
                if (task_id := await load.create(http)) is not None:
                    ids.append(task_id)

    await asyncio.gather(*(client() for _ in range(clients)))
    return ids, loop.time() - start


def completed_at_least(stack: Stack, count: int) -> bool:
    """Whether ``count`` tasks of the no-op tool have completed."""
    return completed(stack) >= count


def wait_completed(stack: Stack, count: int, timeout: float) -> None:
    wait_until(
        partial(completed_at_least, stack, count),
        timeout=timeout,
        interval=0.25,
        message=f"{count} completed tasks",
    )


def warm(stack: Stack, load: Load, count: int = WARM_TASKS) -> None:
    """``count`` tasks created and run, and counted in the store (nothing left in flight)."""
    before = completed(stack)
    ids = asyncio.run(create_many(load, count, 4))
    wait_completed(stack, before + len(ids), timeout=120)


def start_worker(stack: Stack, node: str, pool: str | None = None, **env: str) -> Any:
    """``mcpq worker`` with its default concurrency (``env``: its own variables); returns once it
    beats in Redis."""
    worker = stack.spawn_pool("mcpq", node, concurrency=None, pool=pool, **env)
    stack.wait_ready(worker, lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers))
    return worker
