"""The context an ``async def`` tool gets: the run's :class:`RunContext`, with its waits
awaitable and run off the tool's event loop.

``await ctx.elicit(...)``, ``await ctx.sleep(...)``, ``await ctx.ask(...)``, ``await
ctx.sample(...)`` and ``await ctx.step(name, async_fn)`` run the blocking call on a thread of
the run's own, so the tool's other coroutines go on while it waits (a heartbeat of its own, an
HTTP call). The calls of one run take that one thread in the order they were made: the context
is not made for two calls at once, and the replay contract numbers questions by their order,
which a pool of threads would shuffle. ``report``, ``cancelled``, ``prelude`` and ``step_key``
answer at once, on the tool's thread (``report`` only records the message; awaiting what it
returns is harmless).

Cancellation: the lease keeper interrupts the run's context (a wait ends at once, raising) and
cancels the tool's asyncio task (``mcpq.workers.execution``), so the ``await`` raises
``CancelledError`` in the tool whichever comes first.

Typing: ``ToolContext`` declares what a call returns as awaitable values (``Answer``, ``Done``),
so one annotation type-checks in sync and async tools. Here the calls return coroutines that
produce those values: the one place that is cast (:func:`_awaited`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar, cast, overload

from mcpq.shared.elicitation import Elicited
from mcpq.shared.tool_context import Answer, Answers, Done, InputRequest, LogLevel
from mcpq.workers.context import RunContext

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
M = TypeVar("M")


def _awaited(coroutine: Coroutine[Any, Any, Any], kind: type[R]) -> R:
    """``coroutine``, typed as the awaitable value ``ToolContext`` promises (awaiting either
    gives that value)."""
    return cast(R, coroutine)


class AsyncRunContext:
    """A :class:`mcpq.shared.tools.ToolContext` for an async tool (see the module's doc)."""

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._thread: ThreadPoolExecutor | None = None  # started at the first wait

    async def _off_loop(self, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="mcpq-ctx")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(call, *args, **kwargs))

    def close(self) -> None:
        """The run is over: once its last call has returned (a cancel or a takeover interrupts
        a wait at once), the thread ends."""
        if self._thread is not None:
            self._thread.shutdown(wait=True, cancel_futures=True)

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
            self._ctx.sleep(0)
            await asyncio.sleep(0)
            return
        await self._off_loop(self._ctx.sleep, seconds)

    def ask(self, *requests: InputRequest) -> Answers:
        return _awaited(self._off_loop(self._ctx.ask, *requests), Answers)

    @overload
    def elicit(self, message: str, schema: dict[str, Any]) -> Answer: ...
    @overload
    def elicit(self, message: str, schema: type[M]) -> Elicited[M]: ...
    @overload
    def elicit(self, message: str, *, response_type: type[M]) -> Elicited[M]: ...
    def elicit(self, message: str, schema: Any = None, *, response_type: Any = None) -> Any:
        ctx: Any = self._ctx  # the overloads are the caller's; the call passes them on as given
        call = self._off_loop(ctx.elicit, message, schema, response_type=response_type)
        typed = response_type is not None or not isinstance(schema, dict)
        return _awaited(call, Elicited if typed else Answer)

    def elicit_url(
        self, message: str, url: str, elicitation_id: str | None = None
    ) -> Elicited[None]:
        call = self._off_loop(self._ctx.elicit_url, message, url, elicitation_id)
        return _awaited(call, Elicited)

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> Answer:
        call = self._off_loop(self._ctx.sample, messages, max_tokens, **params)
        return _awaited(call, Answer)

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
        while True:
            start, fresh_until = await self._off_loop(self._ctx.begin_step, name)
            # The proof that this run may call fn holds only so long (RunContext._begin_step):
            # a loop slow to resume this coroutine seeks it again rather than use it late.
            if start.found or time.monotonic() < fresh_until:
                break
        if start.found:
            return start.value
        result = await fn()  # the tool's own code, on its own loop
        return await self._off_loop(self._ctx.end_step, name, result)
