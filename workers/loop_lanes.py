"""The parts of the run loop (``mcpq.workers.run_loop``) that run on its loops: a run's turn
on a loop, the lane (one event loop on a thread of its own), the driver that times every step a
task takes there and stops a moved turn's, the clock of the time the process could not run at
all, and where a stalled loop's thread is (for the warning that names the line)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from types import FrameType
from typing import Any, Protocol


class LoopRun(Protocol):
    """A run handed to the run loop (``mcpq.workers.detached``)."""

    @property
    def tool(self) -> str:
        """Its tool's name (a tool that blocked the loop is named by it)."""
        ...

    def turn(self, turn: Turn) -> Awaitable[None]:
        """The run from its start, awaited on ``turn``'s loop. A run moved off a stalled loop
        gets another turn on the new loop, from its start again, as a replay."""
        ...

    def moved(self, turn: Turn) -> None:
        """``turn`` was left on a stalled loop (called on the watcher's thread, before the
        next turn starts): let go of what that turn held (its lease's keeping, its context);
        what the run holds across turns (its watch, its place) stays."""
        ...


class Turn:
    """One run's time on one loop: its first, or the one it got when moved off a stalled loop."""

    __slots__ = ("kept", "lane", "moved", "run")

    def __init__(self, run: LoopRun, lane: Lane) -> None:
        self.run = run
        self.lane = lane
        #: Set once, under the run loop's lock: this turn's run goes on on another loop.
        self.moved = False
        #: What the run holds for this turn (the run's own: ``mcpq.workers.detached``), let go
        #: of when the turn ends or moves.
        self.kept: object | None = None


#: The turn whose task runs now (a task's context: the tasks a tool starts inherit it).
TURN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("mcpq_turn", default=None)


class _Steps:
    """Drives one task's coroutine step by step on a lane (see the module's doc): each step is
    timed (``lane.step``), and a moved turn's coroutine never takes another step: it gets
    ``CancelledError`` instead, wherever it waits.

    NOTE: an iterator of its own (``send``, ``throw``, ``close``), not a generator: a
    generator's frame would be held for as long as its task waits, one per waiting run."""

    __slots__ = ("_coro", "_lane", "_turn")

    def __init__(self, coro: Coroutine[Any, Any, Any], lane: Lane, turn: Turn | None) -> None:
        self._coro, self._lane, self._turn = coro, lane, turn

    def __await__(self) -> _Steps:
        return self

    def __iter__(self) -> _Steps:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        turn = self._turn
        if turn is not None and turn.moved:
            return self._step(self._coro.throw, asyncio.CancelledError())
        return self._step(self._coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """The task's cancel, a future's exception (as a generator's ``throw`` takes it)."""
        if isinstance(typ, BaseException):
            error = typ
        elif isinstance(val, BaseException):
            error = val
        else:
            error = typ() if val is None else typ(val)
        if tb is not None:
            error = error.with_traceback(tb)
        turn = self._turn
        if turn is not None and turn.moved and not isinstance(error, asyncio.CancelledError):
            error = asyncio.CancelledError()
        return self._step(self._coro.throw, error)

    def close(self) -> None:
        self._coro.close()

    def _step(self, resume: Callable[[Any], Any], arg: Any) -> Any:
        """One step: ``StopIteration`` (the coroutine returned) ends the ``await`` with its
        value, as a generator's return would."""
        lane = self._lane
        # One attribute written, never a lock: only this loop's thread runs its steps, and the
        # watcher reads the tuple whole (it is replaced, not changed).
        lane.step = (self._turn, time.monotonic(), lane.clock.starved)
        try:
            return resume(arg)
        finally:
            lane.step = None


async def _stepped(coro: Coroutine[Any, Any, Any], lane: Lane, turn: Turn | None) -> Any:
    # A coroutine of its own around the driver: whatever looks at a task's coroutine (anyio's
    # cancel scopes do) finds a real one.
    return await _Steps(coro, lane, turn)


class Clock:
    """How long this process's threads could not run at all (a garbage collection, a storm of
    threads fighting for the GIL), as the watcher sees it: its own sleeps overrun by that much.

    NOTE: a step's time on the loop counts against it only outside such stretches. A step that
    blocks in a call (a sleep, a socket) lets the GIL go, so the watcher wakes on time and the
    whole wait counts; a step that was merely not given the GIL (or paused by a collection of
    10,000 runs' objects) is no blocking call, and moving every run for it would be a false
    alarm (one was seen at 10,000 runs in HTTP calls, inside the loop's own selector)."""

    def __init__(self) -> None:
        self.starved = 0.0


class Lane:
    """One event loop on a thread of its own."""

    def __init__(self, number: int, clock: Clock) -> None:
        self.clock = clock
        self.loop = asyncio.new_event_loop()
        self.loop.set_task_factory(self._task)  # type: ignore[arg-type]
        #: The turns on this loop (the run loop's lock).
        self.turns: set[Turn] = set()
        #: The step running now, the time it began and the process's starved time then (written
        #: by this loop's thread only).
        self.step: tuple[Turn | None, float, float] | None = None
        #: Left to the run that stalled it: it takes no new turn, and stops when that run ends.
        self.retired = False
        self._owners: weakref.WeakKeyDictionary[asyncio.Task[Any], Turn | None] = (
            weakref.WeakKeyDictionary()
        )
        self.thread = threading.Thread(
            target=self._serve, name=f"mcpq-run-loop-{number}", daemon=True
        )
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def _task(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        turn = TURN.get() if context is None else context.get(TURN)
        task = asyncio.Task(_stepped(coro, self, turn), loop=loop, context=context)
        self._owners[task] = turn
        return task

    def cancel_moved(self) -> None:
        """(On this loop.) Cancel the tasks of moved turns: one waiting on a long timer would
        otherwise keep this loop, and its thread, alive until it fires."""
        for task, turn in list(self._owners.items()):
            if turn is not None and turn.moved and not task.done():
                task.cancel()

    def cancel_all(self) -> None:
        for task in asyncio.all_tasks(self.loop):
            task.cancel()

    def stop_soon(self) -> None:
        with contextlib.suppress(RuntimeError):  # closed already
            self.loop.call_soon_threadsafe(self.loop.stop)


def _stack(ident: int | None) -> list[FrameType]:
    """The thread ``ident``'s frames, outermost first."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    stack: list[FrameType] = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    stack.reverse()
    return stack


def importing(ident: int | None) -> bool:
    """Whether the thread ``ident`` is importing a module (importlib's ``_find_and_load`` is
    on its stack: the module's first import in this process, run by ``import``)."""
    return any(
        f.f_code.co_name == "_find_and_load" and f.f_code.co_filename.startswith("<frozen")
        for f in _stack(ident)
    )


def blocked_at(ident: int | None) -> str:
    """Where the thread ``ident`` is: the tool's line and what it called (file names, lines
    and functions only: never a value)."""
    stack = _stack(ident)  # outermost first
    # The task's coroutine is the frame after the step driver's: the tool, or what wraps it.
    drivers = [i for i, f in enumerate(stack) if f.f_code is _Steps._step.__code__]
    inner = stack[drivers[-1] + 1 :] if drivers else stack
    if not inner:
        return "an unknown place"
    own = [f for f in inner if not _library(f.f_code.co_filename)] or inner[:1]
    text = _frame(own[-1])
    if inner[-1] is not own[-1]:
        text += f" (inside {_frame(inner[-1])})"
    return text


#: mcpq's own run machinery (the context, the steps): never the line to name.
_OURS = (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent / "shared")


def _library(filename: str) -> bool:
    if filename.startswith("<"):  # frozen (importlib's), or code compiled from a string
        return True
    if "site-packages" in filename or filename.startswith(sys.base_prefix):
        return True
    with contextlib.suppress(OSError):
        return any(Path(filename).resolve().is_relative_to(ours) for ours in _OURS)
    return False


def _frame(frame: FrameType) -> str:
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name}"
