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
from collections.abc import Callable, Iterator
from typing import Any

from mcpq.shared.errors import TaskCancelled

log = logging.getLogger("mcpq.worker")


class RunAbandoned(BaseException):
    """The run was stopped from outside (its tool ignored its cancel, or its run limit): the
    job has been answered already; what the tool returns now is dropped."""


class ToolCall:
    """One call of a tool's function with its context and arguments."""

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

    # -- running ---------------------------------------------------------------------------------
    def here(self) -> Any:
        """Run on the calling thread (the job's own); ``RunAbandoned`` once :meth:`abandon` took
        the run away, whatever the tool did."""
        with self._lock:
            if self._abandoned:  # abandoned before it started: nothing to run
                raise RunAbandoned()
            self._ident = threading.get_ident()
        with self._ending():
            value = self._call()
            if inspect.iscoroutine(value):
                value = self._run_async(value)
        return value

    async def on_loop(self) -> Any:
        """Run an ``async def`` tool's coroutine as a task of the running loop (the process's
        run loop, ``mcpq.workers.run_loop``): :meth:`interrupt` cancels it there, as on a loop
        of its own. Nothing is raised into a thread: :meth:`abandon` only cancels it."""
        with self._lock:
            if self._abandoned:
                raise RunAbandoned()
        with self._ending():
            value = self._call()
            if inspect.iscoroutine(value):
                task = self._started(asyncio.get_running_loop(), value)
                try:
                    value = await asyncio.shield(task)
                except asyncio.CancelledError:
                    if not task.done():  # the run itself is cancelled (the loop stops)
                        task.cancel()
                        raise
                    raise self._stop() from None
                finally:
                    with self._lock:
                        self._loop = self._task = None
        return value

    def _started(self, loop: asyncio.AbstractEventLoop, coroutine: Any) -> asyncio.Task[Any]:
        """The tool's coroutine as a task of ``loop``, where :meth:`interrupt` finds it."""
        task = loop.create_task(coroutine)
        with self._lock:
            self._loop, self._task = loop, task
            if self._interrupted:  # the cancel came before the task existed
                task.cancel()
        return task

    @contextlib.contextmanager
    def _ending(self) -> Iterator[None]:
        """The call, then :meth:`_finish`: ``RunAbandoned`` instead of whatever the call
        returned or raised once the run was taken away."""
        try:
            yield
        except BaseException:
            if self._finish():
                raise RunAbandoned() from None
            raise
        if self._finish():
            raise RunAbandoned()

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
                    loop.call_soon_threadsafe(task.cancel)

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
