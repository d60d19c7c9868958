"""A claimed run of an ``async def`` tool, run on the process's run loop
(``mcpq.workers.run_loop``, ``MCPQ_ASYNC_RUNS``) instead of on its job's thread.

The job's thread opens what the run holds (its watch of the task, its lease in the keeper's
care), hands the run to the loop and returns. On the loop the tool is awaited as a task
(``ToolCall.on_loop``: a cancel cancels it); its context's round trips run on the process's
small pool of round trips (``mcpq.workers.async_context``), and so does the finish, so nothing
blocks the loop but the tool itself. Then the run lets go of what it held, logs its one "run
ended" line and tells ``on_end`` (the job's metrics and span). The outcomes are the job's own
(``mcpq.workers.runner``): one mapping of a tool's return or raise, one finish, fenced by the
run's generation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from mcpq.shared import tracing
from mcpq.shared.store.wakeups import Watch
from mcpq.workers.async_context import round_trips
from mcpq.workers.outcomes import RunOutcome
from mcpq.workers.run_loop import RunLoop
from mcpq.workers.run_parts import (
    Ending,
    Prepared,
    RunControl,
    RunDeps,
    conclude,
    hand_back,
    interrupted,
    outcome_of,
)


class Prepare(Protocol):
    def __call__(self, *, watch: Watch) -> Prepared: ...


def detach(
    deps: RunDeps,
    ref: str,
    gen: int,
    prepare: Prepare,
    control: RunControl,
    ending: Ending,
    loop: RunLoop,
    on_end: Callable[[RunOutcome], None] | None,
) -> None:
    """Hand the claimed run to ``loop`` (waiting here while the loop is full)."""
    held = contextlib.ExitStack()
    try:
        # The run's watch: it subscribes when the tool first waits (ctx.ask, ctx.sleep).
        prepared = prepare(watch=held.enter_context(deps.wakeups.watch(ref)))
        # Its lease, renewed from now on by the process's keeper (one round trip for all).
        keeping = contextlib.ExitStack()
        keeping.enter_context(deps.leases.keep(prepared.kept))
        held.callback(keeping.close)
    except BaseException:
        held.close()
        raise

    async def run() -> None:
        outcome: RunOutcome | None = None
        try:
            outcome = await _execute(deps, ref, gen, prepared, control, keeping)
        finally:
            held.close()  # (no I/O: the watch's unsubscribe is queued for its listener)
            if outcome is not None:
                ending.log(outcome)
                if on_end is not None:
                    on_end(outcome)

    try:
        loop.start(run)
    except BaseException:
        held.close()
        raise


async def _execute(
    deps: RunDeps,
    ref: str,
    gen: int,
    prepared: Prepared,
    control: RunControl,
    keeping: contextlib.ExitStack,
) -> RunOutcome:
    """``runner._execute``, awaited: the same outcomes of the same raises."""
    s, store = deps.settings, deps.store
    tool, ctx, view, call = prepared.tool, prepared.ctx, prepared.view, prepared.call
    completed = False
    try:
        try:
            value: Any = await call.on_loop()
        except Exception as exc:  # the tool's own error: mapped as a job maps it
            error = exc

            def raised() -> Any:
                raise error

            status, payload, message = outcome_of(raised, tool.name, s.max_result_bytes)
        else:
            status, payload, message = outcome_of(lambda: value, tool.name, s.max_result_bytes)
        completed = True
    except asyncio.CancelledError:
        raise  # the loop stops: the process handed its runs back first
    except BaseException as exc:
        if (stopped := interrupted(exc, control)) is not None:
            return stopped
        await _off_loop(ctx.trace, lambda: hand_back(store, ref, gen))
        raise
    finally:
        keeping.close()  # the lease is the keeper's no more
        ctx.discard_report(keep=completed)
        if view is not None:
            view.close()
    ended: RunOutcome = await _off_loop(
        ctx.trace, lambda: conclude(store, ctx, ref, gen, status, payload, message)
    )
    return ended


async def _off_loop(trace: Any, call: Callable[[], RunOutcome | None]) -> Any:
    """``call()`` on the process's pool of round trips (it waits on Redis), inside the run's
    trace: the loop goes on meanwhile."""

    def traced() -> RunOutcome | None:
        with tracing.current().within(trace):
            return call()

    return await asyncio.get_running_loop().run_in_executor(round_trips(), traced)
