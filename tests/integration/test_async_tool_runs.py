"""An ``async def`` tool run the way a worker runs it (``mcpq.workers.runner.run_task``: claim,
call, finish) on a real Redis: it awaits ``ctx.elicit`` and gets the client's answer, while
its event loop stays free; a cancel ends it at once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcpq.shared.jobs import Run
from mcpq.shared.registry import Registry
from mcpq.shared.settings import Settings
from mcpq.shared.store import TaskStatus
from mcpq.shared.store.clients import sync_client
from mcpq.shared.store.keyspace import Keys
from mcpq.shared.store.wakeups import Wakeups
from mcpq.shared.tools import ToolContext
from mcpq.workers.heartbeat import LeaseKeeper
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.run_loop import RunLoop
from mcpq.workers.runner import RunControl, RunDeps, run_task
from tests.support.procs import wait_until
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.timeout(60)

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
CAUGHT: list[str] = []  # what the awaiting tool caught when it was cancelled

registry = Registry()


@registry.tool(task="required")
async def approve(ctx: ToolContext, change: str) -> dict[str, Any]:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        answer = await ctx.elicit(f"Apply {change}?", SCHEMA)
    except BaseException as exc:
        CAUGHT.append(type(exc).__name__)
        raise
    finally:
        ticker.cancel()
    await ctx.report("applied")
    return {"answer": answer, "ticks_while_waiting": ticks}


@pytest.fixture
def deps(redis_process: RedisProcess, store: Any, keys: Keys) -> Iterator[RunDeps]:
    settings = Settings(redis_url=redis_process.url, lease_s=2.0)
    wakeups = Wakeups(sync_client(settings), keys)
    yield RunDeps(settings, store, registry, LeaseKeeper(store, 2.0, 1.0), wakeups)


def start_run(deps: RunDeps, ref: str) -> tuple[threading.Thread, list[RunOutcome]]:
    outcomes: list[RunOutcome] = []
    run = Run(tool="approve", ref=ref, queue="tools-q")
    control = RunControl(terminate=None, on_state=lambda state: None)
    thread = threading.Thread(target=lambda: outcomes.append(run_task(deps, run, control)))
    thread.start()
    return thread, outcomes


def test_an_async_tool_awaits_an_answer_through_the_worker(deps: RunDeps, store, tasks) -> None:
    tasks.tool = "approve"
    ref = tasks.new(arguments={"change": "v2"})
    thread, outcomes = start_run(deps, ref)
    wait_until(lambda: store.status(ref) == TaskStatus.INPUT_REQUIRED, 10, 0.01, "a question")
    time.sleep(0.3)  # the user thinks; the tool's loop goes on (~30 ticks)
    answer = {"action": "accept", "content": {"ok": True}}
    store.answer(ref, tasks.owner, {"elicit-1": answer}, 30_000)
    thread.join(20)
    assert outcomes == [RunOutcome.COMPLETED]
    record = store.record(ref)
    assert record.status == TaskStatus.COMPLETED
    result = record.result["structuredContent"]
    assert result["answer"] == answer
    assert result["ticks_while_waiting"] >= 10  # its loop ran while the answer was awaited


def test_a_cancel_ends_an_async_tool_awaiting_an_answer(deps: RunDeps, store, tasks) -> None:
    CAUGHT.clear()
    tasks.tool = "approve"
    ref = tasks.new(arguments={"change": "v3"})
    thread, outcomes = start_run(deps, ref)
    wait_until(lambda: store.status(ref) == TaskStatus.INPUT_REQUIRED, 10, 0.01, "a question")
    store.cancel(ref, tasks.owner)
    thread.join(10)
    assert not thread.is_alive()
    assert outcomes == [RunOutcome.CANCELLED]
    assert store.status(ref) == TaskStatus.CANCELLED
    assert CAUGHT and CAUGHT[0] in {"TaskCancelled", "CancelledError"}


def test_a_run_on_the_run_loop_lets_go_of_its_lease_and_watch_when_it_ends(
    deps: RunDeps, store, tasks
) -> None:
    # A run on the loop outlives the job that claimed it, so nothing closes what it holds but
    # the run's own end: a lease left with the keeper would be renewed forever, a watch left
    # subscribed would hold its channel on the listener's connection.
    tasks.tool = "approve"
    ref = tasks.new(arguments={"change": "v4"})
    loop = RunLoop(10, stall_s=0)
    ended: list[RunOutcome] = []
    run = Run(tool="approve", ref=ref, queue="tools-q")
    control = RunControl(terminate=None, on_state=lambda state: None)
    try:
        outcome = run_task(deps, run, control, loop=loop, on_end=ended.append)
        assert outcome is RunOutcome.DETACHED  # the job's thread is back at once
        wait_until(lambda: store.status(ref) == TaskStatus.INPUT_REQUIRED, 10, 0.01, "a question")
        assert (deps.leases.peers(), deps.wakeups.watching) == (1, 1)
        answer = {"action": "accept", "content": {"ok": True}}
        store.answer(ref, tasks.owner, {"elicit-1": answer}, 30_000)
        wait_until(lambda: ended == [RunOutcome.COMPLETED], 10, 0.01, "the run's end")
        assert store.status(ref) == TaskStatus.COMPLETED
        assert (deps.leases.peers(), deps.wakeups.watching) == (0, 0)
    finally:
        loop.stop()
