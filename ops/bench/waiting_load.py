"""The load of ``mcpq.ops.bench.waiting_runs``: the waiting runs created (each kind of wait with
its arguments), how soon all are held, a short tool beside them, cancels of some, and the slow
HTTP server some of them wait on (``mcpq.ops.bench.slow_http``)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
import redis

from mcpq.ops.bench.bench_tools import ASYNC_ANSWER, ASYNC_HTTP, ASYNC_SLEEP
from mcpq.ops.bench.load import TOOL, Load
from mcpq.ops.bench.rawhttp import RawClient
from mcpq.ops.bench.waiting_kill import CLIENTS, running
from mcpq.ops.harness.children import Child
from mcpq.ops.harness.stack import Stack
from mcpq.ops.runtime.processes import wait_until
from mcpq.shared.logs import task_hash
from mcpq.shared.store import task_ref

#: The tool each kind of wait runs.
KINDS = {"sleep": ASYNC_SLEEP, "answer": ASYNC_ANSWER, "http": ASYNC_HTTP, "sync": TOOL}
Spec = tuple[str, dict[str, Any]]  # a tool and its arguments


def specs_of(kinds: Sequence[str], runs: int, seconds: float, server: str | None) -> list[Spec]:
    """``runs`` creates, the kinds taking turns (so each kind is spread over the whole run). The
    async sleeps and HTTP calls wait until ``seconds`` from now (a run replayed after a kill
    waits what is left: all end about then, however long the handover); ``slow_compute`` waits
    ``seconds`` from each run's start."""
    until = time.time() + seconds
    made: list[Spec] = []
    for i in range(runs):
        kind = kinds[i % len(kinds)]
        if kind == "answer":
            made.append((ASYNC_ANSWER, {}))
        elif kind == "http":
            made.append((ASYNC_HTTP, {"url": f"{server}/hold", "until": until}))
        elif kind == "sleep":
            made.append((ASYNC_SLEEP, {"until": until}))
        else:
            made.append((KINDS[kind], {"seconds": seconds}))
    return made


async def create(load: Load, specs: list[Spec], clients: int) -> list[tuple[str, str]]:
    """Every spec created by ``clients`` concurrent keep-alive clients; (task id, tool) of each
    created, in the order of their answers."""
    created: list[tuple[str, str]] = []
    todo = iter(specs)  # one list, shared: each client takes the next spec

    async def client() -> None:
        async with RawClient(load.url) as http:
            for tool, arguments in todo:
                params = {"name": tool, "arguments": arguments}
                if (result := await load.call(http, "tools/call", params, tool)) is not None:
                    created.append((str(result["taskId"]), tool))

    await asyncio.gather(*(client() for _ in range(clients)))
    return created


async def wait_many(
    load: Load, specs: list[Spec], admin: redis.Redis
) -> tuple[list[tuple[str, str]], float, float, int]:
    """The tasks created and then held by a run each: (task id, tool) of each, the seconds from
    the first create until the last was answered, and until all were held (or 300 s passed),
    and how many were then."""
    started = time.monotonic()
    created = await create(load, specs, CLIENTS)
    created_s = time.monotonic() - started
    ids = [task_id for task_id, _ in created]
    while (held := running(admin, ids)) < len(specs) and time.monotonic() - started < 300:
        await asyncio.sleep(0.1)
    return created, created_s, time.monotonic() - started, held


async def short_tool(load: Load, tool: str) -> float:
    """A 0.3 s task created now: the seconds until it was seen completed."""
    sent = time.monotonic()
    async with RawClient(load.url) as http:
        params = {"name": tool, "arguments": {"seconds": 0.3}}
        short = await load.call(http, "tools/call", params, tool)
        if short is not None:
            await load.until_done(http, str(short["taskId"]), 0.01)
    return time.monotonic() - sent


def in_turn(created: Sequence[tuple[str, str]], count: int) -> list[str]:
    """``count`` of the tasks, each tool's in turn (in the order they were created)."""
    by_tool: dict[str, list[str]] = {}
    for task_id, tool in created:
        by_tool.setdefault(tool, []).append(task_id)
    turns = itertools.zip_longest(*by_tool.values())
    return [task_id for turn in turns for task_id in turn if task_id is not None][:count]


async def cancel_some(load: Load, ids: list[str], worker: Child) -> list[float]:
    """Cancel each; how long until the worker logged the end of its run (10 s at most)."""
    took = []
    async with httpx.AsyncClient(timeout=30) as http:
        for task_id in ids:
            needle = f'"task":"{task_hash(task_ref(task_id))}"'
            # Only what the worker logs from now on is read: its whole log (lines for each of
            # thousands of runs), read every 10 ms, would take the CPU the worker needs.
            offset = worker.log_path.stat().st_size
            sent = time.monotonic()
            await load.call(http, "tasks/cancel", {"taskId": task_id}, task_id)
            while time.monotonic() - sent < 10:
                if any(needle in line and '"cancelled"' in line for line in _lines(worker, offset)):
                    break
                await asyncio.sleep(0.01)
            took.append(time.monotonic() - sent)
    return took


def _lines(worker: Child, offset: int) -> list[str]:
    """The lines the worker logged past byte ``offset``."""
    with open(worker.log_path, "rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", errors="replace").splitlines()


# -- the slow server --
def start_slow_server(stack: Stack) -> str:
    """The slow HTTP server, a child of the stack; its base URL."""
    argv = [sys.executable, "-m", "mcpq.ops.bench.slow_http"]
    child = stack.spawn("slow-http", argv)
    found = wait_until(
        lambda: re.search(r"listening on (http://\S+)", child.log()),
        timeout=30,
        message="the slow HTTP server",
    )
    return found.group(1)


def requests_held(server: str, runs: int) -> int:
    """The requests the slow server holds once it holds ``runs`` (a run is held from its claim,
    and sends its GET a moment later), or after 60 s."""

    def holding() -> int:
        return int(httpx.get(f"{server}/stats", timeout=10).json()["holding"])

    with contextlib.suppress(TimeoutError):
        wait_until(lambda: holding() >= runs, timeout=60, interval=0.1, message="held requests")
    return holding()
