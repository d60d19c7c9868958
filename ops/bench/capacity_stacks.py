"""The capacity benchmark's private stacks, driven: their knobs, a worker started and seen
beating, tasks created and read by concurrent clients, completions counted from the store."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from mcpq.ops.bench.load import TOOL, Load
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until

QUIET = {"MCPQ_LOG_LEVEL": "WARNING"}
#: Where completions are counted to time a rate (the store's counters, which processes write
#: every MCPQ_STATS_FLUSH_MS: a second by default, too coarse for a window of a few hundred
#: tasks): written every 50 ms instead, a pipeline of two commands per process each time.
COUNTED = {**QUIET, "MCPQ_STATS_FLUSH_MS": "50"}


def completed(stack: Stack) -> int:
    """Tasks of the no-op tool completed so far, from the store's counters (every shard)."""
    return stack.stats().totals.get("completed", {}).get(TOOL, 0)


async def create_many(load: Load, count: int, clients: int) -> list[str]:
    """``count`` tasks created by ``clients`` concurrent clients; their ids."""
    ids: list[str] = []
    left = [count]

    async def client() -> None:
        async with RawClient(load.url) as http:
            while left[0] > 0:
                left[0] -= 1
                if (task_id := await load.create(http)) is not None:
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


def start_worker(stack: Stack, node: str, pool: str | None = None) -> Any:
    """``mcpq worker`` with its default concurrency; returns once it beats in Redis."""
    worker = stack.spawn_pool("mcpq", node, concurrency=None, pool=pool)
    stack.wait_ready(worker, lambda: any(n.startswith(f"{node}@") for n in stack.stats().workers))
    return worker
