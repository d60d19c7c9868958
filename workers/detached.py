"""A claimed run of an ``async def`` tool, run on the process's run loop
(``mcpq.workers.run_loop``, ``MCPQ_ASYNC_RUNS``) instead of on its job's thread.

The job's thread opens what the run holds (its watch of the task, its lease in the keeper's
care), hands the run to the loop and returns. On the loop the tool is awaited as a task
(``ToolCall.on_loop``: a cancel cancels it); its context's round trips run on the process's
small pool of round trips (``mcpq.workers.async_context``), and so do the mapping of its result
and the finish, so nothing blocks the loop but the tool itself. Then the run lets go of what it
held, logs its one "run ended" line and tells ``on_end`` (the job's metrics and span). The
outcomes are the job's own (``mcpq.workers.runner``): one mapping of a tool's return or raise,
one finish, fenced by the run's generation.

A run moved off a stalled loop (``mcpq.workers.run_loop``) gets another turn on the new loop:
a new context and call, prepared as the first were (no round trip), its lease kept under the new
turn from the moment the old turn's keeping ends; the watch, the place and the run's end are the
run's, across turns. The old turn, stopped before its next step, ends nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Protocol

from mcpq.shared import tracing
from mcpq.shared.store import Reply
from mcpq.shared.store.wakeups import Watch
from mcpq.workers.async_context import round_trips
from mcpq.workers.loop_lanes import Turn
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


class _Held:
    """What one turn holds: its prepared call, and its lease in the keeper's care."""

    __slots__ = ("_leases", "_lock", "_released", "prepared")

    def __init__(self, deps: RunDeps, prepared: Prepared) -> None:
        self.prepared = prepared
        # (Not ``leases.keep``'s block, nor an ExitStack: a run here outlives the call that
        # opens what it holds, and at 10,000 waiting runs each object a run keeps is felt.)
        self._leases = deps.leases
        self._leases.add(prepared.kept)
        self._lock = threading.Lock()
        self._released = False

    def release(self, *, completed: bool) -> None:
        """Once, from whichever thread comes first (the turn's end, or a move)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self._leases.drop(self.prepared.kept)  # the lease is the keeper's no more
        # However the run ends, its last write sets the status message: a report still pending
        # would only be refused or overwrite it.
        self.prepared.ctx.discard_report(keep=completed)
        if self.prepared.view is not None:
            self.prepared.view.close()


class DetachedRun:
    """One claimed run on the run loop, across its turns."""

    __slots__ = (
        "_control",
        "_current",
        "_deps",
        "_ending",
        "_gen",
        "_lock",
        "_next",
        "_on_end",
        "_prepare",
        "_ref",
        "_trace",
        "_watch",
        "tool",
    )

    def __init__(
        self,
        deps: RunDeps,
        ref: str,
        gen: int,
        prepare: Prepare,
        control: RunControl,
        ending: Ending,
        on_end: Callable[[RunOutcome], None] | None,
    ) -> None:
        self._deps, self._ref, self._gen = deps, ref, gen
        self._prepare, self._control, self._ending, self._on_end = prepare, control, ending, on_end
        # What the run holds across turns: its watch (closed at its end).
        self._watch = deps.wakeups.open(ref)
        try:
            first = prepare(watch=self._watch)
            self.tool = first.tool.name
            self._trace = first.ctx.trace  # the run span's: a later turn is prepared inside it
            # Its lease, renewed from now on by the process's keeper (one round trip for all).
            self._next: _Held | None = _Held(deps, first)
            self._current = self._next
            # Subscribed now, not at the tool's first wait: a cancel reaches a run that awaits
            # anything (an HTTP call) at once, through a renewal of its lease out of turn.
            self._watch.on_change = self._changed
            self._watch.subscribe()
        except BaseException:
            self._watch.close()
            raise
        self._lock = threading.Lock()

    def _changed(self) -> None:
        """(On the wake-up listener's thread.) The task changed: an answer, or a cancel."""
        held = self._current
        if held is not None:
            self._deps.leases.soon(held.prepared.kept)

    def close(self) -> None:
        """The run never reached the loop."""
        with self._lock:
            held, self._next = self._next, None
        if held is not None:
            held.release(completed=False)
        self._watch.close()

    def _held_for(self, turn: Turn) -> _Held:
        with self._lock:
            held, self._next = self._next, None
        if held is None:  # a later turn: prepared now, as the first was on the job's thread
            with tracing.current().within(self._trace):
                held = _Held(self._deps, self._prepare(watch=self._watch))
        with self._lock:
            turn.kept = held
        self._current = held
        return held

    def moved(self, turn: Turn) -> None:
        with self._lock:
            held, turn.kept = turn.kept, None
        if isinstance(held, _Held):
            # The old turn's context now says the run was taken over, should a call it made to a
            # thread still be running: the new turn asks, steps and waits again itself.
            held.release(completed=False)
            held.prepared.ctx.interrupt(Reply.SUPERSEDED)

    async def turn(self, turn: Turn) -> None:
        held = self._held_for(turn)
        try:
            outcome = await _execute(self._deps, self._ref, self._gen, held, self._control, turn)
        except BaseException:
            if not turn.moved:
                self._end(None)
            raise
        if not turn.moved:
            self._end(outcome)

    def _end(self, outcome: RunOutcome | None) -> None:
        self._watch.close()  # (no I/O: the watch's unsubscribe is queued for its listener)
        if outcome is not None:
            self._ending.log(outcome)
            if self._on_end is not None:
                self._on_end(outcome)


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
    run = DetachedRun(deps, ref, gen, prepare, control, ending, on_end)
    try:
        loop.start(run)
    except BaseException:
        run.close()
        raise


async def _execute(
    deps: RunDeps,
    ref: str,
    gen: int,
    held: _Held,
    control: RunControl,
    turn: Turn,
) -> RunOutcome:
    """``runner._execute``, awaited: the same outcomes of the same raises."""
    s, store = deps.settings, deps.store
    tool, ctx, call = held.prepared.tool, held.prepared.ctx, held.prepared.call
    completed = False
    try:
        try:
            value: Any = await call.on_loop()
        except Exception as exc:  # the tool's own error: mapped as a job maps it
            error = exc

            def result() -> Any:
                raise error

        else:

            def result() -> Any:
                return value

        completed = True
    except asyncio.CancelledError:
        raise  # the loop stops (the process handed its runs back first), or the run moved
    except BaseException as exc:
        if turn.moved:  # the run goes on on another loop: this turn ends, and nothing else
            raise asyncio.CancelledError() from None
        if (stopped := interrupted(exc, control)) is not None:
            return stopped
        await _off_loop(ctx.trace, lambda: hand_back(store, ref, gen))
        raise
    finally:
        if not turn.moved:  # (a move released the turn's holdings itself)
            held.release(completed=completed)

    def finish() -> RunOutcome:
        # Off the loop: a large result's mapping and size check take their time.
        status, payload, message = outcome_of(result, tool.name, s.max_result_bytes)
        return conclude(store, ctx, ref, gen, status, payload, message)

    ended: RunOutcome = await _off_loop(ctx.trace, finish)
    return ended


async def _off_loop(trace: Any, call: Callable[[], RunOutcome | None]) -> Any:
    """``call()`` on the process's pool of round trips (it waits on Redis), inside the run's
    trace: the loop goes on meanwhile."""

    def traced() -> RunOutcome | None:
        with tracing.current().within(trace):
            return call()

    return await asyncio.get_running_loop().run_in_executor(round_trips(), traced)
