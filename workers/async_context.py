"""The context an ``async def`` tool gets: the run's :class:`RunContext`, its waits awaited on
the tool's event loop.

``await ctx.elicit(...)``, ``await ctx.sleep(...)``, ``await ctx.ask(...)``, ``await
ctx.sample(...)`` and ``await ctx.step(name, async_fn)`` suspend only the coroutine that awaits:
the tool's other coroutines go on (``asyncio.gather`` of an HTTP call and a question). Each
runs the same wait as a sync tool's (:meth:`RunContext.ask_plan`...), driven here: its round
trips to Redis (a millisecond each) on a small pool the worker process shares
(:data:`ROUND_TRIPS`), its waits for an answer or a cancel awaited on the loop, woken by the
run's watch (:attr:`Watch.on_notify`). No thread is held while a run waits: the API is made for
one event loop per worker process holding thousands of waiting runs.

Order: the calls of one run take its turn (an ``asyncio.Lock``, first come first served) in the
order they were made: the replay contract numbers questions by their order, and two questions
asked at once in a ``gather`` are asked one after the other, in the order the tool made them.
A step's ``fn`` runs outside the turn (it may use the context itself). ``report``,
``report_progress``, the log calls, ``cancelled``, ``prelude`` and ``step_key`` answer at once,
on the tool's thread (they only record; awaiting what they return is harmless).

Cancellation: the lease keeper interrupts the run's context (its watch wakes the waiting
coroutine, whose next look raises) and cancels the tool's asyncio task
(``mcpq.workers.execution``), so the ``await`` raises ``CancelledError`` in the tool whichever
comes first.

Typing: ``ToolContext`` declares what a call returns as awaitable values (``Answer``, ``Done``),
so one annotation type-checks in sync and async tools. Here the calls return coroutines that
produce those values: the one place that is cast (:func:`_awaited`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast, overload

from mcpq.shared import tracing
from mcpq.shared.elicitation import Elicited
from mcpq.shared.tool_context import (
    Answer,
    Answers,
    Contents,
    Done,
    InputRequest,
    LogLevel,
    sampling,
)
from mcpq.workers.context import Question, RunContext, WaitPlan

R = TypeVar("R")
T = TypeVar("T")
M = TypeVar("M")

#: Threads for the round trips of every async run of a process (short: a script each; the first
#: wait of a run also confirms its subscription). Never a wait for an answer: those are awaited.
ROUND_TRIP_THREADS = 8
_pool: tuple[int, ThreadPoolExecutor] | None = None


def round_trips() -> ThreadPoolExecutor:
    """This process's pool, made at its first use. A pool process forked from a parent that had
    one makes its own: the parent's threads do not exist in the child."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(ROUND_TRIP_THREADS, "mcpq-ctx"))
    return _pool[1]


def _awaited(coroutine: Coroutine[Any, Any, Any], kind: type[R]) -> R:
    """``coroutine``, typed as the awaitable value ``ToolContext`` promises (awaiting either
    gives that value)."""
    return cast(R, coroutine)


async def _wrapped(future: Awaitable[R]) -> R:
    return await future


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _advance(plan: WaitPlan[T]) -> tuple[bool, Any]:
    """One stretch of ``plan``'s round trips: (False, seconds to wait) or (True, its value).
    (A ``StopIteration`` cannot cross a future: it is turned into a value here.)"""
    try:
        return False, next(plan)
    except StopIteration as done:
        return True, done.value


class AsyncRunContext:
    """A :class:`mcpq.shared.tools.ToolContext` for an async tool (see the module's doc)."""

    __slots__ = ("_ctx", "_notified", "_turn", "_waiter", "_wake")

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._turn: asyncio.Lock | None = None  # made on the tool's loop, at its first call
        # (On the loop's thread only.) The watch was notified since the last wait ended, and
        # the future the wait awaits now. Not an ``asyncio.Event`` and ``wait_for``: those
        # are a deque, a task (with its step driver) and a future for each waiting run, the
        # largest part of a waiting run's memory after the tool's own.
        self._notified = False
        self._waiter: asyncio.Future[None] | None = None
        self._wake: Callable[[], None] | None = None

    def close(self) -> None:
        """The run is over: its watch no longer wakes this loop. (Unless a later turn of the
        run, moved off a stalled loop, set its own wake: the watch is the run's, across turns.)"""
        if self._wake is not None and self._ctx.watch.on_notify is self._wake:
            self._ctx.watch.on_notify = None

    # -- driving a wait on the loop ----------------------------------------------------------------
    def _started(self) -> asyncio.Lock:
        if self._turn is None:
            loop = asyncio.get_running_loop()
            self._turn = asyncio.Lock()
            woken = self._woken

            def wake() -> None:  # on the notifying thread (the pub/sub listener, the keeper)
                with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
                    loop.call_soon_threadsafe(woken)

            self._ctx.watch.on_notify = self._wake = wake
        return self._turn

    async def _round_trips(self, call: Callable[[], R]) -> R:
        loop = asyncio.get_running_loop()
        if self._ctx.trace is None:  # tracing off
            return await loop.run_in_executor(round_trips(), call)
        return await loop.run_in_executor(round_trips(), _within, self._ctx.trace, call)

    async def _drive(self, plan: WaitPlan[T]) -> T:
        """``RunContext.drive`` on the loop: round trips on the shared pool, waits awaited."""
        done, value = await self._round_trips(lambda: _advance(plan))
        while not done:
            await self._wait(float(value))
            done, value = await self._round_trips(lambda: _advance(plan))
        return cast(T, value)

    async def _wait(self, seconds: float) -> None:
        """Until the run's watch is notified (an answer, a cancel, an interrupt) or ``seconds``
        pass; the plan looks at the task again either way (as ``Watch.wait``)."""
        watch = self._ctx.watch
        if seconds > 0 and not watch.changed.is_set() and not self._notified:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = loop.call_later(seconds, _resolve, waiter)
            try:
                await waiter
            finally:  # (a cancel too: the timer must not outlive the wait)
                timer.cancel()
                self._waiter = None
        self._notified = False
        watch.changed.clear()

    def _woken(self) -> None:
        """(On the loop.) The watch was notified: the wait going on ends, or the next one
        returns at once."""
        self._notified = True
        if self._waiter is not None:
            _resolve(self._waiter)

    async def _in_turn(self, make: Callable[[], WaitPlan[T]]) -> T:
        """A wait of this run, in its turn; ``make`` builds the plan once the turn is ours (a
        question's number is taken then)."""
        async with self._started():
            with self._ctx.inside():
                return await self._drive(make())

    async def _ask(self, question: Callable[[], Question]) -> Any:
        """One question (built in the run's turn: a URL question's id takes its number)."""
        results: list[Callable[[dict[str, Any]], Any]] = []

        def plan() -> WaitPlan[Answers]:
            request, result = question()
            results.append(result)
            return self._ctx.ask_plan((request,))

        answers = await self._in_turn(plan)
        return results[0](answers[0])

    # -- answered at once ------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._ctx.cancelled

    @property
    def prelude(self) -> dict[str, Any]:
        return self._ctx.prelude

    def report(self, message: str) -> Done:
        return self._ctx.report(message)

    # Recorded at once, written later (mcpq.workers.reports), like report.
    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Done:
        return self._ctx.report_progress(progress, total, message)

    def log(self, level: LogLevel, data: Any, *, logger_name: str | None = None) -> Done:
        return self._ctx.log(level, data, logger_name=logger_name)

    def debug(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self._ctx.log("debug", data, logger_name=logger_name)

    def info(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self._ctx.log("info", data, logger_name=logger_name)

    def warning(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self._ctx.log("warning", data, logger_name=logger_name)

    def error(self, data: Any, *, logger_name: str | None = None) -> Done:
        return self._ctx.log("error", data, logger_name=logger_name)

    def step_key(self, name: str) -> str:
        return self._ctx.step_key(name)

    # -- awaited ---------------------------------------------------------------------------------
    def sleep(self, seconds: float) -> Done:
        return _awaited(self._sleep(seconds), Done)

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            # A yield point with no round trip, as in a sync tool; and one for the loop too.
            self._ctx.yield_point()
            await asyncio.sleep(0)
            return
        await self._in_turn(lambda: self._ctx.sleep_plan(seconds))

    def ask(self, *requests: InputRequest) -> Answers:
        return _awaited(self._in_turn(lambda: self._ctx.ask_plan(requests)), Answers)

    @overload
    def elicit(self, message: str, schema: dict[str, Any]) -> Answer: ...
    @overload
    def elicit(self, message: str, schema: type[M]) -> Elicited[M]: ...
    @overload
    def elicit(self, message: str, *, response_type: type[M]) -> Elicited[M]: ...
    def elicit(self, message: str, schema: Any = None, *, response_type: Any = None) -> Any:
        # Built now, not in the turn: a model that cannot be a form is refused at the call.
        question = self._ctx.elicit_question(message, schema, response_type)
        typed = response_type is not None or not isinstance(schema, dict)
        return _awaited(self._ask(lambda: question), Elicited if typed else Answer)

    def elicit_url(
        self, message: str, url: str, elicitation_id: str | None = None
    ) -> Elicited[None]:
        call = self._ask(lambda: self._ctx.url_question(message, url, elicitation_id))
        return _awaited(call, Elicited)

    def read_resource(self, uri: str) -> Contents:
        # The resource's own code, which may block: off the loop (the default executor), never
        # on the pool of round trips.
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(None, self._ctx.read_resource, uri)
        return _awaited(_wrapped(call), Contents)

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> Answer:
        request = sampling(messages, max_tokens, **params)
        return _awaited(self._ask(lambda: (request, Answer)), Answer)

    @overload
    def step(self, name: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...
    @overload
    def step(self, name: str, fn: Callable[[], T]) -> T: ...
    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """An async ``fn`` makes an awaitable step, whose round trips run off the loop; a plain
        ``fn`` runs the step as a sync tool would, returning its value (what its type says)."""
        if inspect.iscoroutinefunction(fn):
            return self._step(name, fn)
        return self._ctx.step(name, fn)

    async def _step(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        # The memo, or the proof that this run may call fn, in the run's turn; fn outside it
        # (it may use the context); its value stored in the turn again.
        with self._ctx.step_span(name) as span:
            async with self._started():
                while True:
                    start, fresh_until = await self._round_trips(lambda: self._ctx.begin_step(name))
                    # The proof that this run may call fn holds only so long
                    # (RunContext._begin_step): a loop slow to resume this coroutine seeks it
                    # again rather than use it late.
                    if start.found or time.monotonic() < fresh_until:
                        break
            span.set("mcpq.step.memoized", start.found)
            if start.found:
                return start.value
            result = await fn()  # the tool's own code, on its own loop
            async with self._started():
                return await self._round_trips(lambda: self._ctx.end_step(name, result))


def _within(parent: Any, call: Callable[[], R]) -> R:
    """``call()`` on a pool thread inside the run's trace: its Redis scripts are the run's spans'
    children, as they are for a tool that runs on the job's own thread."""
    with tracing.current().within(parent):
        return call()
