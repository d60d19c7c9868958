"""A run's steps (``ctx.step``, ``ctx.step_key``): the half of
:class:`~mcpq.workers.context.RunContext` that makes a side effect once-only. ``fn`` runs once
per task and its JSON value is stored; a replay gets the stored value. Each step is a span of
the run's trace when tracing is on (``mcpq.shared.tracing``), marked memoized on a replay.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar, overload

from mcpq.shared import tracing
from mcpq.shared.bounds import LimitExceeded, check_bytes
from mcpq.shared.errors import StoreUnavailable, ToolError
from mcpq.shared.flag import Flag
from mcpq.shared.store import Reply, StepStart, TaskStore
from mcpq.shared.tool_context import step_key
from mcpq.workers.interrupts import raise_for

T = TypeVar("T")
#: How long a step's value is retried through a store outage before the run gives up on it.
SAVE_PATIENCE_S = 60.0


class RunSteps:
    """Mixed into ``RunContext``, which sets these attributes."""

    _store: TaskStore
    ref: str
    gen: int
    _lease_ms: int
    _max_step_bytes: int
    _trace: Any
    cancel_seen: Flag
    _stopped_by: Reply

    def _inside(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _flush_report(self) -> None:
        raise NotImplementedError

    def step_key(self, name: str) -> str:
        return step_key(self.ref, name)

    @overload
    def step(self, name: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...
    @overload
    def step(self, name: str, fn: Callable[[], T]) -> T: ...
    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        with self.step_span(name) as span:
            start, _ = self.begin_step(name)
            span.set("mcpq.step.memoized", start.found)
            if start.found:
                return start.value
            result = fn()  # the tool's own code: it counts towards max_run_s like any other
            if inspect.isawaitable(result):
                # A coroutine runs only when awaited: none of fn's effects has happened yet.
                getattr(result, "close", lambda: None)()
                raise TypeError(
                    f"ctx.step({name[:64]!r}): fn is async: await the step in an async def "
                    "tool, passing the async function itself; a plain tool passes a plain "
                    "function"
                )
            return self.end_step(name, result)

    def step_span(self, name: str) -> AbstractContextManager[tracing.Span]:
        """The step's span, a child of the run's (tracing on; else a shared no-op): its name,
        and whether a replay got its memo (``mcpq.step.memoized``); never its value."""
        return tracing.current().child_span("step", {"mcpq.step.name": name[:100]}, self._trace)

    def begin_step(self, name: str) -> tuple[StepStart, float]:
        """A step's first half (:meth:`_begin_step`): the memo, or the proof that ``fn`` may
        run, with the ``time.monotonic()`` past which that proof is no longer used."""
        with self._inside():
            return self._begin_step(name)

    def end_step(self, name: str, result: Any) -> Any:
        """A step's second half: store what ``fn`` returned; returns the stored value."""
        try:
            check_bytes(f"step {name[:64]!r}", result, self._max_step_bytes, "MCPQ_MAX_STEP_BYTES")
        except LimitExceeded as exc:
            raise ToolError(str(exc)) from None
        with self._inside():
            reply, stored = self._save_step(name, result)
        if reply is not Reply.OK:
            raise_for(reply)
        return stored

    def _begin_step(self, name: str) -> tuple[StepStart, float]:
        """The memo, or proof that this run may call the step's ``fn`` now.

        NOTE: the memo is read fenced, with proof that this run still holds the task and a
        live lease, in one round trip, immediately before ``fn``: a run that was taken over
        (paused or cut off past its lease while the sweeper re-sent its task) stops here
        instead of calling ``fn`` a second time. The proof is that the lease runs at least
        half a lease past the moment the request went out; it is used only while a quarter of
        a lease is left of that, on this process's clock, and is sought again otherwise: a
        thread that waited long for the GIL after the reply, or a process stopped (SIGSTOP)
        right there, does not call ``fn`` on a lease that may have lapsed (the soak once saw
        one do so a second after its successor had). What remains is the few instructions
        between this check and ``fn``'s first."""
        while True:
            if self.cancel_seen.is_set():  # a cancel, or a takeover, this worker knows of
                raise_for(self._stopped_by)
            sent = time.monotonic()
            start = self._store.begin_step(self.ref, self.gen, name, self._lease_ms)
            if start.reply is not Reply.OK:
                raise_for(start.reply)
            fresh_until = sent + self._lease_ms / 4000
            if start.found or time.monotonic() < fresh_until:
                return start, fresh_until

    def _save_step(self, name: str, value: Any) -> tuple[Reply, Any]:
        """Store what ``fn`` returned, through a store outage: ``fn`` has had its effect, and a
        run that gave up here would leave the next run to call it again. Retried (with its
        pending report first) for up to ``SAVE_PATIENCE_S``: a Redis restart or a Sentinel
        failover takes seconds. A run taken over meanwhile still has its value kept
        (``save_step.lua`` keeps an earlier generation's), and is refused."""
        deadline, pause = time.monotonic() + SAVE_PATIENCE_S, 0.05
        while True:
            try:
                self._flush_report()
                return self._store.save_step(self.ref, self.gen, name, value)
            except StoreUnavailable:
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
