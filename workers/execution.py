"""How a tool's code runs inside a job: sync or ``async def``, always on the job's own thread
(a prefork pool process runs one job; an io pool thread runs one job, ``mcpq.workers.io_pool``), and
how a run that ignores its cancel is stopped.

- **async tools** get an event loop of their own, on the thread that runs them (on an io
  worker they wait on the process's run loop instead: ``mcpq.workers.run_loop``): ``await`` an
  HTTP call, a database, a subprocess. A cancel cancels the asyncio task at once, wherever it
  awaits (``CancelledError`` inside the tool, ``TaskCancelled`` for the run; a run taken over
  ends ``RunSuperseded``, as a sync one would). Their context's waits are awaited, and run off
  that loop (``mcpq.workers.async_context``).
- **prefork (cpu pools)**: a tool that ignores its cancel for the grace period gets its pool
  process killed (Celery starts another): nothing else runs there.
- **threads (io pools)**: a tool that ignores its cancel gets ``TaskCancelled`` raised inside its
  thread (it ends at the next Python instruction it runs), and its job is let go of at once
  (``mcpq.workers.io_pool.Slot.let_go``): Celery has its answer, another thread takes the slot, and
  this one leaves the pool when the tool returns (blocked in C code, it leaves when that call
  returns; whatever it then writes is fenced by the run's generation). The process, and every
  other run in it, goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from mcpq.shared.errors import TaskCancelled

log = logging.getLogger("mcpq.worker")


class RunAbandoned(BaseException):
    """The run was stopped from outside (its tool ignored its cancel, or its run limit): the
    job has been answered already; what the tool returns now is dropped."""


class ToolCall:
    """One call of a tool's function with its context and arguments."""

    __slots__ = (
        "_abandoned",
        "_call",
        "_cancels",
        "_done",
        "_ident",
        "_interrupted",
        "_lock",
        "_loop",
        "_stop",
        "_task",
    )

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Future[Any] | None = None
        self._interrupted = False
        #: What the run raises once its asyncio task is cancelled (see :meth:`interrupt`).
        self._stop: type[BaseException] = TaskCancelled
        self._ident: int | None = None  # the thread running the tool
        self._done = False
        self._abandoned = False
        #: The cancels :meth:`interrupt` made of the run's task, on the run loop (``_awaited``).
        self._cancels = 0

    # -- running ---------------------------------------------------------------------------------
    def here(self) -> Any:
        """Run on the calling thread (the job's own); ``RunAbandoned`` once :meth:`abandon` took
        the run away, whatever the tool did."""
        with self._lock:
            if self._abandoned:  # abandoned before it started: nothing to run
                raise RunAbandoned()
            self._ident = threading.get_ident()
        try:
            value = self._call()
            if inspect.iscoroutine(value):
                value = self._run_async(value)
        except BaseException:
            self._ended()
            raise
        self._ended()
        return value

    async def on_loop(self) -> Any:
        """Run an ``async def`` tool's coroutine in the running task, on the running loop (the
        process's run loop, ``mcpq.workers.run_loop``): :meth:`interrupt` cancels it there, as
        on a loop of its own. Nothing is raised into a thread: :meth:`abandon` only cancels it."""
        with self._lock:
            if self._abandoned:
                raise RunAbandoned()
        try:
            value = self._call()
            if inspect.iscoroutine(value):
                value = await self._awaited(value)
        except BaseException:
            self._ended()
            raise
        self._ended()
        return value

    async def _awaited(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """The tool's coroutine, awaited in the run's own task.

        NOTE: not in a task of its own, as on a loop of the tool's own: that was a second
        task, its step driver and a shield for each run, 16 MiB at 10,000 waiting runs. So
        :meth:`interrupt` cancels the run's task, and only while the tool is awaited here: its
        cancel is made on the loop (:meth:`_cancel_on_loop`), between two steps, so it cannot
        land after this await has ended. Each cancel it made is counted: a ``CancelledError``
        is the interrupt's (the run raises ``self._stop``) only when the task was asked for no
        other cancel (the loop stopping, the run moving off a stalled loop), which goes on up."""
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), task
            interrupted = self._interrupted
        try:
            if interrupted:  # the cancel came before the tool started: it never does
                coroutine.close()
                raise self._stop()
            return await coroutine
        except asyncio.CancelledError:
            if self._cancels and task.cancelling() == self._cancels:
                self._uncancel(task)
                raise self._stop() from None
            raise
        finally:
            with self._lock:
                self._loop = self._task = None
            self._uncancel(task)  # (a tool that swallowed the cancel leaves none pending)

    def _uncancel(self, task: asyncio.Task[Any]) -> None:
        while self._cancels:
            self._cancels -= 1
            task.uncancel()

    def _cancel_on_loop(self, task: asyncio.Future[Any]) -> None:
        """(On the task's loop.) Cancel the tool where it awaits, if it still does."""
        if self._task is task and task.cancel():
            self._cancels += 1

    def _started(self, loop: asyncio.AbstractEventLoop, coroutine: Any) -> asyncio.Task[Any]:
        """The tool's coroutine as a task of ``loop``, where :meth:`interrupt` finds it."""
        task = loop.create_task(coroutine)
        with self._lock:
            self._loop, self._task = loop, task
            if self._interrupted:  # the cancel came before the task existed
                task.cancel()
        return task

    def _ended(self) -> None:
        """The call returned or raised: ``RunAbandoned`` instead, once the run was taken away.
        (Not a context manager: on the run loop, its generator would be held while the tool
        waits, for each of 10,000 runs.)"""
        if self._finish():
            raise RunAbandoned() from None

    def _finish(self) -> bool:
        """The call returned. Under the lock that :meth:`abandon` takes: either the call is done
        first, and no exception is ever raised into this thread for it, or it was abandoned
        first (True), and the exception was raised into it already (delivered at its next
        bytecode: here, or in the caller's handling of ``RunAbandoned``, which ends the run
        either way)."""
        with self._lock:
            self._done = True
            return self._abandoned

    def _run_async(self, coroutine: Any) -> Any:
        loop = asyncio.new_event_loop()
        try:
            task = self._started(loop, coroutine)
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                raise self._stop() from None
        finally:
            with self._lock:
                self._loop = self._task = None
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    # -- stopping (called from the lease keeper's thread) -----------------------------------------
    def interrupt(self, stop: type[BaseException] | None = None) -> None:
        """The task was cancelled (or the run taken over: ``stop`` is what the run then raises,
        ``TaskCancelled`` unless told): cancel an async tool's task where it awaits. (A sync
        tool sees it at its next context call; the context wakes it if it waits.)"""
        with self._lock:
            self._interrupted = True
            if stop is not None:
                self._stop = stop
            loop, task = self._loop, self._task
            if loop is not None and task is not None:
                # The loop may have closed meanwhile: the run is ending anyway.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._cancel_on_loop, task)

    def abandon(self) -> bool:
        """The grace is over (threads): raise ``TaskCancelled`` in the tool's thread. True when
        the run was taken away (its job is to be let go of); False when it had ended."""
        self.interrupt()
        with self._lock:
            if self._done or self._abandoned:
                return False
            self._abandoned = True
            if self._ident is not None:
                # The only way to stop a Python thread from outside; it takes effect at the
                # thread's next bytecode (not inside a blocking C call, hence the job is let go
                # of rather than waited for). Under the lock: the call cannot have ended.
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._ident), ctypes.py_object(TaskCancelled)
                )
        return True
