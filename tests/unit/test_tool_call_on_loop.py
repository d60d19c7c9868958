"""``ToolCall.on_loop``: an ``async def`` tool awaited in the run's own task on the run loop.

The tool has no task of its own there, so an interrupt (a cancel, a takeover) cancels the run's
task: the run must raise what the interrupt says, and only for the interrupt's cancel. A cancel
of the task by anyone else (the loop stopping, the run moving) stays a ``CancelledError``, and
no cancel the interrupt made is left pending on the task after the tool is done with it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mcpq.shared.errors import TaskCancelled
from mcpq.workers.execution import ToolCall
from mcpq.workers.interrupts import RunSuperseded

pytestmark = [pytest.mark.quick, pytest.mark.timeout(30)]


def _on_loop(
    tool: Callable[[], Awaitable[Any]], act: Callable[[ToolCall, asyncio.Task[Any]], Any]
) -> tuple[Any, int]:
    """Run ``tool`` through ``ToolCall.on_loop`` in a task; ``act`` is called on the loop once
    the tool awaits. Returns what the task raised or returned, and its pending cancels after."""

    async def main() -> tuple[Any, int]:
        call = ToolCall(tool)
        seen: list[int] = []

        async def run() -> Any:
            try:
                return await call.on_loop()
            finally:
                task = asyncio.current_task()
                assert task is not None
                seen.append(task.cancelling())

        task = asyncio.get_running_loop().create_task(run())
        await asyncio.sleep(0.01)  # the tool awaits now
        act(call, task)
        try:
            outcome: Any = await task
        except BaseException as exc:  # (what the run raised is the result)
            outcome = type(exc)
        return outcome, seen[0]

    return asyncio.run(main())


async def _waits() -> str:
    await asyncio.sleep(10)
    return "done"


def _interrupt(stop: type[BaseException] | None = None) -> Callable[[ToolCall, Any], None]:
    def act(call: ToolCall, task: Any) -> None:
        # From another thread, as the lease keeper does.
        thread = threading.Thread(target=call.interrupt, args=(stop,))
        thread.start()
        thread.join()

    return act


def test_an_interrupt_ends_the_run_as_it_says_and_leaves_no_cancel_pending() -> None:
    assert _on_loop(_waits, _interrupt()) == (TaskCancelled, 0)
    assert _on_loop(_waits, _interrupt(RunSuperseded)) == (RunSuperseded, 0)


def test_a_cancel_of_the_run_s_task_by_anyone_else_stays_a_cancel() -> None:
    assert _on_loop(_waits, lambda call, task: task.cancel()) == (asyncio.CancelledError, 1)


def test_a_cancel_of_the_task_beside_an_interrupt_is_not_taken_for_the_interrupt() -> None:
    def both(call: ToolCall, task: Any) -> None:
        _interrupt()(call, task)
        task.cancel()

    # The loop stops while the run is being cancelled: the task ends cancelled, with only the
    # other cancel left counted.
    assert _on_loop(_waits, both) == (asyncio.CancelledError, 1)


def test_a_tool_that_swallows_its_cancel_returns_and_leaves_no_cancel_pending() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "kept going"
        return "slept"

    assert _on_loop(stubborn, _interrupt()) == ("kept going", 0)


def test_an_interrupt_after_the_tool_returned_cancels_nothing() -> None:
    async def main() -> tuple[str, bool]:
        call = ToolCall(lambda: asyncio.sleep(0, "done"))
        value = await call.on_loop()
        call.interrupt()  # (too late: the tool is no longer awaited)
        await asyncio.sleep(0.01)
        task = asyncio.current_task()
        assert task is not None
        return value, task.cancelling() == 0

    assert asyncio.run(main()) == ("done", True)


def test_an_interrupt_before_the_tool_starts_means_it_never_does() -> None:
    started: list[bool] = []

    async def tool() -> str:
        started.append(True)
        return "ran"

    async def main() -> Any:
        call = ToolCall(tool)
        call.interrupt()
        try:
            return await call.on_loop()
        except TaskCancelled:
            return TaskCancelled

    assert asyncio.run(main()) is TaskCancelled
    assert started == []  # (and its coroutine was closed: no "never awaited" warning)
